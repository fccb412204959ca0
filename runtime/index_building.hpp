// The Schedule's index_build ops on the host store (the cpu backend; the cuda
// backend's round trip): MTraining's online
// sparse-index building (sim/generate/index_building.cpp emits it; the
// arithmetic is index_algorithm.hpp), with its data in the declared buffers
// and moved by the Schedule's own broadcasts, all-gathers and gathers. Each
// op's stage is read off the buffers it writes (docs/runtime.md, "Index
// building"), on (batch element, head) rows; the conversion op turns the
// broadcast picks into a kernels::SparseIndex per batch element and (index
// buffer, copy), from which the attention ops that read it get their tile
// plans. index_reference.hpp runs the same stages for every rank in one
// process, for --check.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/tile.hpp"
#include "runtime/buffer_instances.hpp"
#include "runtime/index_algorithm.hpp"
#include "runtime/layouts.hpp"
#include "runtime/tensor_store.hpp"
#include "sim/config/experiment.hpp"
#include "sim/schedule/comm_matching.hpp"
#include "sim/schedule/schedule.hpp"

namespace rm::runtime {

enum class IndexStage : uint8_t { scores, row_max, exp_sum, columns, select_v, diagonals, select_s, convert, passthrough };

// What every rank's index building needs to know of the Schedule, worked out once.
struct IndexPlan {
  struct Pass {  // one rank's index building for one (layer, phase)
    int head_begin = 0, heads = 0;   // global query heads
    std::vector<int32_t> kpos;       // its keys' global positions (contiguous)
    int q_in = -1, kv_in = -1;       // buffers the scores read (q_in: -1 when only the broadcast last queries)
  };
  std::map<schedule::OpId, IndexStage> stage;          // every index_build op of every rank
  std::map<schedule::OpId, int> pass_of;               // index_build op -> index into passes
  std::vector<Pass> passes;
  std::map<int, std::vector<int32_t>> kpos_of_buffer;  // qk, vertical, slash (and the root's copies of them) -> keys
  index_alg::Selection selection;                      // v_budget / s_budget per layer: budgets[layer]
  std::map<int, std::pair<std::vector<int64_t>, std::vector<int64_t>>> budgets;  // layer -> (vertical, slash) per head
};

// Throws ScheduleError naming the op for index building the runtime cannot
// run: keys that are not one contiguous run (parallel.shuffle = once, or a
// zigzag / stripe ring without the per-call shuffle), an op whose buffers
// match no stage.
IndexPlan plan_index_building(const schedule::Schedule& s, const Experiment& e, const Layouts& l,
                              const schedule::CommMatching& m);

bool writes_last_queries(const schedule::Schedule& s, const schedule::Op& op);

class IndexBuilding {
 public:
  IndexBuilding(const schedule::Schedule& s, const Experiment& e, const Layouts& l, const schedule::CommMatching& m,
                const BufferInstances& in, TensorStore& store);
  bool any() const { return !plan_.stage.empty(); }
  // Executes index_build op `op` of this rank.
  void run(schedule::OpId op);
  // The root's payload of the broadcast of the last queries (writes_last_queries):
  // [batch][head][64][head_dim] bf16 rows of positions S-64 .. S-1 (the generator
  // declares [batch][64][head][head_dim]: the same bytes, in the runtime's order).
  std::vector<std::byte> last_queries(schedule::OpId broadcast);
  // Called by the conversion op with (index buffer, copy, first global head, and per batch
  // element the index of its pass's heads from that one on).
  using Built = std::function<void(int buffer, int copy, int head_begin, const std::vector<kernels::SparseIndex>&)>;
  void on_built(Built f) { built_ = std::move(f); }
  // For --check: the index this rank's forward of `layer` built last, appended to
  // `out` as pack_built() writes it; nothing when none.
  void pack_forward(int layer, std::string& out) const;

 private:
  const schedule::Schedule& s_;
  const Experiment& e_;
  const Layouts& l_;
  const BufferInstances& in_;
  TensorStore& store_;
  IndexPlan plan_;
  Built built_;
  std::map<int, std::pair<int, std::vector<kernels::SparseIndex>>> forward_;  // layer -> (head_begin, per batch)
};

// One rank's built index as --check carries it to rank 0 (index_reference.hpp
// reads it): head_begin, the batch, then per (batch, head) the verticals and slashes.
void pack_built(int head_begin, const std::vector<kernels::SparseIndex>& per_batch, std::string& out);

}  // namespace rm::runtime
