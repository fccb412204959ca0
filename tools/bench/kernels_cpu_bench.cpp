// Times the CPU reference attention forward (and optionally backward) on one
// dense causal tile: kernels_cpu_bench [tokens=8192] [heads=32] [head_dim=128] [--backward]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/bf16.hpp"
#include "kernels/cpu/attention_cpu.hpp"

using namespace rm::kernels;

int main(int argc, char** argv) {
  std::vector<int> num;
  bool backward = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--backward") == 0) backward = true;
    else num.push_back(std::atoi(argv[i]));
  }
  const int tokens = num.size() > 0 ? num[0] : 8192, heads = num.size() > 1 ? num[1] : 32,
            dim = num.size() > 2 ? num[2] : 128;
  TileLayout layout;
  layout.seq_len = tokens;
  for (int i = 0; i < tokens; ++i) layout.q_pos.push_back(i);
  layout.k_pos = layout.q_pos;
  const TilePlan plan = make_plan({heads, heads, dim, tokens, tokens}, layout, {});
  const std::size_t n = static_cast<std::size_t>(heads) * static_cast<std::size_t>(tokens) * static_cast<std::size_t>(dim);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  std::vector<bf16_bits> q(n), k(n), v(n), dout(n);
  for (auto* t : {&q, &k, &v, &dout})
    for (auto& x : *t) x = to_bf16(dist(rng));
  std::vector<float> out(n), lse(static_cast<std::size_t>(heads) * static_cast<std::size_t>(tokens));
  const auto t0 = std::chrono::steady_clock::now();
  cpu::attention_forward(make_forward_params(plan, tensor(q), tensor(k), tensor(v), out, lse));
  const double fwd = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double flops = 4.0 * plan.computed_pairs() * dim;
  std::printf("cpu forward  tokens %d heads %d dim %d causal bf16: %.2f s, %.1f GFLOP/s on computed blocks\n", tokens,
              heads, dim, fwd, flops / fwd * 1e-9);
  if (backward) {
    std::vector<float> dq(n), dk(n), dv(n);
    const auto t1 = std::chrono::steady_clock::now();
    cpu::attention_backward(make_backward_params(plan, tensor(q), tensor(k), tensor(v), tensor(dout), out, lse, dq, dk, dv, false));
    const double bwd = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    std::printf("cpu backward tokens %d heads %d dim %d causal bf16: %.2f s, %.1f GFLOP/s on computed blocks\n", tokens,
                heads, dim, bwd, 2.5 * flops / bwd * 1e-9);
  }
  return 0;
}
