// CUDA kernels against the CPU reference on many shapes (ragged segments,
// gathered verticals, empty index rows, GQA, both head dims), outputs
// poisoned before each run. Skipped when no GPU is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cuda/attention_cuda.hpp"
#include "kernels/softmax_merge.hpp"
#include "tests/kernels/reference.hpp"

namespace rm::kernels {
namespace {

template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  std::size_t n = 0;
  explicit DeviceBuffer(const std::vector<T>& host) : n(host.size()) {
    EXPECT_EQ(cudaMalloc(&ptr, std::max<std::size_t>(n, 1) * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  std::vector<T> get() const {
    std::vector<T> host(n);
    EXPECT_EQ(cudaMemcpy(host.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }
  std::span<T> span() { return {ptr, n}; }
};

#define REQUIRE_GPU() \
  if (!cuda::device_available()) GTEST_SKIP() << "no usable CUDA device"

struct Case {
  int hq, hkv, dim;
  std::int32_t seq;
  const char* partition;  // queries from rank 1, keys from rank 0 of 2 (or all when "self")
  SparseMode mode;
  bool causal;
};

test::Problem make(const Case& c, std::uint64_t seed) {
  test::Problem p;
  if (std::string(c.partition) == "self") {
    p.layout.q_pos = test::iota_pos(0, c.seq);
    p.layout.k_pos = p.layout.q_pos;
  } else {
    p.layout.q_pos = test::partition_pos(c.partition, c.seq, 2, 1);
    p.layout.k_pos = test::partition_pos(c.partition, c.seq, 2, 0);
  }
  p.layout.seq_len = c.seq;
  p.layout.causal = c.causal;
  p.shape = {c.hq, c.hkv, c.dim, static_cast<int>(p.layout.q_pos.size()), static_cast<int>(p.layout.k_pos.size())};
  if (c.mode == SparseMode::vertical_slash) p.index = test::random_vertical_slash(c.hq, c.seq, c.seq / 20, 3, seed);
  if (c.mode == SparseMode::block_mask) p.index = test::random_block_mask(c.hq, c.seq, 0.3, seed);
  test::fill_random(p, seed, 1.5f);
  for (auto* v : {&p.q, &p.k, &p.v, &p.dout}) test::round_to_bf16(*v);
  return p;
}

// bf16 tensor cores round P and dS to bf16 (relative 2^-9): errors of a few 1e-3 of the output's size.
constexpr double kOutBound = 1e-2, kGradBound = 2e-2;

void check_case(const Case& c, std::uint64_t seed) {
  const test::Problem p = make(c, seed);
  const TilePlan plan = make_plan(p.shape, p.layout, p.index);
  const cuda::DevicePlan dplan(plan);
  const auto cpu_f = test::cpu_forward(p, true);
  const auto cpu_b = test::cpu_backward(p, cpu_f, true);

  DeviceBuffer<std::uint16_t> q(test::to_bf16(p.q)), k(test::to_bf16(p.k)), v(test::to_bf16(p.v)), dout(test::to_bf16(p.dout));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  DeviceBuffer<float> out(std::vector<float>(p.q.size(), nan)), lse(std::vector<float>(cpu_f.lse.size(), nan));
  auto ct = [](const DeviceBuffer<std::uint16_t>& b) { return ConstTensor{b.ptr, b.n, DType::bf16}; };
  cuda::attention_forward(dplan.bind(make_forward_params(plan, ct(q), ct(k), ct(v), out.span(), lse.span())));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto gout = out.get(), glse = lse.get();
  EXPECT_LT(test::rel_error(gout, cpu_f.out), kOutBound);
  EXPECT_LT(test::rel_error(glse, cpu_f.lse), 1e-3);

  // Backward from the CPU forward, so only the backward's error is measured.
  DeviceBuffer<float> fo(cpu_f.out), fl(cpu_f.lse);
  DeviceBuffer<float> dq(std::vector<float>(p.q.size(), nan)), dk(std::vector<float>(p.k.size(), nan)),
      dv(std::vector<float>(p.v.size(), nan));
  cuda::attention_backward(dplan.bind(make_backward_params(plan, ct(q), ct(k), ct(v), ct(dout), fo.span(), fl.span(),
                                                           dq.span(), dk.span(), dv.span(), false)));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_LT(test::rel_error(dq.get(), cpu_b.dq), kGradBound);
  EXPECT_LT(test::rel_error(dk.get(), cpu_b.dk), kGradBound);
  EXPECT_LT(test::rel_error(dv.get(), cpu_b.dv), kGradBound);

  // accumulate adds to what is there.
  cuda::attention_backward(dplan.bind(make_backward_params(plan, ct(q), ct(k), ct(v), ct(dout), fo.span(), fl.span(),
                                                           dq.span(), dk.span(), dv.span(), true)));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto twice = cpu_b.dq;
  for (auto& x : twice) x *= 2;
  EXPECT_LT(test::rel_error(dq.get(), twice), kGradBound);
}

class CudaAttention : public ::testing::TestWithParam<Case> {};

TEST_P(CudaAttention, MatchesCpuReference) {
  REQUIRE_GPU();
  check_case(GetParam(), 100);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaAttention,
    ::testing::Values(Case{2, 2, 64, 1, "self", SparseMode::dense, true}, Case{2, 1, 128, 200, "self", SparseMode::dense, true},
                      Case{4, 2, 64, 333, "zigzag", SparseMode::dense, true},
                      Case{2, 2, 128, 517, "stripe", SparseMode::dense, false},
                      Case{4, 1, 128, 1000, "self", SparseMode::vertical_slash, true},
                      Case{2, 2, 64, 900, "stripe", SparseMode::vertical_slash, true},
                      Case{2, 1, 128, 777, "contiguous", SparseMode::vertical_slash, true},
                      Case{4, 2, 64, 640, "zigzag", SparseMode::block_mask, true},
                      Case{2, 2, 128, 1300, "self", SparseMode::block_mask, true}),
    [](const auto& param_info) {
      const Case& c = param_info.param;
      return std::string(c.partition) + "_" + to_string(c.mode) + "_d" + std::to_string(c.dim) + "_s" +
             std::to_string(c.seq) + "_h" + std::to_string(c.hq) + "x" + std::to_string(c.hkv) +
             (c.causal ? "" : "_full");
    });

TEST(CudaAttentionEdges, EmptyIndexRowsAreWritten) {
  REQUIRE_GPU();
  test::Problem p;
  p.layout = {test::iota_pos(384, 200), test::iota_pos(0, 300), 600, true};
  p.shape = {2, 1, 64, 200, 300};
  p.index.mode = SparseMode::vertical_slash;
  p.index.vertical_slash = {{{}, {0}}, {{7}, {0}}};  // head 0: rows only see their own block
  test::fill_random(p, 5);
  for (auto* v : {&p.q, &p.k, &p.v}) test::round_to_bf16(*v);
  const TilePlan plan = make_plan(p.shape, p.layout, p.index);
  const cuda::DevicePlan dplan(plan);
  DeviceBuffer<std::uint16_t> q(test::to_bf16(p.q)), k(test::to_bf16(p.k)), v(test::to_bf16(p.v));
  DeviceBuffer<float> out(std::vector<float>(p.q.size(), NAN)), lse(std::vector<float>(400, NAN));
  auto ct = [](const DeviceBuffer<std::uint16_t>& b) { return ConstTensor{b.ptr, b.n, DType::bf16}; };
  cuda::attention_forward(dplan.bind(make_forward_params(plan, ct(q), ct(k), ct(v), out.span(), lse.span())));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto ref = test::cpu_forward(p, true);
  const auto glse = lse.get();
  for (std::size_t i = 0; i < glse.size(); ++i) ASSERT_EQ(std::isinf(glse[i]), std::isinf(ref.lse[i])) << i;
  EXPECT_LT(test::rel_error(out.get(), ref.out), kOutBound);
}

TEST(CudaAttentionEdges, MergeMatchesCpu) {
  REQUIRE_GPU();
  const int rows = 37, dim = 128;
  std::vector<float> ao(rows * dim), po(rows * dim), al(rows), pl(rows);
  for (int i = 0; i < rows * dim; ++i) {
    ao[static_cast<std::size_t>(i)] = std::sin(0.1f * i);
    po[static_cast<std::size_t>(i)] = std::cos(0.07f * i);
  }
  for (int r = 0; r < rows; ++r) {
    al[static_cast<std::size_t>(r)] = r % 5 == 0 ? -INFINITY : 0.3f * r;
    pl[static_cast<std::size_t>(r)] = r % 3 == 0 ? -INFINITY : 5.f - 0.2f * r;
  }
  DeviceBuffer<float> dao(ao), dal(al), dpo(po), dpl(pl);
  cuda::merge_partial(dao.ptr, dal.ptr, dpo.ptr, dpl.ptr, rows, dim);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  merge_partial(ao, al, po, pl, dim);
  EXPECT_LT(test::rel_error(dao.get(), ao), 1e-6);
  EXPECT_LT(test::rel_error(dal.get(), al), 1e-6);
}

TEST(CudaAttentionEdges, RejectsUnfitParamsBeforeAnyLaunch) {
  // Needs no GPU: validation runs first.
  const TilePlan plan = make_plan({1, 1, 64, 4, 4}, {test::iota_pos(0, 4), test::iota_pos(0, 4), 4, true}, {});
  std::vector<float> q(256), out(256), lse(4);
  const auto params = make_forward_params(plan, tensor(q), tensor(q), tensor(q), out, lse);
  EXPECT_THROW(cuda::attention_forward(params), std::invalid_argument);  // host plan
  auto on_device = params;
  on_device.plan.on_device = true;
  EXPECT_THROW(cuda::attention_forward(on_device), std::invalid_argument);  // fp32 inputs
  EXPECT_THROW(cuda::merge_partial(nullptr, nullptr, nullptr, nullptr, 3, 64), std::invalid_argument);
}

}  // namespace
}  // namespace rm::kernels
