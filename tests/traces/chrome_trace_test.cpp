#include "traces/chrome_trace.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <utility>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/random_timeline.hpp"
#include "traces/text_file.hpp"
#include "traces/trace_error.hpp"

namespace rm::traces {
namespace {

namespace fs = std::filesystem;
using testing::random_timeline;

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("rm_traces_" + std::to_string(::getpid()) + "_" + name);
}

Event timed(int64_t op, double start_s, double end_s) {
  Event e;
  e.op = op;
  e.start_s = start_s;
  e.end_s = end_s;
  return e;
}

Timeline two_events() {
  Timeline t;
  t.source = Source::simgrid;
  t.metadata = {{"experiment", "demo"}, {"step_time_s", 0.25}};
  t.stream_names[{1, 2}] = "comm_inter";
  Event send = timed(7, 0.001, 0.0015);
  send.rank = 1;
  send.stream = 2;
  send.name = send.category = "send";
  send.layer = 3;
  send.phase = "forward";
  send.step = 2;
  send.bytes = 4096;
  Event kernel = timed(-1, 2e-6, 5e-6);
  kernel.name = kernel.category = "kernel";
  t.events = {send, kernel};
  return t;
}

TEST(ChromeTrace, StructureIsWhatPerfettoReads) {
  auto j = nlohmann::json::parse(to_chrome_json(two_events()));
  EXPECT_EQ(j["otherData"]["source"], "simgrid");
  EXPECT_EQ(j["otherData"]["format"], "ringmaster.timeline");
  EXPECT_EQ(j["otherData"]["metadata"]["experiment"], "demo");
  std::vector<nlohmann::json> slices, names;
  for (const auto& e : j["traceEvents"]) (e["ph"] == "X" ? slices : names).push_back(e);
  ASSERT_EQ(slices.size(), 2u);
  const auto& k = slices[0];  // canonical order: rank 0 first
  EXPECT_EQ(k["pid"], 0);
  EXPECT_EQ(k["tid"], 0);
  EXPECT_DOUBLE_EQ(k["ts"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(k["dur"].get<double>(), 3.0);
  EXPECT_FALSE(k["args"].contains("op"));  // no op: no args.op
  const auto& s = slices[1];
  EXPECT_EQ(s["pid"], 1);
  EXPECT_EQ(s["tid"], 2);
  EXPECT_DOUBLE_EQ(s["ts"].get<double>(), 1000.0);
  EXPECT_NEAR(s["dur"].get<double>(), 500.0, 1e-9);
  EXPECT_EQ(s["args"]["op"], 7);
  EXPECT_EQ(s["args"]["layer"], 3);
  EXPECT_EQ(s["args"]["phase"], "forward");
  EXPECT_EQ(s["args"]["step"], 2);
  EXPECT_EQ(s["args"]["bytes"], 4096);
  EXPECT_EQ(s["cat"], "send");
  auto has_name = [&](const std::string& what, int pid, int tid, const std::string& name) {
    for (const auto& e : names)
      if (e["name"] == what && e["pid"] == pid && e["tid"] == tid && e["args"]["name"] == name) return true;
    return false;
  };
  EXPECT_TRUE(has_name("process_name", 0, 0, "rank 0"));
  EXPECT_TRUE(has_name("process_name", 1, 0, "rank 1"));
  EXPECT_TRUE(has_name("thread_name", 1, 2, "comm_inter"));
  EXPECT_TRUE(has_name("thread_name", 0, 0, "stream 0"));
}

TEST(ChromeTrace, RoundTripsRandomTimelines) {
  for (unsigned seed = 0; seed < 40; ++seed) {
    Timeline t = random_timeline(seed);
    Timeline back = from_chrome_json(to_chrome_json(t), "mem");
    EXPECT_TRUE(approx_equal(t, back)) << "seed " << seed;
  }
}

TEST(ChromeTrace, EdgesRoundTripInOrderAndSendRecvGetFlowArrows) {
  Timeline t = two_events();
  Event recv = timed(8, 0.0012, 0.002);
  recv.rank = 0;
  recv.stream = 1;
  recv.name = recv.category = "recv";
  Event next = timed(9, 0.002, 0.003);
  t.events.push_back(recv);
  t.events.push_back(next);
  t.edges = {{8, 9, EdgeKind::dependency}, {7, 8, EdgeKind::p2p}, {7, 9, EdgeKind::stream},
             {9, 8, EdgeKind::collective}, {7, 8, EdgeKind::p2p}};
  const std::string text = to_chrome_json(t);
  const Timeline back = from_chrome_json(text, "mem");
  EXPECT_EQ(back.edges, t.edges);
  EXPECT_TRUE(approx_equal(t, back));

  // One flow per p2p edge: "s" on the send's slice, "f" bound to the enclosing recv slice, ids shared.
  std::vector<nlohmann::json> starts, finishes;
  const auto j = nlohmann::json::parse(text);
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "s") starts.push_back(e);
    if (e["ph"] == "f") finishes.push_back(e);
  }
  ASSERT_EQ(starts.size(), 2u);
  ASSERT_EQ(finishes.size(), 2u);
  EXPECT_NE(starts[0]["id"], starts[1]["id"]);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(starts[i]["id"], finishes[i]["id"]);
    EXPECT_EQ(starts[i]["pid"], 1);
    EXPECT_EQ(starts[i]["tid"], 2);
    EXPECT_GE(starts[i]["ts"].get<double>(), 1000.0);  // inside the send [1000, 1500] us
    EXPECT_LE(starts[i]["ts"].get<double>(), 1500.0);
    EXPECT_EQ(finishes[i]["pid"], 0);
    EXPECT_EQ(finishes[i]["tid"], 1);
    EXPECT_EQ(finishes[i]["bp"], "e");
    EXPECT_GE(finishes[i]["ts"].get<double>(), 1200.0);  // inside the recv [1200, 2000] us
    EXPECT_LE(finishes[i]["ts"].get<double>(), 2000.0);
  }
}

TEST(ChromeTrace, RejectsMalformedEdges) {
  Timeline t = two_events();
  t.edges = {{7, 7, EdgeKind::stream}};
  std::string text = to_chrome_json(t);
  const auto at = text.find("\"stream\"]");
  ASSERT_NE(at, std::string::npos);
  try {
    from_chrome_json(text.replace(at, 8, "\"sideways\""), "bad.json");
    ADD_FAILURE() << "accepted an unknown edge kind";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json: otherData.edges[0]: expected [from op, to op, kind]"),
              std::string::npos)
        << e.what();
  }
}

TEST(ChromeTrace, RoundTripKeepsSubMicrosecondTimes) {
  Timeline t;
  t.events.push_back(timed(1, 3.000000000123, 3.000000000456));
  Timeline back = from_chrome_json(to_chrome_json(t), "mem");
  ASSERT_EQ(back.events.size(), 1u);
  EXPECT_NEAR(back.events[0].start_s, 3.000000000123, 1e-14);
  EXPECT_NEAR(back.events[0].duration_s(), 0.333e-9, 1e-14);
}

TEST(ChromeTrace, FilesRoundTripPlainAndGzipped) {
  Timeline t = random_timeline(7, 500);
  for (std::string name : {"t.json", "t.json.gz"}) {
    auto p = temp_path(name);
    write_chrome_trace(t, p.string());
    EXPECT_TRUE(approx_equal(t, read_chrome_trace(p.string()))) << name;
    std::ifstream in(p, std::ios::binary);
    char magic[2] = {};
    in.read(magic, 2);
    EXPECT_EQ(static_cast<unsigned char>(magic[0]) == 0x1f, has_gz_suffix(name)) << name;
    fs::remove(p);
  }
}

TEST(ChromeTrace, OutputIsDeterministic) {
  Timeline t = random_timeline(3);
  Timeline shuffled = t;
  std::reverse(shuffled.events.begin(), shuffled.events.end());
  EXPECT_EQ(to_chrome_json(t), to_chrome_json(t));
  EXPECT_EQ(to_chrome_json(t), to_chrome_json(shuffled));  // event order does not matter
  auto a = temp_path("a.json.gz"), b = temp_path("b.json.gz");
  write_chrome_trace(t, a.string());
  write_chrome_trace(t, b.string());
  EXPECT_EQ(read_text_file(a.string()), read_text_file(b.string()));
  std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
  std::string ba((std::istreambuf_iterator<char>(fa)), {}), bb((std::istreambuf_iterator<char>(fb)), {});
  EXPECT_EQ(ba, bb);  // byte-identical gzip too
  fs::remove(a);
  fs::remove(b);
}

TEST(ChromeTrace, EmptyTimelineIsValidJson) {
  Timeline t;
  Timeline back = from_chrome_json(to_chrome_json(t), "mem");
  EXPECT_TRUE(approx_equal(t, back));
  t.rank_names[3] = "spare";
  back = from_chrome_json(to_chrome_json(t), "mem");
  EXPECT_EQ(back.rank_names.at(3), "spare");
}

TEST(ChromeTrace, RejectsBadInput) {
  auto message = [](const std::string& text) {
    try {
      from_chrome_json(text, "bad.json");
    } catch (const TraceError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(R"({"traceEvents":[)").find("bad.json: not valid JSON"), std::string::npos);
  EXPECT_NE(message(R"({"traceEvents":[]})").find("no otherData"), std::string::npos);
  EXPECT_NE(message(R"({"traceEvents":[],"otherData":{"source":"magic"}})").find("otherData.source"),
            std::string::npos);
  EXPECT_NE(message(R"({"traceEvents":[],"otherData":{"source":"analytic","version":9}})").find("version 9"),
            std::string::npos);
  EXPECT_NE(message(R"({"otherData":{"source":"analytic"},"traceEvents":[{"ph":"X","pid":"a","tid":0,"ts":0,"dur":1}]})")
                .find("traceEvents[0]: \"pid\""),
            std::string::npos);
  Timeline t;
  t.events.push_back(timed(0, 2.0, 1.0));
  EXPECT_THROW(to_chrome_json(t), TraceError);
}

TEST(ChromeTrace, ReadsKinetoStyleTraces) {
  const char* kineto = R"({"schemaVersion":1,"deviceProperties":[],"traceEvents":[
    {"ph":"X","cat":"kernel","name":"flash_fwd","pid":0,"tid":7,"ts":100.5,"dur":20,"args":{"stream":7}},
    {"ph":"i","name":"marker","pid":0,"tid":7,"ts":101}]})";
  Timeline t = from_chrome_json(kineto, "kineto.json");
  EXPECT_EQ(t.source, Source::kineto);
  ASSERT_EQ(t.events.size(), 1u);
  EXPECT_EQ(t.events[0].op, -1);
  EXPECT_EQ(t.events[0].stream, 7);
  EXPECT_NEAR(t.events[0].duration_s(), 20e-6, 1e-15);
}

TEST(TextFile, TruncatedGzipIsReported) {
  auto p = temp_path("trunc.json.gz");
  write_text_file_atomic(p.string(), std::string(100000, 'x') + "tail");
  auto size = fs::file_size(p);
  fs::resize_file(p, size / 2);
  try {
    read_text_file(p.string());
    FAIL() << "no error";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  fs::remove(p);
  EXPECT_THROW(read_text_file(temp_path("missing.json").string()), TraceError);
}

TEST(TextFile, FailedWriteLeavesNoFile) {
  auto dir = temp_path("no_such_dir");
  EXPECT_THROW(write_text_file_atomic((dir / "x.json").string(), "{}"), TraceError);
  EXPECT_FALSE(fs::exists(dir));
}

}  // namespace
}  // namespace rm::traces

namespace rm::traces {
namespace {

// The example in docs/timeline-format.md must stay readable.
TEST(ChromeTrace, DocumentedExampleReads) {
  std::ifstream in(std::string(RINGMASTER_SOURCE_DIR) + "/docs/timeline-format.md");
  std::string doc((std::istreambuf_iterator<char>(in)), {});
  auto begin = doc.find("```json\n");
  ASSERT_NE(begin, std::string::npos);
  begin += 8;
  Timeline t = from_chrome_json(doc.substr(begin, doc.find("```", begin) - begin), "timeline-format.md");
  EXPECT_EQ(t.source, Source::analytic);
  EXPECT_EQ(t.stream_name(0, 1), "comm_intra");
  ASSERT_EQ(t.events.size(), 1u);
  EXPECT_EQ(t.events[0].op, 1742);
  EXPECT_NEAR(t.events[0].start_s, 1520.25e-6, 1e-18);
  EXPECT_NEAR(t.events[0].duration_s(), 310.5e-6, 1e-15);
  EXPECT_EQ(t.metadata["step_time_s"], 4.21);
  EXPECT_EQ(t.edges, (std::vector<Edge>{{1740, 1742, EdgeKind::dependency}, {1741, 1742, EdgeKind::stream}}));
}

}  // namespace
}  // namespace rm::traces

namespace rm::traces {
namespace {

// A measured Timeline's repeated-measurement fields: written as args.samples /
// args.spread_us only when samples > 0, read back (samples exactly, the spread
// within the time round-trip tolerance), refused when negative.
TEST(ChromeTrace, SamplesAndSpreadRoundTripAndAreWrittenOnlyForRepeatedMeasurements) {
  for (unsigned seed = 0; seed < 20; ++seed) {
    Timeline t = testing::random_timeline(seed, 60);
    std::mt19937_64 rng(seed + 1000);
    for (auto& e : t.events)
      if (rng() % 2) {
        e.samples = 1 + static_cast<int>(rng() % 50);
        e.spread_s = (rng() % 4 == 0) ? 0.0 : std::ldexp(static_cast<double>(rng() % 1000003), -30);
      }
    const std::string text = to_chrome_json(t);
    Timeline back = from_chrome_json(text, "mem");
    EXPECT_TRUE(approx_equal(t, back)) << "seed " << seed;
    t.sort();
    back.sort();
    ASSERT_EQ(back.events.size(), t.events.size());
    for (size_t i = 0; i < t.events.size(); ++i) EXPECT_EQ(back.events[i].samples, t.events[i].samples);
    size_t slice = 0;
    const nlohmann::json parsed = nlohmann::json::parse(text);  // named: the loop must not outlive a temporary
    for (const auto& e : parsed["traceEvents"]) {
      if (e["ph"] != "X") continue;
      const Event& ev = t.events[slice++];
      EXPECT_EQ(e["args"].contains("samples"), ev.samples > 0);
      EXPECT_EQ(e["args"].contains("spread_us"), ev.samples > 0);
      if (ev.samples > 0) {
        EXPECT_NEAR(e["args"]["spread_us"].get<double>(), ev.spread_s * 1e6, 1e-9);
      }
    }
  }
}

TEST(ChromeTrace, TimelinesWithoutSamplesKeepTheirBytes) {
  // Predicted Timelines never set samples: their text has neither key.
  const std::string text = to_chrome_json(testing::random_timeline(7));
  EXPECT_EQ(text.find("samples"), std::string::npos);
  EXPECT_EQ(text.find("spread_us"), std::string::npos);
}

TEST(ChromeTrace, RefusesNegativeSamplesOrSpread) {
  auto message = [](const std::string& args) {
    try {
      from_chrome_json(R"({"otherData":{"source":"runtime-cpu"},"traceEvents":[)"
                       R"({"ph":"X","pid":0,"tid":0,"ts":0,"dur":1,"args":{"op":5}},)"
                       R"({"ph":"X","pid":0,"tid":0,"ts":1,"dur":1,"args":{"op":6,)" +
                           args + "}}]}",
                       "m.json");
    } catch (const TraceError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(R"("samples":3,"spread_us":2.5)"), "no error");
  for (const char* bad : {R"("samples":-1)", R"("samples":3,"spread_us":-2)", R"("spread_us":2)"}) {
    const std::string m = message(bad);
    EXPECT_NE(m.find("m.json: traceEvents[1] (op 6)"), std::string::npos) << bad << ": " << m;
    EXPECT_NE(m.find("args.samples"), std::string::npos) << m;
  }
  EXPECT_NE(message(R"("samples":"three")").find("args.samples has the wrong type"), std::string::npos);

  for (auto [samples, spread] : {std::pair{-1, 0.0}, std::pair{2, -1e-6}, std::pair{0, 1e-6},
                                 std::pair{2, std::numeric_limits<double>::infinity()}}) {
    Timeline t;
    Event e = timed(4, 0.0, 1.0);
    e.samples = samples;
    e.spread_s = spread;
    t.events.push_back(e);
    try {
      to_chrome_json(t);
      ADD_FAILURE() << "no error for samples " << samples << " spread " << spread;
    } catch (const TraceError& err) {
      EXPECT_NE(std::string(err.what()).find("event 0 (op 4, rank 0): samples"), std::string::npos) << err.what();
    }
  }
}

}  // namespace
}  // namespace rm::traces
