// Which copy of a buffer each op uses. A Schedule buffer may be kept once, once
// per decoder layer, or twice alternating between passes (docs/schedule-format.md,
// `instances`); the runtime allocates every copy and resolves, once before it
// runs, which one each (op, buffer) pair means, so executing an op is a lookup.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/schedule/schedule.hpp"

namespace rm::runtime {

// Copies kept of one buffer: 1 (one), the layer count (per_layer), 2 (per_pass).
int copies_of(const schedule::Buffer& b, int layers);

// Decoder layers of a Schedule: one more than the largest op layer (0 when no op has one).
int layer_count(const schedule::Schedule& s);

// The copy each op uses of each buffer it reads or writes.
class BufferInstances {
 public:
  explicit BufferInstances(const schedule::Schedule& s);

  int layers() const { return layers_; }
  // Copy of `buffer` that `op` uses; -1 for every copy (a per_layer buffer read by an
  // op outside the layers, e.g. the optimizer). Throws std::out_of_range when the op
  // does not access the buffer.
  int copy(schedule::OpId op, int buffer) const;

 private:
  int layers_ = 0;
  // Per op: CSR over its access's buffers (reads then writes), the copy of each.
  std::vector<int64_t> begin_;
  std::vector<int32_t> buffer_, copy_;
};

}  // namespace rm::runtime
