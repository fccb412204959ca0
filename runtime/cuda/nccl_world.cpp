#include "runtime/cuda/nccl_world.hpp"

#include <algorithm>
#include <cstring>

#include "runtime/cuda/cuda_error.hpp"

namespace rm::runtime {

void nccl_check(ncclResult_t r, const std::string& what) {
  if (r != ncclSuccess && r != ncclInProgress) throw CudaError(what + ": " + ncclGetErrorString(r));
}

namespace {

ncclUniqueId unique_id_from(bool root, MPI_Comm comm, const std::string& what) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (root) nccl_check(ncclGetUniqueId(&id), what + ": ncclGetUniqueId");
  if (MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, comm) != MPI_SUCCESS)
    throw CudaError(what + ": MPI_Bcast of the NCCL unique id failed");
  return id;
}

}  // namespace

NcclWorld::NcclWorld(const schedule::Schedule& s, const P2pChannels& channels, const World& world)
    : groups_(s.groups.size(), nullptr), channels_(channels.streams.size(), nullptr) {
  const int me = world.rank();
  try {
    for (const auto& g : s.groups) {
      const auto at = std::find(g.ranks.begin(), g.ranks.end(), me);
      if (at == g.ranks.end()) continue;
      const std::string what = "rank " + std::to_string(me) + ": NCCL communicator of group '" + g.name + "'";
      const ncclUniqueId id = unique_id_from(at == g.ranks.begin(), world.group_comm(g.id), what);
      nccl_check(ncclCommInitRank(&groups_[size_t(g.id)], int(g.ranks.size()), id, int(at - g.ranks.begin())), what);
    }
    for (size_t c = 0; c < channels.streams.size(); ++c) {
      const std::string what = "rank " + std::to_string(me) + ": NCCL communicator of p2p channel " + std::to_string(c);
      const ncclUniqueId id = unique_id_from(me == 0, MPI_COMM_WORLD, what);
      nccl_check(ncclCommInitRank(&channels_[c], world.size(), id, me), what);
    }
  } catch (...) {
    for (auto* c : groups_) if (c) ncclCommAbort(c);
    for (auto* c : channels_) if (c) ncclCommAbort(c);
    throw;
  }
}

NcclWorld::~NcclWorld() {
  for (auto* c : groups_) if (c) ncclCommDestroy(c);
  for (auto* c : channels_) if (c) ncclCommDestroy(c);
}

void NcclWorld::check_async() const {
  auto one = [](ncclComm_t c, const std::string& what) {
    if (!c) return;
    ncclResult_t r = ncclSuccess;
    nccl_check(ncclCommGetAsyncError(c, &r), what);
    nccl_check(r, what);
  };
  for (size_t g = 0; g < groups_.size(); ++g) one(groups_[g], "NCCL (group " + std::to_string(g) + ")");
  for (size_t c = 0; c < channels_.size(); ++c) one(channels_[c], "NCCL (p2p channel " + std::to_string(c) + ")");
}

ncclDataType_t nccl_type(schedule::DType t) {
  switch (t) {
    case schedule::DType::bf16: return ncclBfloat16;
    case schedule::DType::fp32: return ncclFloat32;
    case schedule::DType::int32: return ncclInt32;
  }
  return ncclUint8;
}

}  // namespace rm::runtime
