#include "tools/cli/mpi_world.hpp"

#include <climits>
#include <cstdlib>

#include <fmt/format.h>

#include "sim/config/json_reader.hpp"

#if RINGMASTER_HAVE_MPI
#include <dlfcn.h>
#include <mpi.h>
#endif

namespace rm::cli {

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return (*end == '\0' && n > 0 && n < INT_MAX) ? static_cast<int>(n) : fallback;
}

}  // namespace

#if RINGMASTER_HAVE_MPI
// libmpi is loaded at run time, never linked: libsimgrid exports the MPI API
// too (SMPI), and a linked libmpi would lose every MPI_* symbol to it.
// RTLD_DEEPBIND makes libmpi's own calls bind to itself. A plain run never
// loads libmpi at all.
struct MpiWorld::Api {
  void* lib = nullptr;
  int (*init)(int*, char***) = nullptr;
  int (*finalize)() = nullptr;
  int (*comm_rank)(MPI_Comm, int*) = nullptr;
  int (*comm_size)(MPI_Comm, int*) = nullptr;
  int (*gather)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, int, MPI_Comm) = nullptr;
  int (*gatherv)(const void*, int, MPI_Datatype, void*, const int*, const int*, MPI_Datatype, int, MPI_Comm) = nullptr;
  int (*abort)(MPI_Comm, int) = nullptr;
  MPI_Comm world{};
  MPI_Datatype int_type{}, char_type{};

  template <class F>
  void sym(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(lib, name));
    if (f == nullptr) throw ConfigError(fmt::format("MPI: {} has no symbol {}", RINGMASTER_MPI_LIBRARY, name));
  }
  Api() {
    for (const char* path : {RINGMASTER_MPI_SONAME, RINGMASTER_MPI_LIBRARY})
      if ((lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND)) != nullptr) break;
    if (lib == nullptr)
      throw ConfigError(fmt::format("launched by mpirun, but the MPI library {} does not load: {}",
                                    RINGMASTER_MPI_SONAME, dlerror()));
    sym(init, "MPI_Init");
    sym(finalize, "MPI_Finalize");
    sym(comm_rank, "MPI_Comm_rank");
    sym(comm_size, "MPI_Comm_size");
    sym(gather, "MPI_Gather");
    sym(gatherv, "MPI_Gatherv");
    sym(abort, "MPI_Abort");
#if defined(OPEN_MPI)
    // OpenMPI's predefined handles are addresses of globals of libmpi.
    void* p = nullptr;
    sym(p, "ompi_mpi_comm_world");
    world = static_cast<MPI_Comm>(p);
    sym(p, "ompi_mpi_int");
    int_type = static_cast<MPI_Datatype>(p);
    sym(p, "ompi_mpi_char");
    char_type = static_cast<MPI_Datatype>(p);
#else
    world = MPI_COMM_WORLD;  // MPICH: integer constants
    int_type = MPI_INT;
    char_type = MPI_CHAR;
#endif
  }
};
#else
struct MpiWorld::Api {};
#endif

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
         std::getenv("PMI_RANK") != nullptr;
}

MpiWorld::MpiWorld() {
  if (!launched_by_mpirun()) return;
  local_size_ = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", env_int("MPI_LOCALNRANKS", 1));
#if RINGMASTER_HAVE_MPI
  api_ = std::make_unique<Api>();
  api_->init(nullptr, nullptr);
  active_ = true;
  api_->comm_rank(api_->world, &rank_);
  api_->comm_size(api_->world, &size_);
#else
  if (env_int("OMPI_COMM_WORLD_SIZE", 1) > 1)
    throw ConfigError(
        "launched by mpirun, but this ringmaster was built without MPI (install libopenmpi-dev and rebuild): every "
        "process would run the whole sweep");
#endif
}

MpiWorld::~MpiWorld() { finalize(); }

void MpiWorld::finalize() {
#if RINGMASTER_HAVE_MPI
  if (active_) api_->finalize();
#endif
  active_ = false;
}

std::vector<std::string> MpiWorld::gather(const std::string& mine) const {
  if (!active_ || size_ == 1) return {mine};
#if RINGMASTER_HAVE_MPI
  if (mine.size() > static_cast<size_t>(INT_MAX))
    throw ConfigError(fmt::format("rank {}: {} bytes of rows exceed what one MPI message carries; use more ranks",
                                  rank_, mine.size()));
  const int n = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<size_t>(size_)), displs;
  api_->gather(&n, 1, api_->int_type, counts.data(), 1, api_->int_type, 0, api_->world);
  std::string all;
  if (rank_ == 0) {
    long long total = 0;
    for (int c : counts) {
      displs.push_back(static_cast<int>(total));
      total += c;
      if (total > INT_MAX) throw ConfigError("the gathered rows exceed what one MPI message carries; split the sweep");
    }
    all.resize(static_cast<size_t>(total));
  }
  api_->gatherv(mine.data(), n, api_->char_type, all.data(), counts.data(), displs.data(), api_->char_type, 0,
                api_->world);
  std::vector<std::string> out;
  if (rank_ == 0)
    for (int r = 0; r < size_; ++r) out.push_back(all.substr(displs[r], counts[r]));
  return out;
#else
  return {mine};
#endif
}

void MpiWorld::abort(int code) const {
#if RINGMASTER_HAVE_MPI
  if (active_) api_->abort(api_->world, code);
#endif
  std::exit(code);
}

}  // namespace rm::cli
