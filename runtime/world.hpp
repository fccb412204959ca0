// The MPI world of a runtime launch: one process per Schedule rank, started by
// mpirun or srun (any MPI launcher). MPI calls stay on the thread that created
// the World (MPI_THREAD_FUNNELED): compute workers never touch MPI. Each
// Schedule group gets its own communicator, in the group's member order, so a
// collective call runs on exactly its members.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "runtime/clock_sync.hpp"
#include "sim/schedule/schedule.hpp"

namespace rm::runtime {

class World {
 public:
  World(int* argc, char*** argv);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Processes on this machine (shared memory), to share its cores and memory.
  int local_size() const { return local_size_; }

  // Collective over the world: a communicator per group this rank belongs to.
  void make_group_comms(const schedule::Schedule& s);
  MPI_Comm group_comm(int group) const { return comms_.at(size_t(group)); }

  void barrier() const;
  // True on every rank when `mine` is true on every rank (collective).
  bool all(bool mine) const;
  // Rank 0 gets every rank's bytes in rank order; others get an empty vector (collective).
  std::vector<std::string> gather(const std::string& mine) const;
  // Every rank gets rank 0's text (collective).
  std::string broadcast(const std::string& from_root) const;
  [[noreturn]] void abort(int code) const;
  // Collective: rank 0 ping-pongs each peer `rounds` times, one peer at a time;
  // rank 0 gets every rank's offset to its clock (its own: zero), the others nothing.
  std::vector<ClockOffset> clock_offsets(int rounds) const;

  static MPI_Datatype datatype(schedule::DType t);
  // Sum for a dtype: MPI_SUM, or the bf16 sum (fp32 arithmetic, rounded to nearest even).
  MPI_Op sum(schedule::DType t) const;

 private:
  int rank_ = 0, size_ = 1, local_size_ = 1;
  std::vector<MPI_Comm> comms_;
  MPI_Op bf16_sum_ = MPI_OP_NULL;
};

}  // namespace rm::runtime
