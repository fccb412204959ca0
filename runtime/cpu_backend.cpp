#include "runtime/cpu_backend.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <string>

#include "kernels/bf16.hpp"
#include "sim/schedule/schedule_error.hpp"

namespace rm::runtime {

using schedule::DType;
using schedule::OpId;
using schedule::OpKind;

// One thread per stream with compute ops: runs them one at a time, in the order
// the driver starts them, and hands each end back to the MPI thread.
struct CpuBackend::Worker {
  explicit Worker(CpuBackend& b) : backend(b), thread([this] { loop(); }) {}
  ~Worker() {
    {
      std::lock_guard lock(mutex);
      stop = true;
    }
    cv.notify_one();
    thread.join();
  }
  void push(OpId op) {
    {
      std::lock_guard lock(mutex);
      queue.push_back(op);
    }
    cv.notify_one();
  }
  void loop() {
    for (;;) {
      OpId op;
      {
        std::unique_lock lock(mutex);
        cv.wait(lock, [&] { return stop || !queue.empty(); });
        if (stop) return;
        op = queue.front();
        queue.pop_front();
      }
      const double t0 = steady_now_s();
      std::exception_ptr error;
      try {
        if (op != backend.fault_op_) {
          backend.compute_.run(op);
        } else if (backend.fault_ == Fault::hang) {
          for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
        } else if (backend.fault_ == Fault::fail) {
          throw std::runtime_error("injected fault (--inject-fault)");
        }
      } catch (...) {
        error = std::current_exception();
      }
      const double t1 = steady_now_s();
      {
        std::lock_guard lock(backend.done_mutex_);
        backend.done_.push_back({op, 0, t0, t1});
        if (error && !backend.failure_) backend.failure_ = error, backend.failed_op_ = op;
      }
      backend.done_cv_.notify_one();
    }
  }
  CpuBackend& backend;
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<OpId> queue;
  bool stop = false;
  std::thread thread;  // last: starts once the rest is built
};

CpuBackend::CpuBackend(const schedule::Schedule& s, const schedule::RunPlan& plan, const Layouts& layouts,
                       const BufferInstances& in, TensorStore& store, CpuCompute& compute, World& world,
                       double stall_timeout_s)
    : s_(s), plan_(plan), layouts_(layouts), in_(in), store_(store), compute_(compute), world_(world),
      stall_timeout_s_(stall_timeout_s), me_(store.rank()) {
  void* ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found);
  if (found && ub) tag_ub_ = *static_cast<int*>(ub);
  for (const auto& op : s_.ops) {
    if (op.rank != me_) continue;
    ++local_ops_;
    if (schedule::is_compute(op.kind)) {
      const size_t k = size_t(plan_.stream_of[size_t(op.id)]);
      if (!workers_.count(k)) workers_.emplace(k, std::make_unique<Worker>(*this));
    }
    if (op.kind == OpKind::all_to_all) exchanges_.emplace(op.id, exchange_plan(s_, plan_.match, layouts_, op.id));
  }
  order_ = std::make_unique<CollectiveOrder>(s_, plan_.match, [this](OpId op) { return local(op); });
}

CpuBackend::~CpuBackend() {
  workers_.clear();
  for (auto& f : in_flight_)
    if (f->request != MPI_REQUEST_NULL) {
      MPI_Cancel(&f->request);
      MPI_Request_free(&f->request);
    }
}

std::vector<OpSample> CpuBackend::run_once(int iteration) {
  iteration_ = iteration;
  posted_at_.assign(s_.ops.size(), 0.0);
  times_.clear();
  times_.reserve(size_t(local_ops_));
  local_left_ = local_ops_;
  order_->reset();
  driver_ = std::make_unique<schedule::RunDriver>(plan_, *this);
  driver_->start();
  double last = steady_now_s();
  while (local_left_ > 0) {
    bool progress = drain_workers();
    progress = poll_mpi() || progress;
    const double now = steady_now_s();
    if (progress) {
      last = now;
      continue;
    }
    if (now - last > stall_timeout_s_)
      throw StallError("no progress for " + std::to_string(int(stall_timeout_s_)) +
                       " s; " + waiting());
    std::unique_lock lock(done_mutex_);
    done_cv_.wait_for(lock, std::chrono::microseconds(in_flight_.empty() ? 2000 : 20),
                      [&] { return !done_.empty(); });
  }
  driver_.reset();
  return times_;
}

std::string CpuBackend::waiting() const {
  std::string out;
  for (size_t k = 0; k < plan_.streams.size(); ++k) {
    const auto ops = plan_.streams[k];
    if (ops.empty() || s_.ops[size_t(ops[0])].rank != me_) continue;
    const size_t h = driver_->head(k);
    if (h >= ops.size()) continue;
    const OpId op = ops[h];
    if (!out.empty()) out += "; ";
    out += schedule::describe(s_, op) + (driver_->posted(op) ? " is posted and waits" : " waits for its dependencies");
    if (schedule::is_p2p(s_.ops[size_t(op)].kind)) out += " (peer rank " + std::to_string(s_.ops[size_t(op)].peer) + ")";
  }
  return out.empty() ? "nothing left to wait for" : out;
}

void CpuBackend::finish_local(OpId op, double start_s, double end_s) {
  times_.push_back({op, iteration_, start_s, end_s});
  --local_left_;
  driver_->complete(op);
}

bool CpuBackend::drain_workers() {
  std::vector<OpSample> done;
  {
    std::lock_guard lock(done_mutex_);
    if (failure_) {
      const OpId op = failed_op_;
      try {
        std::rethrow_exception(failure_);
      } catch (const std::exception& e) {
        throw std::runtime_error(schedule::describe(s_, op) + " failed: " + e.what());
      }
    }
    done.swap(done_);
  }
  for (const OpSample& t : done) finish_local(t.op, t.start_s, t.end_s);
  return !done.empty();
}

bool CpuBackend::poll_mpi() {
  bool progress = false;
  for (size_t i = 0; i < in_flight_.size();) {
    int flag = 0;
    if (MPI_Test(&in_flight_[i]->request, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      throw std::runtime_error(schedule::describe(s_, in_flight_[i]->op) +
                               ": the MPI transfer failed");
    if (!flag) {
      ++i;
      continue;
    }
    std::unique_ptr<InFlight> f = std::move(in_flight_[i]);
    in_flight_.erase(in_flight_.begin() + std::ptrdiff_t(i));
    finish(*f);
    progress = true;
  }
  return progress;
}

void CpuBackend::finish(InFlight& f) {
  const double end = steady_now_s();
  if (f.unpack && !(f.op == fault_op_ && fault_ == Fault::skip)) {  // skip: the result is dropped
    const schedule::Op& op = s_.ops[size_t(f.op)];
    if (op.kind == OpKind::all_to_all) {
      const ExchangePlan& p = exchanges_.at(f.op);
      const int64_t D = p.row_elements;
      size_t at = 0;
      for (size_t j = 0; j < p.recv_rows.size(); ++j)
        for (size_t i = 0; i < p.pairs.size(); ++i) {
          auto dst = buffer(f.op, p.pairs[i].write);
          const int64_t row_bytes = D * schedule::dtype_bytes(s_.buffers[size_t(p.pairs[i].write)].dtype);
          for (int64_t r : p.recv_rows[j][i]) {
            std::memcpy(dst.data() + r * row_bytes, f.recv.data() + at, size_t(row_bytes));
            at += size_t(row_bytes);
          }
        }
    } else {
      scatter_writes(f.op, f.recv);
    }
  }
  for (OpId v : f.also) driver_->complete(v);
  finish_local(f.op, f.start_s, end);
}

void CpuBackend::post(OpId op) {
  if (local(op)) posted_at_[size_t(op)] = steady_now_s();
}

void CpuBackend::start_compute(OpId op) {
  if (!local(op)) {
    driver_->complete(op);
    return;
  }
  workers_.at(size_t(plan_.stream_of[size_t(op)]))->push(op);
}

std::vector<std::byte> CpuBackend::concat_reads(OpId op, int64_t bytes) {
  std::vector<std::byte> out(static_cast<size_t>(bytes));
  size_t at = 0;
  for (int b : s_.access_of(s_.ops[size_t(op)])->reads) {
    auto src = buffer(op, b);
    const size_t n = std::min(src.size(), out.size() - at);
    std::memcpy(out.data() + at, src.data(), n);
    at += n;
    if (at == out.size()) break;
  }
  return out;
}

void CpuBackend::scatter_writes(OpId op, const std::vector<std::byte>& data) {
  size_t at = 0;
  for (int b : s_.access_of(s_.ops[size_t(op)])->writes) {
    auto dst = buffer(op, b);
    const size_t n = std::min(dst.size(), data.size() - at);
    std::memcpy(dst.data(), data.data() + at, n);
    at += n;
    if (at == data.size()) break;
  }
}

void CpuBackend::start_p2p(OpId op, OpId partner) {
  const OpId mine = local(op) ? op : local(partner) ? partner : -1;
  if (mine < 0) {
    driver_->complete(op);
    driver_->complete(partner);
    return;
  }
  const OpId other = mine == op ? partner : op;
  const schedule::Op& o = s_.ops[size_t(mine)];
  auto f = std::make_unique<InFlight>();
  f->op = mine;
  f->also = {other};
  f->start_s = posted_at_[size_t(mine)];
  const schedule::Access& acc = *s_.access_of(o);
  const int64_t o_bytes = s_.desc(o).bytes;
  int rc = MPI_SUCCESS;
  if (o.kind == OpKind::send) {
    const int tag = int(o.id % tag_ub_);
    if (acc.reads.size() == 1) {
      auto src = buffer(mine, acc.reads[0]);
      rc = MPI_Isend(src.data(), int(o_bytes), MPI_BYTE, o.peer, tag, MPI_COMM_WORLD, &f->request);
    } else {
      // The element-wise sum of the reads (dK|dV: this step's partial plus the sum that came with the block).
      const DType t = s_.buffers[size_t(acc.reads[0])].dtype;
      const int64_t n = o_bytes / schedule::dtype_bytes(t);
      std::vector<float> sum(static_cast<size_t>(n), 0.f);
      for (int b : acc.reads) {
        auto src = buffer(mine, b);
        if (t == DType::fp32)
          for (int64_t i = 0; i < n; ++i) sum[size_t(i)] += reinterpret_cast<const float*>(src.data())[i];
        else
          for (int64_t i = 0; i < n; ++i)
            sum[size_t(i)] += kernels::from_bf16(reinterpret_cast<const kernels::bf16_bits*>(src.data())[i]);
      }
      f->send.resize(size_t(o_bytes));
      if (t == DType::fp32) std::memcpy(f->send.data(), sum.data(), size_t(o_bytes));
      else
        for (int64_t i = 0; i < n; ++i)
          reinterpret_cast<kernels::bf16_bits*>(f->send.data())[i] = kernels::to_bf16(sum[size_t(i)]);
      rc = MPI_Isend(f->send.data(), int(o_bytes), MPI_BYTE, o.peer, tag, MPI_COMM_WORLD, &f->request);
    }
  } else {
    auto dst = buffer(mine, acc.writes.at(0));
    rc = MPI_Irecv(dst.data(), int(o_bytes), MPI_BYTE, o.peer, int(other % tag_ub_), MPI_COMM_WORLD, &f->request);
  }
  if (rc != MPI_SUCCESS) throw std::runtime_error(schedule::describe(s_, mine) + ": MPI refused the transfer");
  in_flight_.push_back(std::move(f));
}

void CpuBackend::start_collective(int64_t call) {
  if (order_->local_op(call) < 0) {
    for (OpId id : plan_.match.calls[size_t(call)]) driver_->complete(id);
    return;
  }
  for (int64_t c : order_->ready(call)) issue_collective(c);
}

void CpuBackend::issue_collective(int64_t call) {
  const auto& ops = plan_.match.calls[size_t(call)];
  const OpId mine = order_->local_op(call);
  const schedule::Op& o = s_.ops[size_t(mine)];
  const schedule::Access& acc = *s_.access_of(o);
  const int64_t o_bytes = s_.desc(o).bytes;
  const schedule::Group& g = s_.groups[size_t(o.group)];
  const MPI_Comm comm = world_.group_comm(o.group);
  const int n = int(g.ranks.size());
  auto f = std::make_unique<InFlight>();
  f->op = mine;
  for (OpId id : ops)
    if (id >= 0 && id != mine) f->also.push_back(id);
  f->start_s = posted_at_[size_t(mine)];
  f->unpack = true;
  const DType t = s_.buffers[size_t(!acc.writes.empty() ? acc.writes[0] : acc.reads.at(0))].dtype;
  const int64_t width = schedule::dtype_bytes(t);
  int rc = MPI_SUCCESS;
  switch (o.kind) {
    case OpKind::all_reduce:
      f->recv = concat_reads(mine, o_bytes);
      rc = MPI_Iallreduce(MPI_IN_PLACE, f->recv.data(), int(o_bytes / width), World::datatype(t), world_.sum(t), comm,
                          &f->request);
      break;
    case OpKind::all_gather:
      f->send = concat_reads(mine, o_bytes / n);
      f->recv.resize(size_t(o_bytes));
      rc = MPI_Iallgather(f->send.data(), int(o_bytes / n), MPI_BYTE, f->recv.data(), int(o_bytes / n), MPI_BYTE, comm,
                          &f->request);
      break;
    case OpKind::reduce_scatter:
      f->send = concat_reads(mine, o_bytes);
      f->recv.resize(size_t(o_bytes / n));
      rc = MPI_Ireduce_scatter_block(f->send.data(), f->recv.data(), int(o_bytes / n / width), World::datatype(t),
                                     world_.sum(t), comm, &f->request);
      break;
    case OpKind::broadcast: {
      const int root = int(std::find(g.ranks.begin(), g.ranks.end(), o.peer) - g.ranks.begin());
      if (me_ != o.peer) f->recv.resize(size_t(o_bytes));
      else if (writes_last_queries(s_, o) && compute_.index()) f->recv = compute_.index()->last_queries(mine);
      else f->recv = concat_reads(mine, o_bytes);
      rc = MPI_Ibcast(f->recv.data(), int(o_bytes), MPI_BYTE, root, comm, &f->request);
      break;
    }
    case OpKind::all_to_all: {
      const ExchangePlan& p = exchanges_.at(mine);
      const int64_t D = p.row_elements;
      const auto un = static_cast<size_t>(n);
      std::vector<int> send_counts(un), recv_counts(un), send_displs(un), recv_displs(un);
      int64_t send_total = 0, recv_total = 0;
      for (int j = 0; j < n; ++j) {
        int64_t sb = 0, rb = 0;
        for (size_t i = 0; i < p.pairs.size(); ++i) {
          const int64_t row = D * schedule::dtype_bytes(s_.buffers[size_t(p.pairs[i].write)].dtype);
          sb += int64_t(p.send_rows[size_t(j)][i].size()) * row;
          rb += int64_t(p.recv_rows[size_t(j)][i].size()) * row;
        }
        send_counts[size_t(j)] = int(sb), recv_counts[size_t(j)] = int(rb);
        send_displs[size_t(j)] = int(send_total), recv_displs[size_t(j)] = int(recv_total);
        send_total += sb, recv_total += rb;
      }
      f->send.resize(size_t(send_total));
      f->recv.resize(size_t(recv_total));
      size_t at = 0;
      for (int j = 0; j < n; ++j)
        for (size_t i = 0; i < p.pairs.size(); ++i) {
          const DType rt = s_.buffers[size_t(p.pairs[i].read)].dtype, wt = s_.buffers[size_t(p.pairs[i].write)].dtype;
          auto src = buffer(mine, p.pairs[i].read);
          const int64_t rrow = D * schedule::dtype_bytes(rt), wrow = D * schedule::dtype_bytes(wt);
          for (int64_t r : p.send_rows[size_t(j)][i]) {
            const std::byte* from = src.data() + r * rrow;
            std::byte* to = f->send.data() + at;
            if (rt == wt) std::memcpy(to, from, size_t(wrow));
            else if (rt == DType::fp32 && wt == DType::bf16)
              for (int64_t e = 0; e < D; ++e)
                reinterpret_cast<kernels::bf16_bits*>(to)[e] = kernels::to_bf16(reinterpret_cast<const float*>(from)[e]);
            else if (rt == DType::bf16 && wt == DType::fp32)
              for (int64_t e = 0; e < D; ++e)
                reinterpret_cast<float*>(to)[e] = kernels::from_bf16(reinterpret_cast<const kernels::bf16_bits*>(from)[e]);
            else
              throw schedule::ScheduleError(schedule::describe(s_, mine) + ": an all-to-all cannot convert between these dtypes");
            at += size_t(wrow);
          }
        }
      rc = MPI_Ialltoallv(f->send.data(), send_counts.data(), send_displs.data(), MPI_BYTE, f->recv.data(),
                          recv_counts.data(), recv_displs.data(), MPI_BYTE, comm, &f->request);
      break;
    }
    default:
      throw schedule::ScheduleError(schedule::describe(s_, mine) + ": not a collective");
  }
  if (rc != MPI_SUCCESS) throw std::runtime_error(schedule::describe(s_, mine) + ": MPI refused the collective");
  in_flight_.push_back(std::move(f));
}

}  // namespace rm::runtime
