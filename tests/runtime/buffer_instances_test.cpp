#include "runtime/buffer_instances.hpp"

#include <gtest/gtest.h>

#include "sim/schedule/builder.hpp"

namespace rm::runtime {
namespace {

using schedule::Instances;

// A buffer of each kind used by ops of two layers, forward then backward.
schedule::Schedule two_layers() {
  schedule::Schedule s;
  s.ranks.push_back({0, 0, {{0, schedule::StreamKind::compute, "compute"}}});
  const Instances kinds[] = {Instances::one, Instances::per_layer, Instances::per_pass};
  for (int i = 0; i < 3; ++i) s.buffers.push_back({i, 0, std::string(1, char('a' + i)), schedule::BufferRole::activation,
                                                   schedule::DType::bf16, {4}, kinds[i]});
  s.accesses.push_back({{0, 1}, {2}});
  s.accesses.push_back({{1}, {}});  // layer -1 reads a per_layer buffer: every copy
  const std::pair<int, schedule::Phase> passes[] = {{0, schedule::Phase::forward},  {0, schedule::Phase::forward},
                                                    {1, schedule::Phase::forward},  {1, schedule::Phase::backward},
                                                    {0, schedule::Phase::backward}, {-1, schedule::Phase::optimizer}};
  for (const auto& [layer, phase] : passes) {
    schedule::Op op;
    op.id = int64_t(s.ops.size());
    op.kind = schedule::OpKind::elementwise;
    op.layer = layer;
    op.phase = phase;
    s.set_desc(op, {0.0, 0, 0, 0, layer < 0 ? 1 : 0, -1});
    s.ops.push_back(op);
  }
  return s;
}

TEST(BufferInstances, CopiesFollowTheBufferKind) {
  const auto s = two_layers();
  EXPECT_EQ(layer_count(s), 2);
  EXPECT_EQ(copies_of(s.buffers[0], 2), 1);
  EXPECT_EQ(copies_of(s.buffers[1], 2), 2);
  EXPECT_EQ(copies_of(s.buffers[2], 2), 2);
  const BufferInstances in(s);
  for (int op = 0; op < 5; ++op) EXPECT_EQ(in.copy(op, 0), 0) << op;
  // per_layer: the op's layer; outside the layers: every copy.
  EXPECT_EQ(in.copy(0, 1), 0);
  EXPECT_EQ(in.copy(2, 1), 1);
  EXPECT_EQ(in.copy(4, 1), 0);
  EXPECT_EQ(in.copy(5, 1), -1);
  // per_pass: passes (0,fwd) (1,fwd) (1,bwd) (0,bwd) alternate 0 1 0 1; the two ops of a pass share.
  EXPECT_EQ(in.copy(0, 2), 0);
  EXPECT_EQ(in.copy(1, 2), 0);
  EXPECT_EQ(in.copy(2, 2), 1);
  EXPECT_EQ(in.copy(3, 2), 0);
  EXPECT_EQ(in.copy(4, 2), 1);
}

TEST(BufferInstances, RefusesAnOpThatDoesNotAccessTheBuffer) {
  const BufferInstances in(two_layers());
  EXPECT_THROW(in.copy(5, 2), std::out_of_range);
  EXPECT_THROW(in.copy(99, 0), std::out_of_range);
}

}  // namespace
}  // namespace rm::runtime
