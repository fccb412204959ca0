#include "runtime/world.hpp"

#include <stdexcept>

#include "kernels/bf16.hpp"

namespace rm::runtime {

namespace {
void bf16_add(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const kernels::bf16_bits*>(in);
  auto* b = static_cast<kernels::bf16_bits*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = kernels::to_bf16(kernels::from_bf16(a[i]) + kernels::from_bf16(b[i]));
}
void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("MPI: ") + what + " failed");
}
}  // namespace

World::World(int* argc, char*** argv) {
  int provided = 0;
  check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
  MPI_Comm_size(local, &local_size_);
  MPI_Comm_free(&local);
  MPI_Op_create(&bf16_add, 1, &bf16_sum_);
}

World::~World() {
  for (MPI_Comm& c : comms_)
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
  if (bf16_sum_ != MPI_OP_NULL) MPI_Op_free(&bf16_sum_);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void World::make_group_comms(const schedule::Schedule& s) {
  MPI_Group world;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  comms_.assign(s.groups.size(), MPI_COMM_NULL);
  for (const auto& g : s.groups) {
    bool member = false;
    for (int r : g.ranks) member |= r == rank_;
    if (!member) continue;
    MPI_Group sub;
    MPI_Group_incl(world, int(g.ranks.size()), g.ranks.data(), &sub);
    // Only the members call it; the tag keeps concurrent creations apart.
    check(MPI_Comm_create_group(MPI_COMM_WORLD, sub, g.id, &comms_[size_t(g.id)]), "MPI_Comm_create_group");
    MPI_Comm_set_errhandler(comms_[size_t(g.id)], MPI_ERRORS_RETURN);
    MPI_Group_free(&sub);
  }
  MPI_Group_free(&world);
}

void World::barrier() const { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

bool World::all(bool mine) const {
  int in = mine ? 1 : 0, out = 0;
  check(MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  return out == 1;
}

std::vector<std::string> World::gather(const std::string& mine) const {
  int n = int(mine.size());
  std::vector<int> sizes(size_t(rank_ == 0 ? size_ : 0)), displs(sizes.size());
  check(MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather");
  std::string all;
  if (rank_ == 0) {
    int total = 0;
    for (size_t i = 0; i < sizes.size(); ++i) displs[i] = total, total += sizes[i];
    all.resize(size_t(total));
  }
  check(MPI_Gatherv(mine.data(), n, MPI_BYTE, all.data(), sizes.data(), displs.data(), MPI_BYTE, 0, MPI_COMM_WORLD),
        "MPI_Gatherv");
  std::vector<std::string> out;
  for (size_t i = 0; i < sizes.size(); ++i) out.push_back(all.substr(size_t(displs[i]), size_t(sizes[i])));
  return out;
}

std::string World::broadcast(const std::string& from_root) const {
  int n = int(from_root.size());
  check(MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
  std::string s = rank_ == 0 ? from_root : std::string(size_t(n), '\0');
  check(MPI_Bcast(s.data(), n, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
  return s;
}

void World::abort(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();
}

std::vector<ClockOffset> World::clock_offsets(int rounds) const {
  constexpr int kTag = 7001;
  std::vector<ClockOffset> out(size_t(rank_ == 0 ? size_ : 0));
  for (int peer = 1; peer < size_; ++peer) {
    if (rank_ == 0) {
      std::vector<PingSample> samples;
      for (int i = 0; i < rounds; ++i) {
        PingSample p;
        double stamps[2] = {0, 0};
        p.t0 = steady_now_s();
        check(MPI_Send(&p.t0, 1, MPI_DOUBLE, peer, kTag, MPI_COMM_WORLD), "MPI_Send");
        check(MPI_Recv(stamps, 2, MPI_DOUBLE, peer, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
        p.t3 = steady_now_s();
        p.t1 = stamps[0], p.t2 = stamps[1];
        samples.push_back(p);
      }
      out[size_t(peer)] = estimate_offset(samples);
    } else if (rank_ == peer) {
      for (int i = 0; i < rounds; ++i) {
        double t0 = 0, stamps[2];
        check(MPI_Recv(&t0, 1, MPI_DOUBLE, 0, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
        stamps[0] = steady_now_s();
        stamps[1] = steady_now_s();
        check(MPI_Send(stamps, 2, MPI_DOUBLE, 0, kTag, MPI_COMM_WORLD), "MPI_Send");
      }
    }
  }
  return out;
}

MPI_Datatype World::datatype(schedule::DType t) {
  switch (t) {
    case schedule::DType::bf16: return MPI_UINT16_T;
    case schedule::DType::fp32: return MPI_FLOAT;
    case schedule::DType::int32: return MPI_INT32_T;
  }
  return MPI_BYTE;
}

MPI_Op World::sum(schedule::DType t) const { return t == schedule::DType::bf16 ? bf16_sum_ : MPI_SUM; }

}  // namespace rm::runtime
