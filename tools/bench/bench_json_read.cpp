// How reading JSON grows with the input (issue 41): the time to parse N, 2N
// and 4N objects through traces::parse_json_checked (every reader of configs,
// Schedules and Chrome traces goes through it), for three shapes — an array
// of empty objects (`{"x":[{},{},...]}`), one object with N keys, and a
// Chrome trace of N events read into a Timeline — and the ratios t(2N)/t(N),
// t(4N)/t(2N): about 2 when reading is linear, about 4 when quadratic.
// `--old` also times nlohmann's callback parser (what the reader used before)
// on the first shape, at a tenth of N, to show the quadratic it replaced.
//   build/bin/bench_json_read [--n 200000] [--old]   (wall seconds; the machine may be shared)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "traces/chrome_trace.hpp"
#include "traces/json_text.hpp"
#include "traces/timeline.hpp"

namespace {

std::string array_of_objects(int64_t n) {
  std::string s = "{\"x\":[";
  for (int64_t i = 0; i < n; ++i) s += i ? ",{}" : "{}";
  return s + "]}";
}

std::string object_of_keys(int64_t n) {
  std::string s = "{";
  for (int64_t i = 0; i < n; ++i) s += fmt::format("{}\"k{}\":{{}}", i ? "," : "", i);
  return s + "}";
}

// Written by our own writer, as `simulate --trace` writes them.
std::string chrome_trace(int64_t n) {
  rm::traces::Timeline t;
  t.events.reserve(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    rm::traces::Event e;
    e.op = i;
    e.rank = int(i % 8);
    e.name = "attn_fwd";
    e.category = "attn_fwd";
    e.start_s = 1e-6 * double(i);
    e.end_s = e.start_s + 1e-6;
    e.layer = int(i % 32);
    t.events.push_back(std::move(e));
  }
  return rm::traces::to_chrome_json(t);
}

double seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void row(const char* shape, int64_t n, const std::function<std::string(int64_t)>& make,
         const std::function<void(const std::string&)>& read) {
  double t[3];
  size_t bytes[3];
  for (int k = 0; k < 3; ++k) {
    const std::string text = make(n << k);
    bytes[k] = text.size();
    t[k] = seconds([&] { read(text); });
  }
  std::printf("%-26s %9lld %8.1f %9.4f %9.4f %9.4f %6.2f %6.2f\n", shape, static_cast<long long>(n),
              double(bytes[0]) / 1e6, t[0], t[1], t[2], t[1] / t[0], t[2] / t[1]);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 200000;
  bool old = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--n") && i + 1 < argc) n = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--old")) old = true;
    else {
      std::fprintf(stderr, "usage: bench_json_read [--n OBJECTS] [--old]\n");
      return 2;
    }
  }
  if (n <= 0) {
    std::fprintf(stderr, "bench_json_read: --n: expected a positive count\n");
    return 2;
  }
  std::printf("%-26s %9s %8s %9s %9s %9s %6s %6s\n", "shape", "N", "MB(N)", "t(N) s", "t(2N) s", "t(4N) s", "2N/N",
              "4N/2N");
  const auto checked = [](const std::string& text) { (void)rm::traces::parse_json_checked(text, "bench.json"); };
  row("array of {} (checked)", n, array_of_objects, checked);
  row("object of N keys (checked)", n, object_of_keys, checked);
  row("chrome trace, N events", n, chrome_trace,
      [](const std::string& text) { (void)rm::traces::from_chrome_json(text, "bench.json"); });
  if (old)
    row("array of {} (callback)", n / 10, array_of_objects, [](const std::string& text) {
      const auto j = nlohmann::json::parse(text, [](int, nlohmann::json::parse_event_t, nlohmann::json&) { return true; });
      (void)j;
    });
  return 0;
}
