// The MPI world of a command that shares its points across processes
// (`mpirun -np N ringmaster sweep ...`). MPI is initialised only when the
// process was launched by mpirun (OpenMPI or PMIx put the world in the
// environment), so a plain run never starts MPI. Everything but the CLI is
// free of MPI: this module is the only one that includes <mpi.h>.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace rm::cli {

class MpiWorld {
 public:
  // Throws ConfigError when launched by mpirun with several ranks but built without MPI.
  MpiWorld();
  ~MpiWorld();
  // MPI_Finalize, when it was initialised and not yet finalised.
  void finalize();
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  bool active() const { return active_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Ranks on this machine (from the launcher), to share its cores: 1 when not under mpirun.
  int local_size() const { return local_size_; }

  // Rank 0 gets every rank's text in rank order; the other ranks get nothing.
  // Collective: every rank must call it.
  std::vector<std::string> gather(const std::string& mine) const;

  // Ends every rank (a failure on one rank would leave the others waiting in gather).
  [[noreturn]] void abort(int code) const;

 private:
  struct Api;  // libmpi, loaded at run time (mpi_world.cpp says why)
  std::unique_ptr<Api> api_;
  bool active_ = false;
  int rank_ = 0, size_ = 1, local_size_ = 1;
};

// True when the environment says this process was started by mpirun.
bool launched_by_mpirun();

}  // namespace rm::cli
