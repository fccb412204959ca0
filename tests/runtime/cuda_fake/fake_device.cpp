#include "fake_device.hpp"


#include <cblas.h>

#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cublas_v2.h"
#include "kernels/bf16.hpp"
#include "nccl.h"

struct CUevent_st {
  uint64_t recorded = 0, done = 0;  // versions: enqueued, executed
  double tick = 0;
};

// A communicator of the fake NCCL (over MPI): its operations run in issue order, as NCCL's do.
struct ncclComm {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  uint64_t issued = 0, executed = 0;
};

struct CUstream_st {
  struct Item {
    std::function<void()> work;
    CUevent_st* record = nullptr;
    CUevent_st* wait = nullptr;
    uint64_t version = 0;
    // A transfer: started once runnable and next on each of its communicators, done when finished() says so.
    std::function<void()> start;
    std::function<bool()> finished;
    std::vector<std::pair<ncclComm*, uint64_t>> order;
    bool started = false;
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

bool runnable(const CUstream_st::Item& it) {
  if (it.wait && it.wait->done < it.version) return false;
  for (const auto& [c, seq] : it.order)
    if (c->executed != seq) return false;
  return true;
}

void run(CUstream_st::Item& it) {
  clock_ticks += 1;
  if (it.work) it.work();
  if (it.record) it.record->done = it.version, it.record->tick = clock_ticks;
}

// Runs queued items, picking a random runnable stream each time, until every queue is
// empty; transfers in flight wait for the other processes (their own drains).
void drain() {
  auto idle_since = std::chrono::steady_clock::now();
  for (;;) {
    bool any = false, progress = false, in_flight = false;
    std::vector<CUstream_st*> ready;
    for (CUstream_st* s : streams()) {
      if (s->queue.empty()) continue;
      any = true;
      CUstream_st::Item& f = s->queue.front();
      if (f.started) {
        in_flight = true;
        if (!f.finished()) continue;
        clock_ticks += 1;
        for (const auto& [c, seq] : f.order) c->executed = seq + 1;
        s->queue.pop_front();
        progress = true;
      } else if (runnable(f)) {
        ready.push_back(s);
      }
    }
    if (!any) return;
    if (!ready.empty()) {
      CUstream_st* s = ready[rng()() % ready.size()];
      CUstream_st::Item& f = s->queue.front();
      if (f.start) {
        f.start();
        f.started = true;
      } else {
        CUstream_st::Item it = std::move(f);
        s->queue.pop_front();
        run(it);
      }
      progress = true;
    }
    if (progress) {
      idle_since = std::chrono::steady_clock::now();
      continue;
    }
    if (!in_flight) throw std::logic_error("fake device: deadlock (every stream waits for an event never reached)");
    if (std::chrono::steady_clock::now() - idle_since > std::chrono::seconds(20))
      throw std::logic_error("fake device: a transfer never completed (the processes wait for each other)");
    std::this_thread::sleep_for(std::chrono::microseconds(20));
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
void enqueue(cudaStream_t s, std::function<void()> work) {
  CUstream_st::Item it;
  it.work = std::move(work);
  push(s, std::move(it));
}

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
  if (!s) return cudaSuccess;
  CUstream_st::Item it;
  it.wait = e, it.version = e->recorded;
  s->queue.push_back(std::move(it));
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return *e = new CUevent_st, cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) { return *e = new CUevent_st, cudaSuccess; }
cudaError_t cudaEventDestroy(cudaEvent_t e) { return delete e, cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  CUstream_st::Item it;
  it.record = e, it.version = ++e->recorded;
  fake::push(s, std::move(it));
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

// ---- NCCL over MPI: non-blocking MPI calls started in each communicator's issue order ----

namespace fake {
namespace {

struct NcclOp {
  enum Kind { send, recv, all_reduce, all_gather, reduce_scatter, broadcast } kind;
  const void* in;
  void* out;
  size_t count;
  ncclDataType_t type;
  int peer;  // send/recv: peer; broadcast: root
  ncclComm* comm;
};

int group_depth = 0;
std::vector<NcclOp> group_ops;
cudaStream_t group_stream = nullptr;

size_t type_bytes(ncclDataType_t t) { return t == ncclBfloat16 ? 2 : t == ncclUint8 ? 1 : 4; }
MPI_Datatype mpi_type(ncclDataType_t t) {
  return t == ncclBfloat16 ? MPI_UINT16_T : t == ncclUint8 ? MPI_BYTE : t == ncclInt32 ? MPI_INT32_T : MPI_FLOAT;
}
void bf16_add(void* in, void* inout, int* n, MPI_Datatype*) {
  auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *n; ++i) b[i] = rm::kernels::to_bf16(rm::kernels::from_bf16(a[i]) + rm::kernels::from_bf16(b[i]));
}
MPI_Op sum_op(ncclDataType_t t) {
  static MPI_Op bf16 = MPI_OP_NULL;
  if (t != ncclBfloat16) return MPI_SUM;
  if (bf16 == MPI_OP_NULL) MPI_Op_create(&bf16_add, 1, &bf16);
  return bf16;
}

// One item for a group of operations (or one outside a group), next on each communicator it uses.
void enqueue_ops(cudaStream_t s, std::vector<NcclOp> ops) {
  CUstream_st::Item it;
  for (const NcclOp& op : ops) {
    bool seen = false;
    for (const auto& [c, seq] : it.order) seen |= c == op.comm;
    if (!seen) it.order.push_back({op.comm, op.comm->issued++});
  }
  auto requests = std::make_shared<std::vector<MPI_Request>>();
  it.start = [ops, requests] {
    for (const NcclOp& op : ops) {
      MPI_Request r = MPI_REQUEST_NULL;
      const int n = int(op.count);
      const MPI_Comm c = op.comm->comm;
      switch (op.kind) {
        case NcclOp::send: MPI_Isend(op.in, n * int(type_bytes(op.type)), MPI_BYTE, op.peer, 7, c, &r); break;
        case NcclOp::recv: MPI_Irecv(op.out, n * int(type_bytes(op.type)), MPI_BYTE, op.peer, 7, c, &r); break;
        case NcclOp::all_reduce:
          MPI_Iallreduce(op.in == op.out ? MPI_IN_PLACE : op.in, op.out, n, mpi_type(op.type), sum_op(op.type), c, &r);
          break;
        case NcclOp::all_gather:
          MPI_Iallgather(op.in, n * int(type_bytes(op.type)), MPI_BYTE, op.out, n * int(type_bytes(op.type)), MPI_BYTE, c, &r);
          break;
        case NcclOp::reduce_scatter:
          MPI_Ireduce_scatter_block(op.in, op.out, n, mpi_type(op.type), sum_op(op.type), c, &r);
          break;
        case NcclOp::broadcast:
          if (op.comm->rank == op.peer && op.in != op.out) std::memcpy(op.out, op.in, op.count * type_bytes(op.type));
          MPI_Ibcast(op.out, n * int(type_bytes(op.type)), MPI_BYTE, op.peer, c, &r);
          break;
      }
      requests->push_back(r);
    }
  };
  it.finished = [requests] {
    int flag = 0;
    MPI_Testall(int(requests->size()), requests->data(), &flag, MPI_STATUSES_IGNORE);
    return flag != 0;
  };
  s->queue.push_back(std::move(it));
}

ncclResult_t add(NcclOp op, cudaStream_t s) {
  if (!s || !op.comm) return ncclInvalidUsage;
  if (group_depth > 0) {
    if (group_stream && group_stream != s) return ncclInvalidUsage;  // the backend groups one stream's run
    group_stream = s;
    group_ops.push_back(op);
    return ncclSuccess;
  }
  enqueue_ops(s, {op});
  return ncclSuccess;
}

}  // namespace
}  // namespace fake

const char* ncclGetErrorString(ncclResult_t) { return "fake NCCL error"; }
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  static int counter = 0;
  int me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  std::memset(id, 0, sizeof *id);
  const int v[2] = {me, counter++};
  std::memcpy(id->internal, v, sizeof v);
  return ncclSuccess;
}
// The members tell the root (comm rank 0) their world ranks; the root sends back the list,
// in comm rank order, and the members make the MPI communicator of that group.
ncclResult_t ncclCommInitRank(ncclComm_t* c, int n, ncclUniqueId id, int rank) {
  int v[2];
  std::memcpy(v, id.internal, sizeof v);
  const int root = v[0], tag = 20000 + v[1] % 10000;
  int me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  std::vector<int> world(size_t(n), -1);
  if (rank == 0) {
    world[0] = me;
    for (int i = 1; i < n; ++i) {
      int got[2];
      MPI_Recv(got, 2, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      world[size_t(got[0])] = got[1];
    }
    for (int i = 1; i < n; ++i) MPI_Send(world.data(), n, MPI_INT, world[size_t(i)], tag, MPI_COMM_WORLD);
  } else {
    const int mine[2] = {rank, me};
    MPI_Send(mine, 2, MPI_INT, root, tag, MPI_COMM_WORLD);
    MPI_Recv(world.data(), n, MPI_INT, root, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Group all, sub;
  MPI_Comm_group(MPI_COMM_WORLD, &all);
  MPI_Group_incl(all, n, world.data(), &sub);
  auto* comm = new ncclComm;
  comm->rank = rank, comm->size = n;
  MPI_Comm_create_group(MPI_COMM_WORLD, sub, tag, &comm->comm);
  MPI_Group_free(&sub);
  MPI_Group_free(&all);
  *c = comm;
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t c) { return ncclCommDestroy(c); }
ncclResult_t ncclCommDestroy(ncclComm_t c) {
  if (c && c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
  delete c;
  return ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* r) { return *r = ncclSuccess, ncclSuccess; }
ncclResult_t ncclGroupStart() { return ++fake::group_depth, ncclSuccess; }
ncclResult_t ncclGroupEnd() {
  if (--fake::group_depth == 0 && !fake::group_ops.empty()) {
    fake::enqueue_ops(fake::group_stream, std::move(fake::group_ops));
    fake::group_ops.clear();
    fake::group_stream = nullptr;
  }
  return ncclSuccess;
}
ncclResult_t ncclSend(const void* b, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
  return fake::add({fake::NcclOp::send, b, nullptr, n, t, peer, c}, s);
}
ncclResult_t ncclRecv(void* b, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
  return fake::add({fake::NcclOp::recv, nullptr, b, n, t, peer, c}, s);
}
ncclResult_t ncclAllReduce(const void* in, void* out, size_t n, ncclDataType_t t, ncclRedOp_t, ncclComm_t c, cudaStream_t s) {
  return fake::add({fake::NcclOp::all_reduce, in, out, n, t, -1, c}, s);
}
ncclResult_t ncclAllGather(const void* in, void* out, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t s) {
  return fake::add({fake::NcclOp::all_gather, in, out, n, t, -1, c}, s);
}
ncclResult_t ncclReduceScatter(const void* in, void* out, size_t n, ncclDataType_t t, ncclRedOp_t, ncclComm_t c,
                               cudaStream_t s) {
  return fake::add({fake::NcclOp::reduce_scatter, in, out, n, t, -1, c}, s);
}
ncclResult_t ncclBroadcast(const void* in, void* out, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t s) {
  return fake::add({fake::NcclOp::broadcast, in, out, n, t, root, c}, s);
}
