// Measures what a CPU "GPU" of the runtime's cpu backend reaches, to write a
// cluster config for it (docs/configs.md, "CPU machines"): the CPU attention
// kernels' rates (kernels/cpu; forward and backward, full and causal, by tokens
// per call) printed as a configs/kernels entry, and memory bandwidth. Rates
// are per CPU second (not wall second) times the cores the kernel keeps busy —
// min(--cores, heads) forward, min(--cores, KV heads) backward, as kernels/cpu
// threads — so a rank of --cores dedicated cores is measured even on a shared,
// busy machine (wall rates are printed too). Pin it: taskset -c 0 for one core.
//   bench_cpu_rates [--model NAME] [--cores 1] [--heads 4] [--kv-heads 2]
//                   [--head-dim 64] [--tokens 512,1024,2048,4096] [--reps 3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/bf16.hpp"
#include "kernels/cpu/attention_cpu.hpp"

using namespace rm::kernels;

namespace {

struct Options {
  std::string model = "CPU";
  int cores = 1, heads = 4, kv_heads = 2, head_dim = 64, reps = 3;
  std::vector<int> tokens{512, 1024, 2048, 4096};
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "bench_cpu_rates: %s\nusage: bench_cpu_rates [--model NAME] [--cores N] [--heads N] [--kv-heads N]"
               " [--head-dim 64|128] [--tokens a,b,...] [--reps N]\n",
               why);
  std::exit(2);
}

int positive(const char* s, const char* what) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < 1 || v > (1 << 24)) usage(what);
  return static_cast<int>(v);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing the value of " + a).c_str());
    const char* v = argv[++i];
    if (a == "--model") o.model = v;
    else if (a == "--cores") o.cores = positive(v, "--cores: expected a positive integer");
    else if (a == "--heads") o.heads = positive(v, "--heads: expected a positive integer");
    else if (a == "--kv-heads") o.kv_heads = positive(v, "--kv-heads: expected a positive integer");
    else if (a == "--head-dim") o.head_dim = positive(v, "--head-dim: expected 64 or 128");
    else if (a == "--reps") o.reps = positive(v, "--reps: expected a positive integer");
    else if (a == "--tokens") {
      o.tokens.clear();
      std::stringstream ss(v);
      for (std::string t; std::getline(ss, t, ',');)
        o.tokens.push_back(positive(t.c_str(), "--tokens: expected a,b,..."));
      if (!std::is_sorted(o.tokens.begin(), o.tokens.end()) ||
          std::adjacent_find(o.tokens.begin(), o.tokens.end()) != o.tokens.end())
        usage("--tokens: expected strictly increasing counts");
    } else usage(("unknown option " + a).c_str());
  }
  if (o.heads % o.kv_heads != 0) usage("--kv-heads: expected a divisor of --heads");
  return o;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// CPU seconds of all the process's threads (the kernels thread across heads).
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

struct Rate {
  double cpu_tflops = 0;   // flops / CPU seconds x cores kept busy
  double wall_tflops = 0;  // flops / wall seconds
};

// Best-of-reps TFLOP/s of one direction and mask on a square tile of `tokens`
// rows, counted as the sim counts a tile kernel's work (work = "tiles"): 4·d per
// pair of every computed tile, x2.5 backward (sim/cost/attention_cost.hpp).
Rate tile_tflops(const Options& o, int tokens, bool causal, bool backward) {
  TileLayout layout;
  layout.seq_len = tokens;
  layout.causal = causal;
  for (int i = 0; i < tokens; ++i) layout.q_pos.push_back(i);
  layout.k_pos = layout.q_pos;
  const TilePlan plan = make_plan({o.heads, o.kv_heads, o.head_dim, tokens, tokens}, layout, {});
  const auto rows = static_cast<std::size_t>(tokens) * static_cast<std::size_t>(o.head_dim);
  const std::size_t nq = rows * static_cast<std::size_t>(o.heads), nk = rows * static_cast<std::size_t>(o.kv_heads);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  std::vector<bf16_bits> q(nq), k(nk), v(nk), dout(nq);
  for (auto* t : {&q, &k, &v, &dout})
    for (auto& x : *t) x = to_bf16(dist(rng));
  std::vector<float> out(nq), lse(static_cast<std::size_t>(o.heads) * static_cast<std::size_t>(tokens));
  std::vector<float> dq(nq), dk(nk), dv(nk);
  cpu::attention_forward(make_forward_params(plan, tensor(q), tensor(k), tensor(v), out, lse));
  double best_cpu = 1e30, best_wall = 1e30;
  for (int r = 0; r < o.reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds();
    if (backward)
      cpu::attention_backward(
          make_backward_params(plan, tensor(q), tensor(k), tensor(v), tensor(dout), out, lse, dq, dk, dv, false));
    else
      cpu::attention_forward(make_forward_params(plan, tensor(q), tensor(k), tensor(v), out, lse));
    best_wall = std::min(best_wall, seconds_since(t0));
    best_cpu = std::min(best_cpu, cpu_seconds() - c0);
  }
  const double flops = 4.0 * plan.computed_pairs() * o.head_dim * (backward ? 2.5 : 1.0);
  // kernels/cpu runs one thread per query head forward, per KV head backward.
  const int busy = std::min(o.cores, backward ? o.kv_heads : o.heads);
  return {flops / best_cpu * busy * 1e-12, flops / best_wall * 1e-12};
}

// One rate curve as JSON ([[tokens, TFLOP/s], ...]); the wall rates go to `wall`.
std::string curve(const Options& o, bool causal, bool backward, std::string& wall) {
  std::string s = "[";
  wall += backward ? (causal ? "bwd causal" : "bwd full  ") : (causal ? "fwd causal" : "fwd full  ");
  for (std::size_t i = 0; i < o.tokens.size(); ++i) {
    const Rate r = tile_tflops(o, o.tokens[i], causal, backward);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s[%d, %.4f]", i ? ", " : "", o.tokens[i], r.cpu_tflops);
    s += buf;
    std::snprintf(buf, sizeof buf, " %.4f", r.wall_tflops);
    wall += buf;
  }
  wall += "\n";
  return s + "]";
}

// Bytes read + written per CPU second of one thread, by memcpy and by a scalar
// fp32 axpy (what a simple elementwise kernel reaches), over arrays far larger
// than the caches.
void memory_bandwidth(int reps) {
  const std::size_t n = std::size_t(64) << 20;
  std::vector<float> x(n, 1.0f), y(n, 2.0f);
  double copy = 1e30, axpy = 1e30;
  for (int r = 0; r < reps; ++r) {
    double c0 = cpu_seconds();
    std::memcpy(y.data(), x.data(), n * sizeof(float));
    copy = std::min(copy, cpu_seconds() - c0);
    c0 = cpu_seconds();
    for (std::size_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] + y[i];
    axpy = std::min(axpy, cpu_seconds() - c0);
  }
  std::printf("one thread: memcpy %.1f GB/s, axpy %.1f GB/s (bytes read + written; check %.1f)\n",
              2.0 * double(n * sizeof(float)) / copy * 1e-9, 3.0 * double(n * sizeof(float)) / axpy * 1e-9,
              double(y[n / 2]));
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  std::string wall;
  const std::string ff = curve(o, false, false, wall), fc = curve(o, true, false, wall);
  const std::string bf = curve(o, false, true, wall), bc = curve(o, true, true, wall);
  std::printf("{\"models\": [\"%s\"], \"source\": \"bench_cpu_rates --cores %d, kernels/cpu, %d/%d heads x %d,"
              " best of %d by CPU time\",\n",
              o.model.c_str(), o.cores, o.heads, o.kv_heads, o.head_dim, o.reps);
  std::printf(" \"fwd_tflops\": {\"full\": %s,\n                \"causal\": %s},\n", ff.c_str(), fc.c_str());
  std::printf(" \"bwd_tflops\": {\"full\": %s,\n                \"causal\": %s}}\n", bf.c_str(), bc.c_str());
  std::printf("wall-clock TFLOP/s at the same tokens (lower when the cores are shared):\n%s", wall.c_str());
  std::fflush(stdout);
  memory_bandwidth(o.reps);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_cpu_rates: %s\n", e.what());
  return 2;
}
