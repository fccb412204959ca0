// The Chrome-trace reader's fields on untrusted traces (issue 13): numbers
// are range-checked before narrowing, and what the reader accepts the writer
// writes back unchanged (a negative op once vanished on write; a negative
// dur or ts = 1e308 was read, then refused on write).
#include <cstdint>
#include <random>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "traces/chrome_trace.hpp"
#include "traces/trace_error.hpp"

namespace rm::traces {
namespace {

using ::testing::HasSubstr;

nlohmann::json event() {
  return {{"ph", "X"}, {"name", "attn"}, {"cat", "attn_fwd"}, {"pid", 1}, {"tid", 2}, {"ts", 1.5}, {"dur", 2.0},
          {"args", {{"op", 3}, {"layer", 0}, {"phase", "forward"}, {"step", 1}, {"bytes", 8}, {"flops", 1e9}}}};
}

std::string trace_of(const nlohmann::json& ev) {
  return nlohmann::json{{"traceEvents", {ev}}, {"otherData", {{"source", "analytic"}}}}.dump();
}

std::string error_of(const std::string& text) {
  try {
    from_chrome_json(text, "t.json");
  } catch (const TraceError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string error_with(const char* key, const nlohmann::json& value) {
  auto ev = event();
  ev[key] = value;
  return error_of(trace_of(ev));
}
std::string error_with_arg(const char* key, const nlohmann::json& value) {
  auto ev = event();
  ev["args"][key] = value;
  return error_of(trace_of(ev));
}

TEST(UntrustedTraceFields, IdsOutOfRangeAreRefusedNotNarrowed) {
  EXPECT_THAT(error_with("pid", int64_t(1) << 32), HasSubstr("t.json: traceEvents[0]: \"pid\" must be an integer in"));
  EXPECT_THAT(error_with("tid", UINT64_MAX), HasSubstr("traceEvents[0]: \"tid\" must be an integer in"));
  EXPECT_THAT(error_with("pid", 1.5), HasSubstr("\"pid\" must be an integer"));
  EXPECT_THAT(error_with_arg("op", 6.67e19), HasSubstr("traceEvents[0]: args.op has the wrong type or range: expected an integer in [0, "));
  EXPECT_THAT(error_with_arg("op", UINT64_MAX), HasSubstr("args.op has the wrong type or range"));
  EXPECT_THAT(error_with_arg("layer", int64_t(1) << 40), HasSubstr("args.layer has the wrong type or range"));
  EXPECT_THAT(error_with_arg("samples", int64_t(1) << 31), HasSubstr("args.samples has the wrong type or range"));
}

TEST(UntrustedTraceFields, NegativeIdsAreRefusedRatherThanDroppedOnWrite) {
  EXPECT_THAT(error_with_arg("op", -5), HasSubstr("args.op has the wrong type or range: expected an integer in [0, "));
  EXPECT_THAT(error_with_arg("layer", -3), HasSubstr("args.layer has the wrong type or range: expected an integer in [0, "));
  EXPECT_THAT(error_with_arg("step", -2), HasSubstr("args.step has the wrong type or range: expected an integer in [0, "));
  EXPECT_THAT(error_with_arg("bytes", -8), HasSubstr("args.bytes has the wrong type or range: expected an integer in [0, "));
}

TEST(UntrustedTraceFields, TimesTheWriterCouldNotWriteBackAreRefused) {
  EXPECT_THAT(error_with("dur", -1), HasSubstr("traceEvents[0]: \"dur\" must be a number in [0, 1e+18]"));
  EXPECT_THAT(error_with("ts", 1e308), HasSubstr("traceEvents[0]: \"ts\" must be a number in [-1e+18, 1e+18]"));
  EXPECT_THAT(error_with("ts", "12"), HasSubstr("\"ts\" must be a number"));
  EXPECT_THAT(error_with_arg("flops", -1.0), HasSubstr("args.flops has the wrong type or range: expected a finite number >= 0"));
}

TEST(UntrustedTraceFields, WrongTypesAreTraceErrors) {
  // nlohmann's value() threw its own type_error for these.
  EXPECT_THAT(error_with("name", 5), HasSubstr("traceEvents[0]: name must be a string, got 5"));
  EXPECT_THAT(error_with("ph", nlohmann::json::array()), HasSubstr("traceEvents[0]: ph must be a string"));
  EXPECT_THAT(error_with_arg("phase", 1), HasSubstr("args.phase must be a string"));
  const std::string edge =
      R"({"traceEvents": [], "otherData": {"source": "analytic", "edges": [[18446744073709551615, 0, "p2p"]]}})";
  EXPECT_THAT(error_of(edge), HasSubstr("otherData.edges[0]: expected [from op, to op, kind]"));
}

// Whatever the reader accepts, the writer writes and the reader reads back the same.
TEST(UntrustedTraceFields, WhatReadsWritesBack) {
  std::mt19937_64 rng(13);
  auto pick = [&](std::initializer_list<nlohmann::json> v) { return *(v.begin() + rng() % v.size()); };
  int accepted = 0;
  for (int i = 0; i < 500; ++i) {
    auto ev = event();
    ev["pid"] = pick({0, 7, INT32_MAX, INT32_MIN, -1});
    ev["ts"] = pick({0.0, 1e-3, 123456.789, 1e15, -1e18, 1e18});
    ev["dur"] = pick({0.0, 1e-6, 2.5, 1e18});
    ev["args"]["op"] = pick({0, 1, INT64_MAX});
    ev["args"]["samples"] = pick({0, 3});
    ev["args"]["spread_us"] = ev["args"]["samples"] == 0 ? 0.0 : 1.25;
    Timeline t;
    try {
      t = from_chrome_json(trace_of(ev), "t.json");
    } catch (const TraceError&) {
      continue;
    }
    ++accepted;
    const std::string once = to_chrome_json(t);  // throws nothing for what was read
    EXPECT_TRUE(approx_equal(from_chrome_json(once, "back.json"), t)) << ev.dump();
  }
  EXPECT_EQ(accepted, 500);
}

}  // namespace
}  // namespace rm::traces
