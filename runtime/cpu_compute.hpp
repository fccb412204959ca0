// What a compute op does to a rank's tensors on the CPU (docs/runtime.md, "Op
// semantics"): attention tiles through kernels/cpu with a tile plan built once
// per (descriptor, layer) before the timed run, merged into O|LSE or dQ as the
// descriptor says; GEMMs through OpenBLAS at the Schedule's (m, n, k); the
// elementwise ops that accompany the ring (merges, dK|dV additions, whose data
// effect the attention op and the send apply) and, with tp > 1, the dense
// layer's norms and activations as a read pass over their inputs — their memory
// traffic, which is what the model charges for them. With tp = 1 the dense
// layer's ops run numerically instead (dense_layer.hpp), and so do the step's
// embedding, LM head, loss and optimizer (dense_step.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "kernels/plan.hpp"
#include "runtime/buffer_instances.hpp"
#include "runtime/dense_layer.hpp"
#include "runtime/dense_step.hpp"
#include "runtime/index_building.hpp"
#include "runtime/layouts.hpp"
#include "runtime/tensor_store.hpp"
#include "sim/config/experiment.hpp"
#include "sim/sparsity/sparsity_model.hpp"
#include "sim/schedule/schedule.hpp"

namespace rm::runtime {

// The softmax's causality of the experiment's pattern and the index of one layer's
// query heads (global), for attention ops whose index source is `pattern`.
struct AttentionPatterns {
  bool causal = true;
  // Per layer: one SparseIndex over the model's query heads; filled on demand by prepare().
  std::map<int, kernels::SparseIndex> by_layer;
  std::unique_ptr<sparsity::SparsityModel> model;  // built once, on the first layer that needs it
};

class CpuCompute {
 public:
  CpuCompute(const schedule::Schedule& s, const Experiment& e, const BufferInstances& in, TensorStore& store);
  // Builds the tile plan of every attention op of the store's rank. Throws
  // ScheduleError naming the op for what the kernels cannot run.
  void prepare();
  // Executes compute op `op` (of this rank). Ops on different streams may run at
  // once: the Schedule orders every access to a buffer.
  void run(schedule::OpId op);
  // The dense layer's norms, GEMMs and SwiGLU run numerically through `d` (tp = 1).
  void use_dense(const DenseLayer* d) { dense_ = d; }
  // The step scope's embedding, final norm, LM head, loss and AdamW run numerically through `x` (tp = 1).
  void use_step(DenseStep* x) { step_ = x; }
  // index_build ops run through `x`, and attention ops whose index is built get
  // their tile plans when it is (before prepare()).
  void use_index(IndexBuilding* x);
  IndexBuilding* index() const { return index_; }
  // Called with each attention op whose plans a conversion op has just rebuilt (the
  // cuda backend uploads them then).
  void on_replanned(std::function<void(schedule::OpId)> f) { replanned_ = std::move(f); }
  // The tile plan of attention op `op` for batch element `b` (after prepare; one
  // plan for every b unless the index is built, per batch element); the cuda
  // backend uploads it.
  const kernels::TilePlan& plan_of(const schedule::Op& op, int64_t b = 0) const;

 private:
  void attention(const schedule::Op& op, bool backward);
  void gemm(const schedule::Op& op);
  void read_pass(const schedule::Op& op);
  kernels::TilePlan make_tile_plan(const schedule::Op& op, const kernels::SparseIndex& index) const;
  std::span<std::byte> buffer(const schedule::Op& op, int b) { return store_.bytes(b, in_.copy(op.id, b)); }

  const schedule::Schedule& s_;
  const Experiment& e_;
  const BufferInstances& in_;
  TensorStore& store_;
  AttentionPatterns patterns_;
  std::map<std::pair<int, int>, kernels::TilePlan> plans_;  // (detail, layer or -1) -> plan
  const DenseLayer* dense_ = nullptr;
  DenseStep* step_ = nullptr;
  IndexBuilding* index_ = nullptr;
  std::function<void(schedule::OpId)> replanned_;
  // Attention ops with a built index: their plans per batch element, made when
  // the conversion op builds the index (the map and the vectors are sized in
  // prepare(), so they never change shape while workers read them), and which
  // ops each (index buffer, copy) feeds.
  std::map<schedule::OpId, std::vector<kernels::TilePlan>> built_plans_;
  std::map<std::pair<int, int>, std::vector<schedule::OpId>> fed_by_;
};

}  // namespace rm::runtime
