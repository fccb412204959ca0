// The cuda backend (docs/runtime-cuda.md): runs a Schedule's ops on a GPU through
// the shared run driver, ENQUEUEING rather than executing — an op is complete for
// the driver once it is enqueued on its CUDA stream; stream order and events
// give the device the Schedule's real order.
//   streams: one CUDA stream per Schedule stream of each rank run here
//   deps: cudaStreamWaitEvent on the end event of each dependency on another
//     stream; a start and an end event around every op time it
//   compute: attention tiles through kernels/cuda (a DevicePlan per (descriptor,
//     layer), fp32 scratch merged / narrowed as runtime/cpu_compute.cpp does),
//     GEMMs through cuBLAS, elementwise ops as a read pass (cuda_ops.hpp)
//   transfers, one rank per process: NCCL send/recv (a joined run is one NCCL
//     group) on the channels of runtime/p2p_channels.hpp, NCCL collectives on a
//     communicator per group, all-to-all as grouped send/recv of packed rows
//   transfers, --emulate-ranks N (every rank in one process, one GPU): device
//     copies on the receiver's stream after the sender's start event; emulated
//     collectives exchange through per-stream staging between event barriers
// Bad input (no device, memory too small, what the kernels cannot run) throws
// before anything is allocated on the device, in one line.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/buffer_instances.hpp"
#include "runtime/collective_order.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/cpu_compute.hpp"
#include "runtime/exchange_plan.hpp"
#include "runtime/index_building.hpp"
#include "runtime/launch.hpp"
#include "runtime/layouts.hpp"
#include "runtime/p2p_channels.hpp"
#include "runtime/tensor_store.hpp"
#include "runtime/world.hpp"
#include "sim/config/experiment.hpp"
#include "sim/schedule/run_driver.hpp"

struct cublasContext;

namespace rm::kernels::cuda {
class DevicePlan;
}

namespace rm::runtime {

class CudaStore;
class NcclWorld;

// What launch.cpp has read and derived; must outlive the backend.
struct CudaInputs {
  const schedule::Schedule& s;
  const Experiment& e;
  const schedule::RunPlan& plan;
  const BufferInstances& instances;
  const Layouts& layouts;
};

class CudaBackend final : public schedule::RunBackend {
 public:
  // Checks and allocates everything (throws ConfigError / ScheduleError / CudaError,
  // one line, on bad input); with o.emulate_ranks every rank of the Schedule runs here.
  CudaBackend(const CudaInputs& in, const World& world, const LaunchOptions& o);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  // The Schedule ranks this process runs, and the host mirror of one's buffers.
  const std::vector<int>& ranks() const { return ranks_; }
  TensorStore& host(int rank);
  // Multi-process: the NCCL communicators (collective over the world; after
  // world.make_group_comms). Emulation: nothing.
  void connect(World& world);
  // seed_inputs on every host store, then upload.
  void seed(uint64_t seed);
  // Host stores -> device buffers (seed does it; for inputs set on host(rank) directly).
  void upload();
  // Runs every local op once (multi-process: collective). Times are this process's
  // steady clock in seconds, from CUDA events; ops of every local rank.
  std::vector<OpSample> run_once();
  // Device buffers -> host stores, for read_outputs (--check).
  void download();
  // For --check: every local rank's forward index of `layer` as pack_built() writes
  // it ("" when none is built).
  std::string built_index(int layer) const;

  void post(schedule::OpId op) override;
  void start_compute(schedule::OpId op) override;
  void start_p2p(schedule::OpId op, schedule::OpId partner) override;
  void start_collective(int64_t call) override;

 private:
  struct Rank;
  struct Stream;
  struct Cursor;
  bool local(schedule::OpId op) const { return rank_index_[size_t(s_.ops[size_t(op)].rank)] >= 0; }
  Rank& rank_of(schedule::OpId op);
  Stream& stream_of(schedule::OpId op);
  std::byte* device(schedule::OpId op, int buffer);
  int64_t device_size(schedule::OpId op, int buffer);
  void check_memory(int64_t buffers) const;
  int64_t scratch_need(schedule::OpId op) const;
  void attention(schedule::OpId op, bool backward);
  void gemm(schedule::OpId op);
  void read_pass(schedule::OpId op);
  void index_build(schedule::OpId op);
  void host_sync(schedule::OpId op, cudaStream_t cs);
  void to_host(schedule::OpId op, const std::vector<int>& buffers, cudaStream_t cs);
  void to_device(schedule::OpId op, const std::vector<int>& buffers, cudaStream_t cs);
  void issue_nccl_run(size_t stream);
  void issue_nccl_collective(int64_t call);
  void emulate_collective(int64_t call);
  void concat_reads(schedule::OpId op, std::byte* to, int64_t bytes, cudaStream_t st);
  void scatter_writes(schedule::OpId op, const std::byte* from, int64_t bytes, cudaStream_t st);
  void finish(schedule::OpId op);
  void wait_device();
  std::string waiting() const;

  const schedule::Schedule& s_;
  const Experiment& e_;
  const schedule::RunPlan& plan_;
  const BufferInstances& in_;
  const Layouts& layouts_;
  bool emulate_ = false;
  double stall_timeout_s_ = 20;
  std::vector<int> ranks_;
  std::vector<int> rank_index_;  // per Schedule rank: index into ranks_/rank_state_, -1 when not here
  std::vector<std::unique_ptr<Rank>> rank_state_;
  std::vector<Stream> streams_;  // per plan stream (null stream when not local)
  std::map<std::pair<int, int>, std::unique_ptr<kernels::cuda::DevicePlan>> device_plans_;  // (detail, layer or -1)
  // Attention ops with a built index: per batch element, uploaded when the conversion
  // op builds it; replaced plans are kept until the next iteration (kernels may still read them).
  std::map<schedule::OpId, std::vector<std::unique_ptr<kernels::cuda::DevicePlan>>> built_plans_;
  std::vector<std::unique_ptr<kernels::cuda::DevicePlan>> retired_plans_;
  std::map<schedule::OpId, std::vector<std::byte>> last_queries_;  // the root's rows per broadcast, staged for its copy
  std::map<schedule::OpId, ExchangePlan> exchanges_;
  // Device row indices of every all-to-all op: [op] -> per (member, pair) send and recv rows.
  struct Rows {
    std::vector<const int64_t*> send, recv;  // [member * pairs + pair]
  };
  std::map<schedule::OpId, Rows> rows_;
  int64_t* row_memory_ = nullptr;
  unsigned long long* sink_ = nullptr;  // read passes fold into it
  P2pChannels channels_;
  std::unique_ptr<NcclWorld> nccl_;
  std::vector<cudaEvent_t> start_, end_, aux_;  // per op (aux: 2 per op, collectives); null when not local
  cudaEvent_t reference_ = nullptr;
  // The run being posted per stream (NCCL mode issues a joined run at its last post).
  std::vector<int32_t> run_posts_left_;
  std::unique_ptr<CollectiveOrder> order_;  // one call order per group (communicator)
  std::unique_ptr<schedule::RunDriver> driver_;
  int64_t local_ops_ = 0, local_left_ = 0;
  std::vector<OpSample> times_;
};

}  // namespace rm::runtime
