// Which global elements each attention-side buffer holds. The Schedule says
// which tokens and heads an attention op covers; the runtime needs the same
// for the buffers around it — to seed the inputs with the right values, to
// route an all-to-all element by element, and to gather outputs for --check.
// Home buffers (the ring's Q, K|V, O, LSE, dO, dQ, dK|dV) take their layout
// from the attention ops; an exchange buffer takes it from the all-to-all
// that connects it to a home buffer, by one rule (docs/runtime.md):
//   the far side of an all-to-all over n members holds, on member j, the j-th
//   of n equal contiguous chunks of the members' sorted token union, for the
//   union of their heads
// which is the Ulysses head exchange (scatter heads, gather the sequence) and
// MTraining's per-call shuffle (contiguous chunks to the partition's tokens).
// Physical order (what the kernels read): Q-like [batch][heads][tokens][dim],
// K|V-like [2][batch][kv heads][tokens][dim], LSE [batch][heads][tokens].
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sim/schedule/comm_matching.hpp"
#include "sim/schedule/schedule.hpp"

namespace rm::runtime {

struct Layout {
  schedule::BufferRole content = schedule::BufferRole::q;  // q, kv, o, lse, d_o, dq or dkv: what it holds
  std::vector<int32_t> tokens;  // global positions, in local order
  std::vector<int32_t> heads;   // global heads in local order (KV heads for kv and dkv)
  bool kv_like() const { return content == schedule::BufferRole::kv || content == schedule::BufferRole::dkv; }
  // Elements for batch b and head_dim d.
  int64_t elements(int64_t batch, int64_t head_dim) const;
  // Offset of the first element of row (part, b, local head, local token); part is 0 (K) or 1 (V) for K|V.
  int64_t row(int part, int64_t b, int64_t head, int64_t token, int64_t batch) const {
    const int64_t H = int64_t(heads.size()), T = int64_t(tokens.size());
    return ((int64_t(part) * batch + b) * H + head) * T + token;
  }
  bool operator==(const Layout&) const = default;
};

class Layouts {
 public:
  // batch and head_dim from the Schedule's experiment. Throws ScheduleError naming
  // the op when an all-to-all's sides cannot be laid out by the rule, or a layout's
  // element count differs from its buffer's.
  Layouts(const schedule::Schedule& s, const schedule::CommMatching& m, int64_t batch, int64_t head_dim);

  const Layout* of(int buffer) const {
    return size_t(buffer) < layout_.size() && layout_[size_t(buffer)] ? &*layout_[size_t(buffer)] : nullptr;
  }
  int64_t batch() const { return batch_; }
  int64_t head_dim() const { return head_dim_; }

 private:
  int64_t batch_, head_dim_;
  std::vector<std::optional<Layout>> layout_;
};

// The global positions of a token set, in local order.
std::vector<int32_t> positions(const schedule::TokenSet& t);

}  // namespace rm::runtime
