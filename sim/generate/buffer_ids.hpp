// The buffer ids the generator pieces name per rank (the attention's tensors,
// the dense layer's activations, the ring's slots, the parameters), and the
// memo that keeps them: a piece declares a rank's buffers on first use
// (StepContext::buffer, by name) and every later layer, pass and op reuses the
// ids, so building one more op costs no name formatting or map look-up.
// Declaration order, hence every buffer id, is what it would be without the memo.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "sim/schedule/schedule.hpp"

namespace rm::generate {

// The attention's own buffers on a rank, in the ring's token layout (the
// context rank's S/cp tokens, the head rank's heads): Q, K|V, O, LSE (kept per
// layer for the backward), dO, dQ and the rank's finished dK|dV (fp32, as
// they travel, in parallel.grad_comm_dtype) and, for dynamic patterns, the
// index the pass built (`index`: the slash block mask of every ring step,
// `index.bars`: each query block's verticals). A recomputation (and the backward after it) uses Q|K|V, O|LSE
// of its own ("q.re", "kv.bwd", ...), so that it never overwrites what the
// forward's ring may still be sending.
struct AttentionTensors {
  int q = -1, kv = -1, o = -1, lse = -1, d_o = -1, dq = -1, dkv = -1;
  int index = -1, index_bars = -1;
};

// The dense part's buffers on a rank (local tokens x features, bf16). Kept per
// layer: the activations the backward reads, the weights and their gradients.
// dx, the gradient of the residual stream, runs from layer to layer.
// With tensor parallelism (tp > 1) the residual stream and the norms' tensors hold
// the rank's sequence-parallel share of the tokens; the GEMMs read what the tensor
// group's all-gathers bring (`*_full`, all local tokens) and write partial sums that
// its reduce-scatters reduce (`*_part`). With tp = 1 those are the tensors themselves.
struct LayerBuffers {
  int xn1 = -1, h = -1, hn = -1, gu = -1, act = -1, weights = -1;
  int dx = -1, dact = -1, dgu = -1, dhn = -1, dh = -1, dxn1 = -1, wgrad = -1;
  int xn1_full = -1, hn_full = -1, h_part = -1, out_part = -1;   // forward (the backward gathers xn1, hn again)
  int dx_full = -1, dh_full = -1, dhn_part = -1, dxn1_part = -1;  // backward
};

// Per-rank buffers of the ring: K|V receive slots (inner: two, double
// buffering; outer: three, see ring_emitter.cpp), and backward's dK|dV — each step's
// partial, the sums arriving with a block, and each round's share handed to
// the outer ring.
struct RingBuffers {
  AttentionTensors t;
  int kv_inner[2] = {-1, -1}, kv_outer[3] = {-1, -1, -1};
  int dkv_inner[2] = {-1, -1}, dkv_outer[2] = {-1, -1};
  std::vector<int> dkv_part;   // per step (the compute stream may run ahead of the dK|dV transfers)
  std::vector<int> dkv_round;  // per outer round
};

// The parameters of a decoder layer (every layer's instance of one buffer) or
// of the embedding, LM head and final norm on a rank, whole and as this rank's
// ZeRO shard, and their gradients.
struct ParamBuffers {
  int weights = -1, shard = -1, grad = -1, grad_shard = -1;
};

// One rank's buffers of the online index building (index_building.cpp): the
// last queries, their scores, row statistics, column and diagonal sums, the
// top-k picks and, at the root, what each context rank's gather brought.
struct IndexBuffers {
  AttentionTensors t;
  int q_in = -1, kv_in = -1;  // what the scores read (attention.hpp: index_inputs)
  int last_q = -1, qk = -1, max = -1, max_all = -1, sum = -1, sum_all = -1, vert = -1, slash = -1;
  int v_top = -1, s_top = -1, v = -1, s = -1;
  std::vector<int> vert_from, slash_from;  // root: per context rank, what its gather brought
};

struct BufferMemo {
  explicit BufferMemo(int ranks = 0)
      : layer(size_t(ranks)), layer_input(size_t(ranks)), attention(size_t(ranks)), ring(size_t(ranks)),
        params(size_t(ranks)) {}
  std::vector<std::optional<LayerBuffers>> layer;                                         // per rank
  std::vector<std::vector<int>> layer_input;                                              // per rank, per layer
  std::vector<std::array<std::optional<AttentionTensors>, schedule::kPhaseCount>> attention;  // per rank, phase
  std::vector<std::array<std::optional<RingBuffers>, 2 * schedule::kPhaseCount>> ring;  // per rank, (phase, backward)
  std::vector<std::array<std::optional<ParamBuffers>, 2>> params;  // per rank: [0] embedding, [1] layers
  std::vector<int> stage;  // [home buffer * kStages + stage]: the exchange stage buffers; -1 = not yet
  static constexpr int kStages = 3;
  // The ring's view of each context rank's tokens: token-set id, first and last token, count.
  struct Tokens {
    int set = -1;
    int64_t lo = 0, hi = 0, size = 0;
  };
  std::vector<Tokens> tokens;  // per context rank, filled on first use
  std::map<std::pair<int, int>, std::vector<IndexBuffers>> index;  // (context group, phase) -> per context rank
};

}  // namespace rm::generate
