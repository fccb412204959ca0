// A rank's inputs and outputs as global tensors see them. Inputs: every buffer
// with a tokens x heads layout whose first access (op id order) is a read is
// seeded from its layout with seed.hpp's values (Q, K then V, dO), so each rank
// holds exactly its share of one global problem. Outputs: per content (O, LSE,
// dQ, dK|dV) the rank's last-written buffer of that content — after the
// exchanges back to the sequence layout when there are any — read out with
// its layout for --check.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/buffer_instances.hpp"
#include "runtime/layouts.hpp"
#include "runtime/tensor_store.hpp"

namespace rm::runtime {

void seed_inputs(const schedule::Schedule& s, const Layouts& l, TensorStore& store,
                 uint64_t seed);

struct OutputSlice {
  int rank = 0;
  Layout layout;              // content, tokens, heads
  std::vector<float> values;  // in the layout's storage order (layouts.hpp)
};

std::vector<OutputSlice> read_outputs(const schedule::Schedule& s, const Layouts& l, const BufferInstances& in,
                                      TensorStore& store);

// For sending slices to rank 0; unpack throws std::runtime_error on truncated bytes.
std::string pack(const std::vector<OutputSlice>& slices);
std::vector<OutputSlice> unpack_outputs(std::string_view bytes);

}  // namespace rm::runtime
