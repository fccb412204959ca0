// Seeded random Schedules that are valid by construction: every rank walks its
// streams in id order, communication is created pairwise / per group in one
// global order, so nothing can deadlock. Layers repeat one structure with
// their own costs, so the file's templates get exercised.
#pragma once

#include <random>

#include "sim/schedule/builder.hpp"

namespace rm::schedule::testing {

inline Schedule random_schedule(unsigned seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  ScheduleBuilder b({{"name", "random"}, {"seed", seed}, {"parallel", {{"cp", 4}}}}, "random");
  const int n_ranks = 2 + pick(5);
  for (int r = 0; r < n_ranks; ++r) {
    b.add_rank(r * 2);
    b.add_stream(r, StreamKind::compute);
    b.add_stream(r, StreamKind::comm_intra);
    if (pick(2)) b.add_stream(r, StreamKind::comm_inter, "inter");
  }
  std::vector<int> all(static_cast<size_t>(n_ranks));
  for (int r = 0; r < n_ranks; ++r) all[static_cast<size_t>(r)] = r;
  const int world = b.add_group(all, "world");
  const int pair = b.add_group({1, 0}, "pair");

  const unsigned structure_seed = static_cast<unsigned>(rng());
  const int layers = 1 + pick(4);
  std::vector<OpId> last(static_cast<size_t>(n_ranks), -1);  // each rank's latest op
  auto dep_on_last = [&](int r) {
    OpId l = last[static_cast<size_t>(r)];
    return l >= 0 ? std::vector<OpId>{l} : std::vector<OpId>{};
  };
  for (Phase phase : {Phase::forward, Phase::backward}) {
    for (int layer = 0; layer < layers; ++layer) {
      std::mt19937 srng(structure_seed + static_cast<unsigned>(phase));  // same structure every layer
      auto spick = [&](int n) { return static_cast<int>(srng() % static_cast<unsigned>(n)); };
      const int n_ops = 3 + spick(12);
      for (int k = 0; k < n_ops; ++k) {
        Where w{phase, layer, spick(3) - 1};
        switch (spick(4)) {
          case 0: {
            int r = spick(n_ranks);
            last[static_cast<size_t>(r)] =
                b.compute(r, 0, static_cast<OpKind>(spick(5)), w,
                          {1e9 * (1 + pick(100)), pick(1000), int64_t{128} * pick(8)}, dep_on_last(r));
            break;
          }
          case 1: {
            int from = spick(n_ranks), to = (from + 1 + spick(n_ranks - 1)) % n_ranks;
            auto ids = b.p2p({from, 1, to, 1, int64_t{1024} * (1 + spick(4)), w, spick(2)});
            b.add_deps(ids.send, dep_on_last(from));
            last[static_cast<size_t>(to)] = ids.recv;
            break;
          }
          case 2: {
            // A ring step: every rank sends right and receives from the left in one launch.
            std::vector<P2PIds> ring;
            for (int r = 0; r < n_ranks; ++r) ring.push_back(b.p2p({r, 1, (r + 1) % n_ranks, 1, 4096, w, 7}));
            for (int r = 0; r < n_ranks; ++r) {
              std::vector<OpId> both{ring[static_cast<size_t>(r)].send,
                                     ring[static_cast<size_t>((r + n_ranks - 1) % n_ranks)].recv};
              b.launch_together(both);
            }
            break;
          }
          default: {
            bool on_pair = spick(2) == 0;
            OpKind kind = static_cast<OpKind>(static_cast<int>(OpKind::all_reduce) + spick(5));
            auto ids = b.collective(on_pair ? pair : world, kind, int64_t{1} << (10 + pick(8)), w,
                                    StreamKind::comm_intra, 0, on_pair ? 1 : 0);
            for (OpId id : ids) {
              int r = b.peek().ops[static_cast<size_t>(id)].rank;
              b.add_deps(id, dep_on_last(r));
              last[static_cast<size_t>(r)] = id;
            }
            break;
          }
        }
      }
    }
  }
  return std::move(b).build();
}

}  // namespace rm::schedule::testing
