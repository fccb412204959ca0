#include "runtime/cuda/cuda_backend.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "kernels/cuda/attention_cuda.hpp"
#include "runtime/cuda/cuda_error.hpp"
#include "runtime/cuda/cuda_ops.hpp"
#include "runtime/cuda/cuda_store.hpp"
#include "runtime/cuda/nccl_world.hpp"
#include "runtime/inputs.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/schedule/schedule_error.hpp"

namespace rm::runtime {

using schedule::BufferRole;
using schedule::DType;
using schedule::OpId;
using schedule::OpKind;

namespace {

constexpr int64_t kAlign = 256;
int64_t aligned(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
double gb(int64_t bytes) { return double(bytes) / 1e9; }

dev::Elem elem(DType t) {
  switch (t) {
    case DType::bf16: return dev::Elem::bf16;
    case DType::fp32: return dev::Elem::fp32;
    case DType::int32: return dev::Elem::int32;
  }
  return dev::Elem::fp32;
}

void blas_check(cublasStatus_t st, const std::string& what) {
  if (st != CUBLAS_STATUS_SUCCESS) throw CudaError(what + ": cuBLAS status " + std::to_string(int(st)));
}

// The op's buffer of one of `roles` among `ids`; -1 when none (as cpu_compute.cpp).
int find(const schedule::Schedule& s, const std::vector<int>& ids, std::initializer_list<BufferRole> roles) {
  for (int b : ids)
    for (BufferRole r : roles)
      if (s.buffers[size_t(b)].role == r) return b;
  return -1;
}

// Which GPU of the machine this process takes: the launcher's local rank, else the world rank.
int local_rank(int world_rank) {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"})
    if (const char* x = std::getenv(v)) return std::atoi(x);
  return world_rank;
}

}  // namespace

struct CudaBackend::Rank {
  int rank = 0;
  std::unique_ptr<TensorStore> host;
  std::unique_ptr<CpuCompute> plans;  // builds the rank's tile plans on the host (CpuCompute::prepare)
  std::unique_ptr<IndexBuilding> index;  // index_build stages on the host store (a round trip per op)
  std::unique_ptr<CudaStore> dev;
};

struct CudaBackend::Stream {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  std::byte* scratch = nullptr;
  int64_t scratch_bytes = 0, used = 0;  // used: this run's share so far (reset at each run's head)
  int rank = -1;
  // Ends recorded on another stream (an emulated send ends with its copy) that the
  // stream's next run must wait for: stream order alone does not cover them.
  std::vector<cudaEvent_t> foreign;
  template <class T>
  T* take(int64_t elements) {
    const int64_t bytes = aligned(elements * int64_t(sizeof(T)));
    if (used + bytes > scratch_bytes) throw std::logic_error("cuda backend: scratch of a stream overrun (a sizing bug)");
    T* p = reinterpret_cast<T*>(scratch + used);
    used += bytes;
    return p;
  }
};

CudaBackend::CudaBackend(const CudaInputs& in, const World& world, const LaunchOptions& o)
    : s_(in.s), e_(in.e), plan_(in.plan), in_(in.instances), layouts_(in.layouts), emulate_(o.emulate_ranks > 0),
      stall_timeout_s_(o.stall_timeout_s), rank_index_(in.s.ranks.size(), -1) {
  const int nranks = int(s_.ranks.size());
  if (emulate_) {
    if (world.size() != 1)
      throw ConfigError(fmt::format("--emulate-ranks runs every rank in one process; {} processes were started (use -np 1)",
                                    world.size()));
    if (o.emulate_ranks != nranks)
      throw ConfigError(fmt::format("{}: the Schedule has {} ranks but --emulate-ranks {}", o.schedule, nranks, o.emulate_ranks));
    for (int r = 0; r < nranks; ++r) ranks_.push_back(r);
  } else {
    ranks_.push_back(world.rank());
  }
  for (size_t i = 0; i < ranks_.size(); ++i) rank_index_[size_t(ranks_[i])] = int(i);
  if (!kernels::cuda::device_available())
    throw ConfigError(fmt::format("--backend cuda: rank {} sees no CUDA device (driver missing or no GPU)", world.rank()));
  int devices = 0;
  cuda_check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  cuda_check(cudaSetDevice(emulate_ ? 0 : local_rank(world.rank()) % devices), "cudaSetDevice");

  // Host side first: what the kernels and transfers cannot run is refused before the device is touched.
  const int D = e_.model.head_dim;
  const bool has_attention = std::any_of(s_.ops.begin(), s_.ops.end(), [&](const schedule::Op& op) {
    return local(op.id) && (op.kind == OpKind::attn_fwd || op.kind == OpKind::attn_bwd);
  });
  if (has_attention && D != 64 && D != 128)
    throw schedule::ScheduleError(fmt::format("the model's head_dim is {}; the CUDA attention kernels take 64 or 128", D));
  if (!emulate_) channels_ = p2p_channels(s_, plan_.match);
  int64_t buffers = 0;
  for (int r : ranks_) {
    auto st = std::make_unique<Rank>();
    st->rank = r;
    st->host = std::make_unique<TensorStore>(s_, r, in_.layers());
    st->plans = std::make_unique<CpuCompute>(s_, e_, in_, *st->host);
    st->index = std::make_unique<IndexBuilding>(s_, e_, layouts_, plan_.match, in_, *st->host);
    if (st->index->any()) st->plans->use_index(st->index.get());
    st->plans->prepare();
    buffers += memory_needed(s_, r, in_.layers());
    rank_state_.push_back(std::move(st));
  }
  for (const auto& op : s_.ops) {
    if (!local(op.id)) continue;
    ++local_ops_;
    const schedule::Access* acc = s_.access_of(op);
    if (!acc) throw schedule::ScheduleError(schedule::describe(s_, op.id) + ": no buffers (a costable-only Schedule?)");
    if (op.kind == OpKind::send && int(acc->reads.size()) > dev::kMaxSumInputs)
      throw schedule::ScheduleError(schedule::describe(s_, op.id) + ": sums more buffers than the backend's sum kernel takes");
    if (schedule::is_p2p(op.kind) && !emulate_ && op.peer == op.rank)
      throw schedule::ScheduleError(schedule::describe(s_, op.id) + ": a transfer to its own rank");
    if (op.kind == OpKind::all_to_all) {
      exchanges_.emplace(op.id, exchange_plan(s_, plan_.match, layouts_, op.id));
      for (size_t i = 0; i < acc->reads.size(); ++i)
        if (emulate_ && acc->reads[i] == acc->writes.at(i))
          throw schedule::ScheduleError(schedule::describe(s_, op.id) +
                                        ": an in-place all-to-all is not emulated (read and write are one buffer)");
    }
    if (schedule::is_collective(op.kind) && emulate_ &&
        int(s_.groups.at(size_t(op.group)).ranks.size()) > dev::kMaxSumInputs)
      throw schedule::ScheduleError(schedule::describe(s_, op.id) + ": a group larger than the emulated reduction takes");
  }
  // Device memory: buffers, per-stream scratch, tile plans, all-to-all row indices.
  int64_t scratch = 0, plans = 0, rows = 0;
  std::vector<int64_t> per_stream(plan_.streams.size(), 0);
  for (size_t k = 0; k < plan_.streams.size(); ++k) {
    const auto ops = plan_.streams[k];
    if (ops.empty() || !local(ops[0])) continue;
    for (size_t h = 0; h < ops.size();) {
      const size_t len = size_t(std::max(1, plan_.run_length[size_t(ops[h])]));
      int64_t run = 0;
      for (size_t i = h; i < h + len && i < ops.size(); ++i) run += scratch_need(ops[i]);
      per_stream[k] = std::max(per_stream[k], run);
      h += len;
    }
    scratch += per_stream[k];
  }
  std::map<std::pair<int, int>, const kernels::TilePlan*> tile_plans;
  for (const auto& op : s_.ops) {
    if (!local(op.id) || (op.kind != OpKind::attn_fwd && op.kind != OpKind::attn_bwd)) continue;
    const schedule::Attention* a = s_.attention_of(op);
    if (a->index == schedule::IndexSource::built) continue;  // uploaded when built (not counted here)
    const std::pair key{s_.desc(op).detail, a->index == schedule::IndexSource::pattern ? op.layer : -1};
    if (tile_plans.count(key)) continue;
    const kernels::TilePlan& tp = rank_of(op.id).plans->plan_of(op);
    tile_plans.emplace(key, &tp);
    plans += int64_t((tp.q_pos.size() + tp.k_pos.size() + tp.seg_begin.size() + tp.seg_count.size() +
                      tp.gathered_rows.size()) * 4 + tp.item_offsets.size() * 8 + tp.items.size() * 8) + 7 * 16;
  }
  for (const auto& [op, p] : exchanges_)
    for (size_t j = 0; j < p.send_rows.size(); ++j)
      for (size_t i = 0; i < p.pairs.size(); ++i) rows += int64_t(p.send_rows[j][i].size() + p.recv_rows[j][i].size()) * 8;
  check_memory(buffers + scratch + plans + rows);

  // Device side.
  for (auto& r : rank_state_) r->dev = std::make_unique<CudaStore>(s_, *r->host);
  streams_.resize(plan_.streams.size());
  for (size_t k = 0; k < plan_.streams.size(); ++k) {
    const auto ops = plan_.streams[k];
    if (ops.empty() || !local(ops[0])) continue;
    Stream& st = streams_[k];
    st.rank = s_.ops[size_t(ops[0])].rank;
    cuda_check(cudaStreamCreateWithFlags(&st.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    st.scratch_bytes = per_stream[k];
    if (st.scratch_bytes > 0) cuda_check(cudaMalloc(reinterpret_cast<void**>(&st.scratch), size_t(st.scratch_bytes)), "scratch");
    if (std::any_of(ops.begin(), ops.end(), [&](OpId id) { return s_.ops[size_t(id)].kind == OpKind::gemm; })) {
      blas_check(cublasCreate(&st.blas), "cublasCreate");
      blas_check(cublasSetStream(st.blas, st.stream), "cublasSetStream");
    }
  }
  for (const auto& [key, tp] : tile_plans) device_plans_.emplace(key, std::make_unique<kernels::cuda::DevicePlan>(*tp));
  for (auto& r : rank_state_) {
    CpuCompute& host_plans = *r->plans;
    host_plans.on_replanned([this, &host_plans](OpId id) {
      auto& mine = built_plans_[id];
      for (auto& x : mine) retired_plans_.push_back(std::move(x));
      mine.clear();
      for (int64_t b = 0; b < e_.workload.batch; ++b)
        mine.push_back(std::make_unique<kernels::cuda::DevicePlan>(host_plans.plan_of(s_.ops[size_t(id)], b)));
    });
  }
  if (rows > 0) {
    cuda_check(cudaMalloc(reinterpret_cast<void**>(&row_memory_), size_t(rows)), "all-to-all row indices");
    int64_t* at = row_memory_;
    auto upload = [&](const std::vector<int64_t>& v) {
      const int64_t* p = at;
      if (!v.empty()) cuda_check(cudaMemcpy(at, v.data(), v.size() * 8, cudaMemcpyHostToDevice), "row index upload");
      at += v.size();
      return p;
    };
    for (const auto& [op, p] : exchanges_) {
      Rows& r = rows_[op];
      for (size_t j = 0; j < p.send_rows.size(); ++j)
        for (size_t i = 0; i < p.pairs.size(); ++i) r.send.push_back(upload(p.send_rows[j][i]));
      for (size_t j = 0; j < p.recv_rows.size(); ++j)
        for (size_t i = 0; i < p.pairs.size(); ++i) r.recv.push_back(upload(p.recv_rows[j][i]));
    }
  }
  cuda_check(cudaMalloc(reinterpret_cast<void**>(&sink_), sizeof(unsigned long long)), "read-pass sink");
  start_.assign(s_.ops.size(), nullptr);
  end_.assign(s_.ops.size(), nullptr);
  aux_.assign(2 * s_.ops.size(), nullptr);
  for (const auto& op : s_.ops) {
    if (!local(op.id)) continue;
    cuda_check(cudaEventCreate(&start_[size_t(op.id)]), "cudaEventCreate");
    cuda_check(cudaEventCreate(&end_[size_t(op.id)]), "cudaEventCreate");
    if (schedule::is_collective(op.kind))
      for (int i = 0; i < 2; ++i) cuda_check(cudaEventCreateWithFlags(&aux_[2 * size_t(op.id) + size_t(i)], cudaEventDisableTiming), "cudaEventCreate");
  }
  cuda_check(cudaEventCreate(&reference_), "cudaEventCreate");
  run_posts_left_.assign(plan_.streams.size(), 0);
  order_ = std::make_unique<CollectiveOrder>(s_, plan_.match, [this](OpId op) { return local(op); });
}

CudaBackend::~CudaBackend() {
  driver_.reset();
  nccl_.reset();
  for (auto* v : {&start_, &end_, &aux_})
    for (cudaEvent_t e : *v)
      if (e) cudaEventDestroy(e);
  if (reference_) cudaEventDestroy(reference_);
  for (Stream& st : streams_) {
    if (st.blas) cublasDestroy(st.blas);
    if (st.stream) cudaStreamDestroy(st.stream);
    cudaFree(st.scratch);
  }
  device_plans_.clear();
  built_plans_.clear();
  retired_plans_.clear();
  cudaFree(row_memory_);
  cudaFree(sink_);
}

void CudaBackend::check_memory(int64_t need) const {
  size_t free = 0, total = 0;
  cuda_check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  if (need > int64_t(free)) {
    const std::string who =
        emulate_ ? fmt::format("the {} emulated ranks need", ranks_.size()) : fmt::format("rank {} needs", ranks_[0]);
    throw ConfigError(fmt::format("{} {:.2f} GB of device memory for buffers and scratch; the GPU has {:.2f} GB free of {:.2f} GB",
                                  who, gb(need), gb(int64_t(free)), gb(int64_t(total))));
  }
}

// Scratch an op takes from its stream (Stream::take in the same order, with its rounding).
int64_t CudaBackend::scratch_need(OpId id) const {
  const schedule::Op& op = s_.ops[size_t(id)];
  const int64_t D = e_.model.head_dim;
  const auto f32 = [](int64_t n) { return aligned(n * 4); };
  switch (op.kind) {
    case OpKind::attn_fwd:
    case OpKind::attn_bwd: {
      const schedule::Attention& a = *s_.attention_of(op);
      const int64_t Tq = s_.token_sets.at(size_t(a.q_tokens)).size(), Tk = s_.token_sets.at(size_t(a.kv_tokens)).size();
      const int64_t qn = a.heads * Tq * D, kn = a.kv_heads * Tk * D;  // one sequence: scratch is reused per batch
      return op.kind == OpKind::attn_fwd ? 2 * f32(qn) + f32(a.heads * Tq) : 2 * f32(qn) + 2 * f32(kn);
    }
    case OpKind::gemm: {
      const schedule::Gemm* g = s_.gemm_of(op);
      return g ? f32(g->m * g->k) + f32(g->k * g->n) + f32(g->m * g->n) : 0;
    }
    case OpKind::send: return emulate_ ? 0 : aligned(s_.desc(op).bytes);
    case OpKind::all_reduce:
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::broadcast: return 2 * aligned(s_.desc(op).bytes);
    case OpKind::all_to_all: {
      if (emulate_) return 0;
      const ExchangePlan& p = exchanges_.at(id);
      int64_t send = 0, recv = 0;
      for (size_t j = 0; j < p.send_rows.size(); ++j)
        for (size_t i = 0; i < p.pairs.size(); ++i) {
          const int64_t row = p.row_elements * schedule::dtype_bytes(s_.buffers[size_t(p.pairs[i].write)].dtype);
          send += int64_t(p.send_rows[j][i].size()) * row;
          recv += int64_t(p.recv_rows[j][i].size()) * row;
        }
      return aligned(send) + aligned(recv);
    }
    default: return 0;
  }
}

CudaBackend::Rank& CudaBackend::rank_of(OpId op) {
  return *rank_state_[size_t(rank_index_[size_t(s_.ops[size_t(op)].rank)])];
}

CudaBackend::Stream& CudaBackend::stream_of(OpId op) { return streams_[size_t(plan_.stream_of[size_t(op)])]; }

TensorStore& CudaBackend::host(int rank) {
  if (rank < 0 || size_t(rank) >= rank_index_.size() || rank_index_[size_t(rank)] < 0)
    throw std::out_of_range("rank " + std::to_string(rank) + " does not run in this process");
  return *rank_state_[size_t(rank_index_[size_t(rank)])]->host;
}

std::byte* CudaBackend::device(OpId op, int buffer) { return rank_of(op).dev->bytes(buffer, in_.copy(op, buffer)); }
int64_t CudaBackend::device_size(OpId op, int buffer) { return rank_of(op).dev->size(buffer, in_.copy(op, buffer)); }

void CudaBackend::connect(World& world) {
  if (emulate_) return;
  world.make_group_comms(s_);
  nccl_ = std::make_unique<NcclWorld>(s_, channels_, world);
}

void CudaBackend::seed(uint64_t seed) {
  for (auto& r : rank_state_) seed_inputs(s_, layouts_, *r->host, seed);
  upload();
}

void CudaBackend::upload() {
  for (auto& r : rank_state_) r->dev->upload(*r->host);
}

void CudaBackend::download() {
  for (auto& r : rank_state_) r->dev->download(*r->host);
}

std::vector<OpSample> CudaBackend::run_once() {
  times_.clear();
  retired_plans_.clear();  // the last iteration ended with wait_device(): nothing reads them
  local_left_ = local_ops_;
  order_->reset();
  std::fill(run_posts_left_.begin(), run_posts_left_.end(), 0);
  // The reference: recorded while every stream is idle, so its device time is the host time taken right after.
  cudaStream_t first = nullptr;
  for (Stream& st : streams_)
    if (st.stream) {
      st.foreign.clear();
      if (!first) first = st.stream;
    }
  if (!first) return times_;
  cuda_check(cudaEventRecord(reference_, first), "cudaEventRecord");
  cuda_check(cudaEventSynchronize(reference_), "cudaEventSynchronize");
  const double host_ref = steady_now_s();
  driver_ = std::make_unique<schedule::RunDriver>(plan_, *this);
  driver_->start();
  if (local_left_ > 0)
    throw StallError(fmt::format("rank {}: the run stopped with {} ops never started; {}", ranks_[0], local_left_, waiting()));
  wait_device();
  times_.reserve(size_t(local_ops_));
  for (const auto& op : s_.ops) {
    if (!local(op.id)) continue;
    float a = 0, b = 0;
    cuda_check(cudaEventElapsedTime(&a, reference_, start_[size_t(op.id)]), "cudaEventElapsedTime");
    cuda_check(cudaEventElapsedTime(&b, reference_, end_[size_t(op.id)]), "cudaEventElapsedTime");
    times_.push_back({op.id, 0, host_ref + double(a) * 1e-3, host_ref + double(b) * 1e-3});
  }
  driver_.reset();
  return times_;
}

void CudaBackend::wait_device() {
  const double t0 = steady_now_s();
  for (int poll = 0;; ++poll) {
    bool busy = false;
    for (const Stream& st : streams_) {
      if (!st.stream) continue;
      const cudaError_t r = cudaStreamQuery(st.stream);
      if (r == cudaErrorNotReady) busy = true;
      else cuda_check(r, fmt::format("rank {}: a kernel or transfer failed", st.rank));
    }
    if (!busy) return;
    if (nccl_ && poll % 64 == 0) nccl_->check_async();
    if (steady_now_s() - t0 > stall_timeout_s_)
      throw StallError(fmt::format("rank {}: the device did not finish the iteration within {} s (a transfer waits for a "
                                   "peer that never came?)",
                                   ranks_[0], int(stall_timeout_s_)));
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

std::string CudaBackend::waiting() const {
  std::string out;
  for (size_t k = 0; k < plan_.streams.size(); ++k) {
    const auto ops = plan_.streams[k];
    if (ops.empty() || rank_index_[size_t(s_.ops[size_t(ops[0])].rank)] < 0) continue;
    const size_t h = driver_->head(k);
    if (h >= ops.size()) continue;
    if (!out.empty()) out += "; ";
    out += schedule::describe(s_, ops[h]) + (driver_->posted(ops[h]) ? " is posted and waits" : " waits for its dependencies");
  }
  return out.empty() ? "nothing left to wait for" : out;
}

void CudaBackend::finish(OpId op) {
  if (local(op)) --local_left_;
  driver_->complete(op);
}

void CudaBackend::post(OpId op) {
  if (!local(op)) return;
  const size_t k = size_t(plan_.stream_of[size_t(op)]);
  Stream& st = streams_[k];
  if (plan_.run_length[size_t(op)] > 0) st.used = 0, run_posts_left_[k] = plan_.run_length[size_t(op)];
  for (cudaEvent_t e : st.foreign) cuda_check(cudaStreamWaitEvent(st.stream, e, 0), "cudaStreamWaitEvent");
  st.foreign.clear();
  for (OpId d : s_.ops[size_t(op)].deps)
    if (size_t(plan_.stream_of[size_t(d)]) != k)
      cuda_check(cudaStreamWaitEvent(st.stream, end_[size_t(d)], 0), "cudaStreamWaitEvent");
  cuda_check(cudaEventRecord(start_[size_t(op)], st.stream), "cudaEventRecord");
  if (--run_posts_left_[k] == 0 && !emulate_) issue_nccl_run(k);
}

void CudaBackend::start_compute(OpId op) {
  if (!local(op)) {
    finish(op);
    return;
  }
  try {
    switch (s_.ops[size_t(op)].kind) {
      case OpKind::attn_fwd: attention(op, false); break;
      case OpKind::attn_bwd: attention(op, true); break;
      case OpKind::gemm: gemm(op); break;
      case OpKind::elementwise: read_pass(op); break;
      case OpKind::index_build: index_build(op); break;
      default: throw schedule::ScheduleError("not a compute op the cuda backend runs");
    }
  } catch (const std::exception& x) {
    throw std::runtime_error(fmt::format("rank {}: {} failed: {}", s_.ops[size_t(op)].rank, schedule::describe(s_, op), x.what()));
  }
  cuda_check(cudaEventRecord(end_[size_t(op)], stream_of(op).stream), "cudaEventRecord");
  finish(op);
}

void CudaBackend::attention(OpId id, bool backward) {
  const schedule::Op& op = s_.ops[size_t(id)];
  const schedule::Attention& a = *s_.attention_of(op);
  const schedule::Access& acc = *s_.access_of(op);
  const CpuCompute& host_plans = *rank_of(id).plans;
  const kernels::TilePlan& tp = host_plans.plan_of(op);  // its shape; batch b runs plan(b)
  const bool built = a.index == schedule::IndexSource::built;
  const auto plan = [&](int64_t b) -> const kernels::TilePlan& { return host_plans.plan_of(op, b); };
  const auto device_plan = [&](int64_t b) -> const kernels::cuda::DevicePlan& {
    if (built) {
      const auto it = built_plans_.find(id);
      if (it == built_plans_.end()) throw schedule::ScheduleError("its index was never built (no conversion op ran before it)");
      return *it->second.at(size_t(b));
    }
    return *device_plans_.at({s_.desc(op).detail, a.index == schedule::IndexSource::pattern ? op.layer : -1});
  };
  Stream& st = stream_of(id);
  const cudaStream_t cs = st.stream;
  const int64_t B = e_.workload.batch, D = e_.model.head_dim;
  const int64_t Tq = tp.shape.rows_q, Tk = tp.shape.rows_k, H = a.heads, KVH = a.kv_heads;
  const int64_t qn = H * Tq * D, kn = KVH * Tk * D;
  const int qb = find(s_, acc.reads, {BufferRole::q}), kvb = find(s_, acc.reads, {BufferRole::kv, BufferRole::kv_slot});
  const auto* q = reinterpret_cast<const uint16_t*>(device(id, qb));
  const auto* kv = reinterpret_cast<const uint16_t*>(device(id, kvb));
  const auto bf16 = [](const uint16_t* p, int64_t n) { return kernels::ConstTensor{p, size_t(n), kernels::DType::bf16}; };
  if (!backward) {
    const int ob = find(s_, acc.writes, {BufferRole::o}), lb = find(s_, acc.writes, {BufferRole::lse});
    auto* o = reinterpret_cast<uint16_t*>(device(id, ob));
    auto* l = reinterpret_cast<float*>(device(id, lb));
    float* out = st.take<float>(qn);
    float* acc_o = st.take<float>(qn);
    float* lse = st.take<float>(H * Tq);
    for (int64_t b = 0; b < B; ++b) {
      uint16_t* o_b = o + b * qn;
      float* l_b = l + b * H * Tq;
      if (a.mask == schedule::Mask::empty) {
        if (!a.merge) {
          cuda_check(cudaMemsetAsync(o_b, 0, size_t(qn) * 2, cs), "cudaMemsetAsync");
          dev::fill(l_b, -std::numeric_limits<float>::infinity(), H * Tq, cs);
        }
        continue;
      }
      // The first pass writes LSE in place; a merge needs the tile's own LSE beside the running one.
      float* part_lse = a.merge ? lse : l_b;
      auto p = kernels::make_forward_params(plan(b), bf16(q + b * qn, qn), bf16(kv + b * kn, kn), bf16(kv + (B + b) * kn, kn),
                                            {out, size_t(qn)}, {part_lse, size_t(H * Tq)});
      kernels::cuda::attention_forward(device_plan(b).bind(p), cs);
      if (!a.merge) {
        dev::convert(out, dev::Elem::fp32, qn, o_b, dev::Elem::bf16, qn, cs);
      } else {
        dev::convert(o_b, dev::Elem::bf16, qn, acc_o, dev::Elem::fp32, qn, cs);
        kernels::cuda::merge_partial(acc_o, l_b, out, lse, H * Tq, int(D), cs);
        dev::convert(acc_o, dev::Elem::fp32, qn, o_b, dev::Elem::bf16, qn, cs);
      }
    }
    return;
  }
  const int ob = find(s_, acc.reads, {BufferRole::o}), lb = find(s_, acc.reads, {BufferRole::lse});
  const int db = find(s_, acc.reads, {BufferRole::d_o});
  const int dqb = find(s_, acc.writes, {BufferRole::dq}), dkvb = find(s_, acc.writes, {BufferRole::dkv, BufferRole::dkv_slot});
  const auto* o = reinterpret_cast<const uint16_t*>(device(id, ob));
  const auto* l = reinterpret_cast<const float*>(device(id, lb));
  const auto* dout = reinterpret_cast<const uint16_t*>(device(id, db));
  auto* dq = reinterpret_cast<uint16_t*>(device(id, dqb));
  std::byte* dkv = device(id, dkvb);
  const DType dkv_t = s_.buffers[size_t(dkvb)].dtype;
  const int64_t w = schedule::dtype_bytes(dkv_t);
  float* out = st.take<float>(qn);
  float* dq32 = st.take<float>(qn);
  float* dk_scratch = st.take<float>(kn);
  float* dv_scratch = st.take<float>(kn);
  for (int64_t b = 0; b < B; ++b) {
    uint16_t* dq_b = dq + b * qn;
    std::byte* dk_at = dkv + b * kn * w;
    std::byte* dv_at = dkv + (B + b) * kn * w;
    if (a.mask == schedule::Mask::empty) {
      cuda_check(cudaMemsetAsync(dk_at, 0, size_t(kn * w), cs), "cudaMemsetAsync");
      cuda_check(cudaMemsetAsync(dv_at, 0, size_t(kn * w), cs), "cudaMemsetAsync");
      if (!a.merge) cuda_check(cudaMemsetAsync(dq_b, 0, size_t(qn) * 2, cs), "cudaMemsetAsync");
      continue;
    }
    // fp32 dK|dV: the kernel writes the buffer itself; bf16: through scratch, rounded once.
    float* dk32 = dkv_t == DType::fp32 ? reinterpret_cast<float*>(dk_at) : dk_scratch;
    float* dv32 = dkv_t == DType::fp32 ? reinterpret_cast<float*>(dv_at) : dv_scratch;
    dev::convert(o + b * qn, dev::Elem::bf16, qn, out, dev::Elem::fp32, qn, cs);
    auto p = kernels::make_backward_params(plan(b), bf16(q + b * qn, qn), bf16(kv + b * kn, kn), bf16(kv + (B + b) * kn, kn),
                                           bf16(dout + b * qn, qn), {out, size_t(qn)}, {l + b * H * Tq, size_t(H * Tq)},
                                           {dq32, size_t(qn)}, {dk32, size_t(kn)}, {dv32, size_t(kn)}, false);
    kernels::cuda::attention_backward(device_plan(b).bind(p), cs);
    dev::add_narrow(dq32, dq_b, qn, a.merge, cs);
    if (dkv_t != DType::fp32) {
      dev::convert(dk32, dev::Elem::fp32, kn, dk_at, elem(dkv_t), kn, cs);
      dev::convert(dv32, dev::Elem::fp32, kn, dv_at, elem(dkv_t), kn, cs);
    }
  }
}

void CudaBackend::gemm(OpId id) {
  const schedule::Op& op = s_.ops[size_t(id)];
  const schedule::Gemm* g = s_.gemm_of(op);
  const schedule::Access* acc = s_.access_of(op);
  if (!g || acc->reads.size() < 2 || acc->writes.empty())
    throw schedule::ScheduleError("a GEMM needs its shape, two inputs and an output");
  Stream& st = stream_of(id);
  const int64_t m = g->m, n = g->n, k = g->k;
  const int a_b = acc->reads[0], b_b = acc->reads[1];
  const DType at = s_.buffers[size_t(a_b)].dtype, bt = s_.buffers[size_t(b_b)].dtype;
  // bf16 x bf16 as stored (fp32 accumulation: the cpu backend's products are exact too);
  // any other input makes both fp32. Short inputs are zero-padded, as the cpu backend loads them.
  const dev::Elem t = at == DType::bf16 && bt == DType::bf16 ? dev::Elem::bf16 : dev::Elem::fp32;
  const auto input = [&](int b, int64_t want) -> const void* {
    const DType bt_ = s_.buffers[size_t(b)].dtype;
    const int64_t have = device_size(id, b) / schedule::dtype_bytes(bt_);
    if (elem(bt_) == t && have >= want) return device(id, b);
    void* p = st.take<float>(want);
    dev::convert(device(id, b), elem(bt_), have, p, t, want, st.stream);
    return p;
  };
  const void* A = input(a_b, m * k);
  const void* Bm = input(b_b, k * n);
  float* C = st.take<float>(m * n);
  const cudaDataType_t ct = t == dev::Elem::bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const float one = 1.f, zero = 0.f;
  // Row-major C = A B is column-major C^T = B^T A^T. The backward computes dX and dW: two GEMMs of this size.
  const int passes = op.phase == schedule::Phase::backward ? 2 : 1;
  for (int p = 0; p < passes; ++p)
    blas_check(cublasGemmEx(st.blas, CUBLAS_OP_N, CUBLAS_OP_N, int(n), int(m), int(k), &one, Bm, ct, int(n), A, ct, int(k),
                            p == 0 ? &zero : &one, C, CUDA_R_32F, int(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
  int64_t done = 0;
  for (int b : acc->writes) {
    const DType wt = s_.buffers[size_t(b)].dtype;
    const int64_t room = device_size(id, b) / schedule::dtype_bytes(wt);
    const int64_t n_out = std::min(room, m * n - done);
    if (n_out <= 0 || wt == DType::int32) break;
    dev::convert(C + done, dev::Elem::fp32, n_out, device(id, b), elem(wt), n_out, st.stream);
    done += n_out;
  }
}

// ---- index building: a host round trip per op (docs/runtime-cuda.md, "Index building") ------

// Waits until stream `cs` has reached this point (everything enqueued on it is done),
// within the stall timeout: the host then reads what the device wrote.
void CudaBackend::host_sync(OpId op, cudaStream_t cs) {
  const double t0 = steady_now_s();
  for (int poll = 0;; ++poll) {
    const cudaError_t r = cudaStreamQuery(cs);
    if (r != cudaErrorNotReady) return cuda_check(r, fmt::format("rank {}: a kernel or transfer failed", s_.ops[size_t(op)].rank));
    if (nccl_ && poll % 64 == 0) nccl_->check_async();
    if (steady_now_s() - t0 > stall_timeout_s_)
      throw StallError(fmt::format("rank {}: {} waited {} s for its inputs on the device (a transfer waits for a peer "
                                   "that never came?)", s_.ops[size_t(op)].rank, schedule::describe(s_, op),
                                   int(stall_timeout_s_)));
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// The op's copies of `buffers`, device -> host store, then waits for them.
void CudaBackend::to_host(OpId op, const std::vector<int>& buffers, cudaStream_t cs) {
  TensorStore& h = *rank_of(op).host;
  for (int b : buffers) {
    auto dst = h.bytes(b, in_.copy(op, b));
    cuda_check(cudaMemcpyAsync(dst.data(), device(op, b), dst.size(), cudaMemcpyDeviceToHost, cs), "cudaMemcpyAsync (to host)");
  }
  host_sync(op, cs);
}

// Host store -> device, on the op's stream (read by the copy before any later stage writes the host store again:
// that stage's stream waits for this op's end first).
void CudaBackend::to_device(OpId op, const std::vector<int>& buffers, cudaStream_t cs) {
  TensorStore& h = *rank_of(op).host;
  for (int b : buffers) {
    auto src = h.bytes(b, in_.copy(op, b));
    cuda_check(cudaMemcpyAsync(device(op, b), src.data(), src.size(), cudaMemcpyHostToDevice, cs), "cudaMemcpyAsync (to device)");
  }
}

// One stage of MTraining's index building: its buffers to the host, the cpu stage
// (index_building.hpp) on the rank's host store, its outputs back; the conversion
// uploads the attention ops' new tile plans (CpuCompute::on_replanned). Timed from
// the op's start event to the end of the upload: the whole round trip.
void CudaBackend::index_build(OpId id) {
  Rank& r = rank_of(id);
  const cudaStream_t cs = stream_of(id).stream;
  const schedule::Access& a = *s_.access_of(s_.ops[size_t(id)]);
  std::vector<int> in = a.reads;  // and what it writes: a stage may write a buffer in part
  for (int b : a.writes)
    if (std::find(in.begin(), in.end(), b) == in.end()) in.push_back(b);
  host_sync(id, cs);
  to_host(id, in, cs);
  r.index->run(id);
  to_device(id, a.writes, cs);
}

std::string CudaBackend::built_index(int layer) const {
  std::string out;
  for (const auto& r : rank_state_) r->index->pack_forward(layer, out);
  return out;
}

void CudaBackend::read_pass(OpId id) {
  for (int b : s_.access_of(s_.ops[size_t(id)])->reads) dev::read_pass(device(id, b), device_size(id, b), sink_, stream_of(id).stream);
}

// The op's reads, concatenated, into `to` (zeros past their end), as the cpu backend's concat_reads.
// The root of the last queries' broadcast sends their rows instead, picked on the host.
void CudaBackend::concat_reads(OpId op, std::byte* to, int64_t bytes, cudaStream_t cs) {
  const schedule::Op& o = s_.ops[size_t(op)];
  if (IndexBuilding* x = rank_of(op).plans->index(); x && writes_last_queries(s_, o) && !s_.access_of(o)->reads.empty()) {
    host_sync(op, cs);
    to_host(op, s_.access_of(o)->reads, cs);
    std::vector<std::byte>& rows = last_queries_[op];  // kept: the copy may read it after this returns
    rows = x->last_queries(op);
    cuda_check(cudaMemcpyAsync(to, rows.data(), std::min(rows.size(), size_t(bytes)), cudaMemcpyHostToDevice, cs),
               "cudaMemcpyAsync (last queries)");
    if (int64_t(rows.size()) < bytes)
      cuda_check(cudaMemsetAsync(to + rows.size(), 0, size_t(bytes) - rows.size(), cs), "cudaMemsetAsync");
    return;
  }
  int64_t at = 0;
  for (int b : s_.access_of(s_.ops[size_t(op)])->reads) {
    if (at == bytes) break;
    const int64_t n = std::min(device_size(op, b), bytes - at);
    cuda_check(cudaMemcpyAsync(to + at, device(op, b), size_t(n), cudaMemcpyDeviceToDevice, cs), "cudaMemcpyAsync");
    at += n;
  }
  if (at < bytes) cuda_check(cudaMemsetAsync(to + at, 0, size_t(bytes - at), cs), "cudaMemsetAsync");
}

void CudaBackend::scatter_writes(OpId op, const std::byte* from, int64_t bytes, cudaStream_t cs) {
  int64_t at = 0;
  for (int b : s_.access_of(s_.ops[size_t(op)])->writes) {
    if (at == bytes) break;
    const int64_t n = std::min(device_size(op, b), bytes - at);
    cuda_check(cudaMemcpyAsync(device(op, b), from + at, size_t(n), cudaMemcpyDeviceToDevice, cs), "cudaMemcpyAsync");
    at += n;
  }
}

// ---- transfers ------------------------------------------------------------------------------

void CudaBackend::start_p2p(OpId op, OpId partner) {
  if (!emulate_) {  // NCCL: issued with its run (issue_nccl_run); ends for the driver now
    finish(op);
    finish(partner);
    return;
  }
  const OpId send = s_.ops[size_t(op)].kind == OpKind::send ? op : partner;
  const OpId recv = send == op ? partner : op;
  Stream& rs = stream_of(recv);
  const schedule::Access& sa = *s_.access_of(s_.ops[size_t(send)]);
  const schedule::Access& ra = *s_.access_of(s_.ops[size_t(recv)]);
  const int64_t bytes = s_.desc(s_.ops[size_t(send)]).bytes;
  std::byte* dst = device(recv, ra.writes.at(0));
  cuda_check(cudaStreamWaitEvent(rs.stream, start_[size_t(send)], 0), "cudaStreamWaitEvent");
  if (sa.reads.size() == 1) {
    cuda_check(cudaMemcpyAsync(dst, device(send, sa.reads[0]), size_t(bytes), cudaMemcpyDeviceToDevice, rs.stream),
               "cudaMemcpyAsync");
  } else {  // dK|dV: this step's partial plus the sum that came with the block, summed on the way
    const DType t = s_.buffers[size_t(sa.reads[0])].dtype;
    std::vector<const void*> in;
    for (int b : sa.reads) in.push_back(device(send, b));
    dev::sum(in.data(), int(in.size()), elem(t), dst, bytes / schedule::dtype_bytes(t), rs.stream);
  }
  cuda_check(cudaEventRecord(end_[size_t(recv)], rs.stream), "cudaEventRecord");
  cuda_check(cudaEventRecord(end_[size_t(send)], rs.stream), "cudaEventRecord");
  stream_of(send).foreign.push_back(end_[size_t(send)]);
  finish(send);
  finish(recv);
}

// NCCL: a stream's run is posted; its p2p ops go out as one NCCL group.
void CudaBackend::issue_nccl_run(size_t k) {
  const auto ops = plan_.streams[k];
  const size_t h = driver_->head(k);
  const size_t len = size_t(std::max(1, plan_.run_length[size_t(ops[h])]));
  Stream& st = streams_[k];
  struct Item {
    OpId op;
    std::byte* data;
  };
  std::vector<Item> items;
  for (size_t i = h; i < h + len; ++i) {
    const OpId id = ops[i];
    const schedule::Op& o = s_.ops[size_t(id)];
    if (!schedule::is_p2p(o.kind)) continue;
    const schedule::Access& acc = *s_.access_of(o);
    std::byte* data = nullptr;
    if (o.kind == OpKind::recv) {
      data = device(id, acc.writes.at(0));
    } else if (acc.reads.size() == 1) {
      data = device(id, acc.reads[0]);
    } else {
      const DType t = s_.buffers[size_t(acc.reads[0])].dtype;
      std::vector<const void*> in;
      for (int b : acc.reads) in.push_back(device(id, b));
      const int64_t bytes = s_.desc(o).bytes;
      data = st.take<std::byte>(bytes);
      dev::sum(in.data(), int(in.size()), elem(t), data, bytes / schedule::dtype_bytes(t), st.stream);
    }
    items.push_back({id, data});
  }
  if (items.empty()) return;
  nccl_check(ncclGroupStart(), "ncclGroupStart");
  for (const Item& it : items) {
    const schedule::Op& o = s_.ops[size_t(it.op)];
    const ncclComm_t comm = nccl_->channel(channels_.of_op[size_t(it.op)]);
    const std::string what = fmt::format("rank {}: {}", o.rank, schedule::describe(s_, it.op));
    const auto bytes = size_t(s_.desc(o).bytes);
    if (o.kind == OpKind::send) nccl_check(ncclSend(it.data, bytes, ncclUint8, o.peer, comm, st.stream), what);
    else nccl_check(ncclRecv(it.data, bytes, ncclUint8, o.peer, comm, st.stream), what);
  }
  nccl_check(ncclGroupEnd(), "ncclGroupEnd");
  for (const Item& it : items) cuda_check(cudaEventRecord(end_[size_t(it.op)], st.stream), "cudaEventRecord");
}

void CudaBackend::start_collective(int64_t call) {
  const auto& ops = plan_.match.calls[size_t(call)];
  if (emulate_) {
    emulate_collective(call);
    return;
  }
  if (order_->local_op(call) < 0) {
    for (OpId id : ops) finish(id);
    return;
  }
  // NCCL, like MPI, needs one call order per communicator on every member.
  for (int64_t c : order_->ready(call)) issue_nccl_collective(c);
}

void CudaBackend::issue_nccl_collective(int64_t call) {
  const auto& ops = plan_.match.calls[size_t(call)];
  const OpId mine = order_->local_op(call);
  const schedule::Op& o = s_.ops[size_t(mine)];
  const schedule::Access& acc = *s_.access_of(o);
  const schedule::Group& grp = s_.groups[size_t(o.group)];
  Stream& st = stream_of(mine);
  const cudaStream_t cs = st.stream;
  const ncclComm_t comm = nccl_->group(o.group);
  const int64_t n = int64_t(grp.ranks.size());
  const DType t = s_.buffers[size_t(!acc.writes.empty() ? acc.writes[0] : acc.reads.at(0))].dtype;
  const int64_t width = schedule::dtype_bytes(t);
  const std::string what = fmt::format("rank {}: {}", o.rank, schedule::describe(s_, mine));
  // A single buffer that holds the whole operand is used in place; otherwise staging.
  const auto input = [&](int64_t bytes) -> const std::byte* {
    if (acc.reads.size() == 1 && device_size(mine, acc.reads[0]) >= bytes) return device(mine, acc.reads[0]);
    std::byte* p = st.take<std::byte>(bytes);
    concat_reads(mine, p, bytes, cs);
    return p;
  };
  std::byte* staged_out = nullptr;
  const auto output = [&](int64_t bytes) -> std::byte* {
    if (acc.writes.size() == 1 && device_size(mine, acc.writes[0]) >= bytes) return device(mine, acc.writes[0]);
    return staged_out = st.take<std::byte>(bytes);
  };
  const int64_t o_bytes = s_.desc(o).bytes;
  int64_t out_bytes = o_bytes;
  switch (o.kind) {
    case OpKind::all_reduce: {
      const std::byte* in = input(o_bytes);
      nccl_check(ncclAllReduce(in, output(o_bytes), size_t(o_bytes / width), nccl_type(t), ncclSum, comm, cs), what);
      break;
    }
    case OpKind::all_gather: {
      const std::byte* in = input(o_bytes / n);
      nccl_check(ncclAllGather(in, output(o_bytes), size_t(o_bytes / n), ncclUint8, comm, cs), what);
      break;
    }
    case OpKind::reduce_scatter: {
      const std::byte* in = input(o_bytes);
      out_bytes = o_bytes / n;
      nccl_check(ncclReduceScatter(in, output(out_bytes), size_t(out_bytes / width), nccl_type(t), ncclSum, comm, cs), what);
      break;
    }
    case OpKind::broadcast: {
      const int root = int(std::find(grp.ranks.begin(), grp.ranks.end(), o.peer) - grp.ranks.begin());
      std::byte* out = output(o_bytes);
      const std::byte* in = o.rank == o.peer ? input(o_bytes) : out;
      nccl_check(ncclBroadcast(in, out, size_t(o_bytes), ncclUint8, root, comm, cs), what);
      break;
    }
    case OpKind::all_to_all: {
      const ExchangePlan& p = exchanges_.at(mine);
      const Rows& rows = rows_.at(mine);
      const size_t pairs = p.pairs.size();
      std::vector<int64_t> send_at(size_t(n) + 1, 0), recv_at(size_t(n) + 1, 0);
      for (size_t j = 0; j < size_t(n); ++j) {
        send_at[j + 1] = send_at[j], recv_at[j + 1] = recv_at[j];
        for (size_t i = 0; i < pairs; ++i) {
          const int64_t row = p.row_elements * schedule::dtype_bytes(s_.buffers[size_t(p.pairs[i].write)].dtype);
          send_at[j + 1] += int64_t(p.send_rows[j][i].size()) * row;
          recv_at[j + 1] += int64_t(p.recv_rows[j][i].size()) * row;
        }
      }
      std::byte* send = st.take<std::byte>(send_at[size_t(n)]);
      std::byte* recv = st.take<std::byte>(recv_at[size_t(n)]);
      for (size_t j = 0; j < size_t(n); ++j) {  // pack: my rows for member j, in j's storage order
        int64_t at = send_at[j];
        for (size_t i = 0; i < pairs; ++i) {
          const DType rt = s_.buffers[size_t(p.pairs[i].read)].dtype, wt = s_.buffers[size_t(p.pairs[i].write)].dtype;
          const int64_t count = int64_t(p.send_rows[j][i].size());
          dev::copy_rows(device(mine, p.pairs[i].read), elem(rt), rows.send[j * pairs + i], send + at, elem(wt), nullptr,
                         count, p.row_elements, cs);
          at += count * p.row_elements * schedule::dtype_bytes(wt);
        }
      }
      nccl_check(ncclGroupStart(), "ncclGroupStart");
      for (size_t j = 0; j < size_t(n); ++j) {
        if (send_at[j + 1] > send_at[j])
          nccl_check(ncclSend(send + send_at[j], size_t(send_at[j + 1] - send_at[j]), ncclUint8, int(j), comm, cs), what);
        if (recv_at[j + 1] > recv_at[j])
          nccl_check(ncclRecv(recv + recv_at[j], size_t(recv_at[j + 1] - recv_at[j]), ncclUint8, int(j), comm, cs), what);
      }
      nccl_check(ncclGroupEnd(), "ncclGroupEnd");
      for (size_t j = 0; j < size_t(n); ++j) {  // unpack: member j's message, pair by pair, in message order
        int64_t at = recv_at[j];
        for (size_t i = 0; i < pairs; ++i) {
          const DType wt = s_.buffers[size_t(p.pairs[i].write)].dtype;
          const int64_t count = int64_t(p.recv_rows[j][i].size());
          dev::copy_rows(recv + at, elem(wt), nullptr, device(mine, p.pairs[i].write), elem(wt), rows.recv[j * pairs + i],
                         count, p.row_elements, cs);
          at += count * p.row_elements * schedule::dtype_bytes(wt);
        }
      }
      break;
    }
    default: throw schedule::ScheduleError(schedule::describe(s_, mine) + ": not a collective");
  }
  if (staged_out) scatter_writes(mine, staged_out, out_bytes, cs);
  cuda_check(cudaEventRecord(end_[size_t(mine)], cs), "cudaEventRecord");
  for (OpId id : ops)
    if (id >= 0) finish(id);
}

// Every member is here: exchange through the members' staging between event barriers
// (docs/runtime-cuda.md): A, each member stages its operand; B, each computes its
// result from every member's staging; C, none ends before all are through B, so a
// member's next op cannot overwrite what another still reads.
void CudaBackend::emulate_collective(int64_t call) {
  const auto& ops = plan_.match.calls[size_t(call)];
  for (OpId id : ops)
    if (id < 0) throw schedule::ScheduleError("a collective call that misses a member");
  const schedule::Op& first = s_.ops[size_t(ops[0])];
  const schedule::Group& grp = s_.groups[size_t(first.group)];
  const size_t n = ops.size();
  const int64_t bytes = s_.desc(first).bytes;
  const schedule::Access& acc0 = *s_.access_of(first);
  const DType t = s_.buffers[size_t(!acc0.writes.empty() ? acc0.writes[0] : acc0.reads.at(0))].dtype;
  const int64_t width = schedule::dtype_bytes(t);
  const size_t root = first.kind == OpKind::broadcast
                          ? size_t(std::find(grp.ranks.begin(), grp.ranks.end(), first.peer) - grp.ranks.begin())
                          : 0;
  int64_t in_bytes = 0;
  switch (first.kind) {
    case OpKind::all_reduce:
    case OpKind::reduce_scatter:
    case OpKind::broadcast: in_bytes = bytes; break;
    case OpKind::all_gather: in_bytes = bytes / int64_t(n); break;
    default: in_bytes = 0;
  }
  std::vector<std::byte*> stage(n, nullptr);
  for (size_t j = 0; j < n; ++j) {  // A
    Stream& st = stream_of(ops[j]);
    if (in_bytes > 0 && (first.kind != OpKind::broadcast || j == root)) {
      stage[j] = st.take<std::byte>(in_bytes);
      concat_reads(ops[j], stage[j], in_bytes, st.stream);
    }
    cuda_check(cudaEventRecord(aux_[2 * size_t(ops[j])], st.stream), "cudaEventRecord");
  }
  const auto barrier = [&](size_t j, int phase) {
    for (size_t i = 0; i < n; ++i)
      if (i != j)
        cuda_check(cudaStreamWaitEvent(stream_of(ops[j]).stream, aux_[2 * size_t(ops[i]) + size_t(phase)], 0),
                   "cudaStreamWaitEvent");
  };
  for (size_t j = 0; j < n; ++j) {  // B
    const OpId me = ops[j];
    Stream& st = stream_of(me);
    const cudaStream_t cs = st.stream;
    const schedule::Access& acc = *s_.access_of(s_.ops[size_t(me)]);
    barrier(j, 0);
    const int64_t out_bytes = first.kind == OpKind::reduce_scatter ? bytes / int64_t(n) : bytes;
    std::byte* out = nullptr;
    if (first.kind != OpKind::all_to_all)
      out = acc.writes.size() == 1 && device_size(me, acc.writes[0]) >= out_bytes ? device(me, acc.writes[0])
                                                                                  : st.take<std::byte>(out_bytes);
    switch (first.kind) {
      case OpKind::all_reduce:
      case OpKind::reduce_scatter: {
        const int64_t off = first.kind == OpKind::reduce_scatter ? int64_t(j) * out_bytes : 0;
        std::vector<const void*> in;
        for (size_t i = 0; i < n; ++i) in.push_back(stage[i] + off);
        dev::sum(in.data(), int(n), elem(t), out, out_bytes / width, cs);
        break;
      }
      case OpKind::all_gather:
        for (size_t i = 0; i < n; ++i)
          cuda_check(cudaMemcpyAsync(out + int64_t(i) * in_bytes, stage[i], size_t(in_bytes), cudaMemcpyDeviceToDevice, cs),
                     "cudaMemcpyAsync");
        break;
      case OpKind::broadcast:
        cuda_check(cudaMemcpyAsync(out, stage[root], size_t(bytes), cudaMemcpyDeviceToDevice, cs), "cudaMemcpyAsync");
        break;
      case OpKind::all_to_all: {
        const ExchangePlan& mine = exchanges_.at(me);
        const size_t pairs = mine.pairs.size();
        for (size_t i = 0; i < n; ++i) {
          const OpId from = ops[i];
          const ExchangePlan& theirs = exchanges_.at(from);
          for (size_t p = 0; p < pairs; ++p) {
            const int rb = theirs.pairs[p].read, wb = mine.pairs[p].write;
            dev::copy_rows(device(from, rb), elem(s_.buffers[size_t(rb)].dtype), rows_.at(from).send[j * pairs + p],
                           device(me, wb), elem(s_.buffers[size_t(wb)].dtype), rows_.at(me).recv[i * pairs + p],
                           int64_t(mine.recv_rows[i][p].size()), mine.row_elements, cs);
          }
        }
        break;
      }
      default: throw schedule::ScheduleError(schedule::describe(s_, me) + ": not a collective");
    }
    if (out && (acc.writes.size() != 1 || out != device(me, acc.writes[0]))) scatter_writes(me, out, out_bytes, cs);
    cuda_check(cudaEventRecord(aux_[2 * size_t(me) + 1], cs), "cudaEventRecord");
  }
  for (size_t j = 0; j < n; ++j) {  // C
    barrier(j, 1);
    cuda_check(cudaEventRecord(end_[size_t(ops[j])], stream_of(ops[j]).stream), "cudaEventRecord");
  }
  for (OpId id : ops) finish(id);
}

}  // namespace rm::runtime
