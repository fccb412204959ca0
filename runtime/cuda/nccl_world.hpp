// The NCCL communicators of one rank (multi-process cuda backend), built once
// before anything runs, collectively over the MPI world: one per Schedule group
// the rank belongs to (collectives, member order = NCCL rank order; the unique
// id travels over the group's MPI communicator from its first member), and one
// per p2p channel (runtime/p2p_channels.hpp), spanning the world, NCCL rank =
// world rank (the id comes from world rank 0). Communicators are created in id
// order on every rank, so the blocking initialisations cannot wait in a cycle.
#pragma once

#include <nccl.h>

#include <string>
#include <vector>

#include "runtime/p2p_channels.hpp"
#include "runtime/world.hpp"
#include "sim/schedule/schedule.hpp"

namespace rm::runtime {

// Throws CudaError naming `what` and NCCL's reason.
void nccl_check(ncclResult_t r, const std::string& what);

class NcclWorld {
 public:
  // world.make_group_comms(s) must have run. Throws CudaError.
  NcclWorld(const schedule::Schedule& s, const P2pChannels& channels, const World& world);
  ~NcclWorld();
  NcclWorld(const NcclWorld&) = delete;
  NcclWorld& operator=(const NcclWorld&) = delete;

  ncclComm_t group(int g) const { return groups_.at(size_t(g)); }
  ncclComm_t channel(int c) const { return channels_.at(size_t(c)); }
  // Throws CudaError when a communicator reports an asynchronous error (a peer
  // that failed, a transport error): polled while waiting for the device.
  void check_async() const;

 private:
  std::vector<ncclComm_t> groups_, channels_;  // nullptr where this rank is not a member
};

ncclDataType_t nccl_type(schedule::DType t);

}  // namespace rm::runtime
