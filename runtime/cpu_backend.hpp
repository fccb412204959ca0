// The cpu backend: runs one rank's ops of a Schedule for real, through the
// shared run driver (sim/schedule/run_driver.hpp) — the same semantics the
// engines simulate. The driver sees the whole Schedule; other ranks' ops are
// "virtual": they end the moment the driver starts them, except where they meet
// this rank's ops (a transfer, a collective), which end when MPI says the real
// one did. A virtual op never runs ahead of what its real rank can do, so the
// local side is posted to MPI no later than the rendezvous allows.
//   compute: one worker thread per stream that has compute ops (cpu_compute.hpp)
//   send/recv: MPI_Isend / MPI_Irecv, tag = the send's op id (unique)
//   collectives: non-blocking MPI collectives on the group's communicator, issued
//     in call order per group on every member (MPI requires one order)
// Every MPI call stays on the calling thread. No progress for stall_timeout_s
// is an error naming what each stream waits for.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/buffer_instances.hpp"
#include "runtime/collective_order.hpp"
#include "runtime/cpu_compute.hpp"
#include "runtime/exchange_plan.hpp"
#include "runtime/layouts.hpp"
#include "runtime/measured_timeline.hpp"
#include "runtime/tensor_store.hpp"
#include "runtime/world.hpp"
#include "sim/schedule/run_driver.hpp"

namespace rm::runtime {


// No progress for the stall timeout: the message names what each stream waits for.
struct StallError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class CpuBackend final : public schedule::RunBackend {
 public:
  CpuBackend(const schedule::Schedule& s, const schedule::RunPlan& plan, const Layouts& layouts,
             const BufferInstances& in, TensorStore& store, CpuCompute& compute, World& world, double stall_timeout_s);
  ~CpuBackend() override;
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  // Runs every op of this rank once (collective: every rank calls it). Returns the
  // start and end of each of its ops on steady_now_s(), tagged `iteration`: a
  // compute op from when its worker began it, a transfer or collective from when
  // its run was posted (as the engines time them). Throws the first failure, naming the op.
  std::vector<OpSample> run_once(int iteration = 0);

  // Testing aid (--inject-fault): op `op` of this rank throws, never returns (a stuck
  // device) or silently does nothing (a lost ring step, which --check must catch); a
  // collective with `skip` runs but drops its result (a lost gradient reduction).
  enum class Fault { fail, hang, skip };
  void inject_fault(schedule::OpId op, Fault f) { fault_op_ = op, fault_ = f; }

  void post(schedule::OpId op) override;
  void start_compute(schedule::OpId op) override;
  void start_p2p(schedule::OpId op, schedule::OpId partner) override;
  void start_collective(int64_t call) override;

 private:
  struct Worker;
  struct InFlight {
    MPI_Request request = MPI_REQUEST_NULL;
    schedule::OpId op = -1;             // the local op
    std::vector<schedule::OpId> also;   // virtual ops that end with it
    double start_s = 0;
    std::vector<std::byte> send, recv;  // staging
    bool unpack = false;                // recv staging -> the op's writes
  };
  bool local(schedule::OpId op) const { return s_.ops[size_t(op)].rank == me_; }
  std::span<std::byte> buffer(schedule::OpId op, int b) { return store_.bytes(b, in_.copy(op, b)); }
  std::vector<std::byte> concat_reads(schedule::OpId op, int64_t bytes);
  void scatter_writes(schedule::OpId op, const std::vector<std::byte>& data);
  void issue_collective(int64_t call);
  void finish(InFlight& f);
  void finish_local(schedule::OpId op, double start_s, double end_s);
  bool drain_workers();
  bool poll_mpi();
  std::string waiting() const;

  const schedule::Schedule& s_;
  const schedule::RunPlan& plan_;
  const Layouts& layouts_;
  const BufferInstances& in_;
  TensorStore& store_;
  CpuCompute& compute_;
  World& world_;
  double stall_timeout_s_;
  int me_ = 0;
  int tag_ub_ = 32767;
  int64_t local_ops_ = 0, local_left_ = 0;
  std::unique_ptr<schedule::RunDriver> driver_;
  std::vector<OpSample> times_;
  std::vector<double> posted_at_;  // per op: when its run was posted (this rank's ops)
  int iteration_ = 0;
  std::vector<std::unique_ptr<InFlight>> in_flight_;
  std::unique_ptr<CollectiveOrder> order_;  // one call order per group (communicator)
  std::map<schedule::OpId, ExchangePlan> exchanges_;
  // Workers, per stream with compute ops (index into plan.streams).
  std::map<size_t, std::unique_ptr<Worker>> workers_;
  std::mutex done_mutex_;
  std::condition_variable done_cv_;
  std::vector<OpSample> done_;
  std::exception_ptr failure_;
  schedule::OpId failed_op_ = -1;
  schedule::OpId fault_op_ = -1;
  Fault fault_ = Fault::fail;
};

}  // namespace rm::runtime
