// Times the CUDA attention kernels: forward and backward, dense causal and
// vertical-slash at two sparsities, at several sequence lengths, next to a
// cuBLAS bf16 GEMM measured in the same process. Timing only; correctness is
// kernels_tests' job.
//   kernels_gpu_bench [--tokens 8192,32768,131072] [--heads 8] [--kv-heads 8] [--dim 128] [--reps 3]
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/attention_cuda.hpp"

using namespace rm::kernels;

namespace {

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

__global__ void fill_bf16(__nv_bfloat16* p, std::size_t n, unsigned seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    unsigned x = static_cast<unsigned>(i) * 2654435761u ^ seed;  // hash -> roughly uniform in [-1, 1)
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    p[i] = __float2bfloat16(static_cast<float>(x) * (2.0f / 4294967296.0f) - 1.0f);
  }
}

template <class T>
struct Buffer {
  T* ptr = nullptr;
  std::size_t n;
  explicit Buffer(std::size_t count) : n(count) { ok(cudaMalloc(&ptr, n * sizeof(T)), "cudaMalloc"); }
  ~Buffer() { cudaFree(ptr); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

template <class Fn>
double time_ms(int reps, Fn fn) {
  cudaEvent_t a, b;
  ok(cudaEventCreate(&a), "event");
  ok(cudaEventCreate(&b), "event");
  fn();  // warm-up
  std::vector<float> ms;
  for (int r = 0; r < reps; ++r) {
    ok(cudaEventRecord(a), "record");
    fn();
    ok(cudaEventRecord(b), "record");
    ok(cudaEventSynchronize(b), "sync");
    float t = 0;
    ok(cudaEventElapsedTime(&t, a, b), "elapsed");
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

double gemm_tflops(int reps) {
  const int n = 8192;
  Buffer<__nv_bfloat16> a(static_cast<std::size_t>(n) * n), b(static_cast<std::size_t>(n) * n), c(static_cast<std::size_t>(n) * n);
  fill_bf16<<<1024, 256>>>(a.ptr, a.n, 1);
  fill_bf16<<<1024, 256>>>(b.ptr, b.n, 2);
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate");
  const float one = 1, zero = 0;
  const double ms = time_ms(reps, [&] {
    if (cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.ptr, CUDA_R_16BF, n, b.ptr, CUDA_R_16BF, n, &zero,
                     c.ptr, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
      throw std::runtime_error("cublasGemmEx");
  });
  cublasDestroy(h);
  return 2.0 * n * n * static_cast<double>(n) / (ms * 1e-3) * 1e-12;
}

// Vertical-slash index aiming at `density` of the causal triangle: slashes
// 256 apart (each selects two 128-token block diagonals, 512/S of the
// triangle) for ~70% of the budget, verticals (v/S of it) for the rest.
SparseIndex vs_index(int heads, int seq, double density) {
  const int slashes = std::max(1, static_cast<int>(0.7 * density * seq / 512.0 + 0.5));
  const int verticals = std::max(1, static_cast<int>(0.3 * density * seq));
  SparseIndex idx;
  idx.mode = SparseMode::vertical_slash;
  for (int h = 0; h < heads; ++h) {
    VerticalSlash vs;
    for (int i = 0; i < slashes && i * 256 + 64 < seq; ++i) vs.slashes.push_back(i * 256 + 64);
    std::set<int> v;
    for (int i = 0; i < 30 && i < seq; ++i) v.insert(i);  // sinks
    unsigned x = 12345u + static_cast<unsigned>(h);
    while (static_cast<int>(v.size()) < std::min(verticals, seq)) {
      x = x * 1664525u + 1013904223u;
      v.insert(static_cast<int>(x % static_cast<unsigned>(seq)));
    }
    vs.verticals.assign(v.begin(), v.end());
    idx.vertical_slash.push_back(std::move(vs));
  }
  return idx;
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> out;
  for (const char* p = s; *p;) {
    out.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> tokens{8192, 32768, 131072};
  int heads = 8, kv_heads = 8, dim = 128, reps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--tokens") tokens = parse_list(argv[i + 1]);
    else if (k == "--heads") heads = std::atoi(argv[i + 1]);
    else if (k == "--kv-heads") kv_heads = std::atoi(argv[i + 1]);
    else if (k == "--dim") dim = std::atoi(argv[i + 1]);
    else if (k == "--reps") reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (!cuda::device_available()) {
    std::fprintf(stderr, "kernels_gpu_bench: no usable CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop{};
  ok(cudaGetDeviceProperties(&prop, 0), "device properties");
  const double gemm = gemm_tflops(reps);
  std::printf("device %s, cuBLAS bf16 GEMM 8192^3: %.1f TFLOP/s\n", prop.name, gemm);
  std::printf("%8s %-14s %8s %10s %9s %6s %10s %9s %6s %8s %8s\n", "tokens", "pattern", "sparsity", "fwd_ms",
              "fwd_TF/s", "%gemm", "bwd_ms", "bwd_TF/s", "%gemm", "fwd_x", "bwd_x");
  for (int seq : tokens) {
    const std::size_t nq = static_cast<std::size_t>(heads) * seq * dim, nk = static_cast<std::size_t>(kv_heads) * seq * dim;
    Buffer<__nv_bfloat16> q(nq), k(nk), v(nk), dout(nq);
    Buffer<float> out(nq), lse(static_cast<std::size_t>(heads) * seq), dq(nq), dk(nk), dv(nk);
    fill_bf16<<<1024, 256>>>(q.ptr, q.n, 11);
    fill_bf16<<<1024, 256>>>(k.ptr, k.n, 12);
    fill_bf16<<<1024, 256>>>(v.ptr, v.n, 13);
    fill_bf16<<<1024, 256>>>(dout.ptr, dout.n, 14);
    TileLayout layout;
    layout.seq_len = seq;
    for (int i = 0; i < seq; ++i) layout.q_pos.push_back(i);
    layout.k_pos = layout.q_pos;
    const TileShape shape{heads, kv_heads, dim, seq, seq};
    double dense_fwd = 0, dense_bwd = 0;
    const std::pair<const char*, double> patterns[] = {{"dense", 1.0}, {"vs~90%", 0.10}, {"vs~95%", 0.05}};
    for (const auto& [name, density] : patterns) {
      const SparseIndex index = density >= 1.0 ? SparseIndex{} : vs_index(heads, seq, density);
      const TilePlan plan = make_plan(shape, layout, index);
      const cuda::DevicePlan dplan(plan);
      const ConstTensor tq{q.ptr, q.n, DType::bf16}, tk{k.ptr, k.n, DType::bf16}, tv{v.ptr, v.n, DType::bf16},
          tdo{dout.ptr, dout.n, DType::bf16};
      const auto fwd = dplan.bind(make_forward_params(plan, tq, tk, tv, {out.ptr, out.n}, {lse.ptr, lse.n}));
      const auto bwd = dplan.bind(make_backward_params(plan, tq, tk, tv, tdo, {out.ptr, out.n}, {lse.ptr, lse.n},
                                                       {dq.ptr, dq.n}, {dk.ptr, dk.n}, {dv.ptr, dv.n}, false));
      const double fms = time_ms(reps, [&] { cuda::attention_forward(fwd); });
      const double bms = time_ms(reps, [&] { cuda::attention_backward(bwd); });
      ok(cudaGetLastError(), "kernels");
      if (density >= 1.0) {
        dense_fwd = fms;
        dense_bwd = bms;
      }
      // FLOPs on computed blocks: forward 2 GEMMs (QK^T, PV), backward 5 (S again, dP, dQ, dK, dV).
      const double pairs = plan.computed_pairs();
      const double ftf = 4.0 * pairs * dim / (fms * 1e-3) * 1e-12, btf = 10.0 * pairs * dim / (bms * 1e-3) * 1e-12;
      std::printf("%8d %-14s %7.1f%% %10.3f %9.1f %5.0f%% %10.3f %9.1f %5.0f%% %7.1fx %7.1fx\n", seq, name,
                  100.0 * (1.0 - pairs / plan.dense_causal_pairs()), fms, ftf, 100 * ftf / gemm, bms, btf,
                  100 * btf / gemm, dense_fwd / fms, dense_bwd / bms);
      std::fflush(stdout);
    }
  }
  return 0;
}
