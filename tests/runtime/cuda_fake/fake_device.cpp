#include "fake_device.hpp"


#include <cblas.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cublas_v2.h"
#include "kernels/bf16.hpp"
#include "nccl.h"

struct CUevent_st {
  uint64_t recorded = 0, done = 0;  // versions: enqueued, executed
  double tick = 0;
};

struct CUstream_st {
  struct Item {
    std::function<void()> work;
    CUevent_st* record = nullptr;
    CUevent_st* wait = nullptr;
    uint64_t version = 0;
  };
  std::deque<Item> queue;
};

struct cublasContext {
  cudaStream_t stream = nullptr;
};

namespace fake {
namespace {

std::vector<CUstream_st*>& streams() {
  static std::vector<CUstream_st*> all;
  return all;
}
std::mt19937_64& rng() {
  static std::mt19937_64 r(1);
  return r;
}
double clock_ticks = 0;

bool runnable(const CUstream_st::Item& it) { return !it.wait || it.wait->done >= it.version; }

void run(CUstream_st::Item& it) {
  clock_ticks += 1;
  if (it.work) it.work();
  if (it.record) it.record->done = it.version, it.record->tick = clock_ticks;
}

// Runs queued items, picking a random runnable stream each time, until every queue is empty.
void drain() {
  for (;;) {
    std::vector<CUstream_st*> ready;
    bool any = false;
    for (CUstream_st* s : streams()) {
      if (s->queue.empty()) continue;
      any = true;
      if (runnable(s->queue.front())) ready.push_back(s);
    }
    if (!any) return;
    if (ready.empty()) throw std::logic_error("fake device: deadlock (every stream waits for an event never reached)");
    CUstream_st* s = ready[rng()() % ready.size()];
    CUstream_st::Item it = std::move(s->queue.front());
    s->queue.pop_front();
    run(it);
  }
}

void push(cudaStream_t s, CUstream_st::Item it) {
  if (!s) {
    drain();
    run(it);
    return;
  }
  s->queue.push_back(std::move(it));
}

}  // namespace

void set_seed(uint64_t seed) { rng().seed(seed); }
void enqueue(cudaStream_t s, std::function<void()> work) { push(s, {std::move(work), nullptr, nullptr, 0}); }

}  // namespace fake

// ---- CUDA runtime --------------------------------------------------------------------------

const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "fake device error"; }
cudaError_t cudaGetLastError() { return cudaSuccess; }
cudaError_t cudaGetDeviceCount(int* n) { return *n = 1, cudaSuccess; }
cudaError_t cudaSetDevice(int) { return cudaSuccess; }
cudaError_t cudaMemGetInfo(size_t* free, size_t* total) { return *free = *total = size_t(8) << 30, cudaSuccess; }
cudaError_t cudaMalloc(void** p, size_t bytes) {
  // Garbage, not zeros: the backend must not rely on fresh device memory being cleared.
  *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (*p) std::memset(*p, 0x7f, bytes);
  return *p ? cudaSuccess : cudaErrorInvalidValue;
}
cudaError_t cudaFree(void* p) { return std::free(p), cudaSuccess; }
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  fake::drain();
  std::memcpy(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t s) {
  fake::enqueue(s, [=] { std::memmove(dst, src, bytes); });
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s) {
  fake::enqueue(s, [=] { std::memset(p, value, bytes); });
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  *s = new CUstream_st;
  fake::streams().push_back(*s);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  auto& all = fake::streams();
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i] == s) all.erase(all.begin() + std::ptrdiff_t(i));
  delete s;
  return cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t) {
  fake::drain();
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) {
  fake::drain();
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
  if (s) s->queue.push_back({nullptr, nullptr, e, e->recorded});
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return *e = new CUevent_st, cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) { return *e = new CUevent_st, cudaSuccess; }
cudaError_t cudaEventDestroy(cudaEvent_t e) { return delete e, cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  fake::push(s, {nullptr, e, nullptr, ++e->recorded});
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) {
  fake::drain();
  return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  if (a->done != a->recorded || b->done != b->recorded) return cudaErrorNotReady;
  *ms = float(b->tick - a->tick) * 1e-3f;  // a tick is a microsecond
  return cudaSuccess;
}

// ---- cuBLAS: column-major C = alpha op(A) op(B) + beta C, op = N only ------------------------

cublasStatus_t cublasCreate(cublasHandle_t* h) { return *h = new cublasContext, CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasDestroy(cublasHandle_t h) { return delete h, CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) { return h->stream = s, CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void* alpha, const void* A, cudaDataType_t at, int lda, const void* B, cudaDataType_t bt,
                            int ldb, const void* beta, void* C, cudaDataType_t ct, int ldc, cublasComputeType_t,
                            cublasGemmAlgo_t) {
  if (ta != CUBLAS_OP_N || tb != CUBLAS_OP_N || at != bt || ct != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  fake::enqueue(h->stream, [=] {
    // Column-major, as cuBLAS reads its arguments (OpenBLAS in fp32 after widening bf16).
    auto widen = [&](const void* p, int64_t count) {
      std::vector<float> v(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i)
        v[size_t(i)] = at == CUDA_R_16BF ? rm::kernels::from_bf16(static_cast<const uint16_t*>(p)[i]) : static_cast<const float*>(p)[i];
      return v;
    };
    const auto a = widen(A, int64_t(lda) * k), b = widen(B, int64_t(ldb) * n);
    cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, n, k, al, a.data(), lda, b.data(), ldb, be,
                static_cast<float*>(C), ldc);
  });
  return CUBLAS_STATUS_SUCCESS;
}

// ---- NCCL: never reached by emulated runs ---------------------------------------------------

const char* ncclGetErrorString(ncclResult_t) { return "the fake device has no NCCL"; }
ncclResult_t ncclGetUniqueId(ncclUniqueId*) { return ncclInvalidUsage; }
ncclResult_t ncclCommInitRank(ncclComm_t*, int, ncclUniqueId, int) { return ncclInvalidUsage; }
ncclResult_t ncclCommAbort(ncclComm_t) { return ncclSuccess; }
ncclResult_t ncclCommDestroy(ncclComm_t) { return ncclSuccess; }
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* r) { return *r = ncclSuccess, ncclSuccess; }
ncclResult_t ncclGroupStart() { return ncclInvalidUsage; }
ncclResult_t ncclGroupEnd() { return ncclInvalidUsage; }
ncclResult_t ncclSend(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) { return ncclInvalidUsage; }
ncclResult_t ncclRecv(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) { return ncclInvalidUsage; }
ncclResult_t ncclAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) {
  return ncclInvalidUsage;
}
ncclResult_t ncclAllGather(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) { return ncclInvalidUsage; }
ncclResult_t ncclReduceScatter(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) {
  return ncclInvalidUsage;
}
ncclResult_t ncclBroadcast(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
  return ncclInvalidUsage;
}
