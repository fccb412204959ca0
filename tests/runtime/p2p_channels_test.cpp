#include "runtime/p2p_channels.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "sim/schedule/comm_matching.hpp"
#include "sim/schedule/schedule_error.hpp"

namespace rm::runtime {
namespace {

using schedule::OpKind;

// `ranks` ranks of three streams each (compute, a, b); ops are appended by the tests.
schedule::Schedule ranks(int n) {
  schedule::Schedule s;
  for (int r = 0; r < n; ++r)
    s.ranks.push_back({r, r,
                       {{0, schedule::StreamKind::compute, "compute"},
                        {1, schedule::StreamKind::comm_intra, "a"},
                        {2, schedule::StreamKind::comm_intra, "b"}}});
  return s;
}

schedule::OpId p2p(schedule::Schedule& s, OpKind kind, int rank, int stream, int peer, int64_t tag = 0) {
  schedule::Op op;
  op.id = int64_t(s.ops.size());
  op.kind = kind;
  op.rank = rank;
  op.stream = stream;
  op.peer = peer;
  op.tag = tag;
  s.set_desc(op, {0.0, 0, 0, 64});
  s.ops.push_back(op);
  return op.id;
}

std::string error_of(const schedule::Schedule& s) {
  try {
    p2p_channels(s, schedule::match_comms(s));
  } catch (const schedule::ScheduleError& e) {
    return e.what();
  }
  return "";
}

TEST(P2pChannels, ARingOnTwoStreamsTakesOneChannelPerStream) {
  auto s = ranks(4);
  for (int step = 0; step < 3; ++step)
    for (int stream : {1, 2})
      for (int r = 0; r < 4; ++r) {
        p2p(s, OpKind::send, r, stream, (r + 1) % 4, step);
        s.ops.back().joined = false;
        p2p(s, OpKind::recv, r, stream, (r + 3) % 4, step);
        s.ops.back().joined = true;
      }
  const auto m = schedule::match_comms(s);
  const auto c = p2p_channels(s, m);
  ASSERT_EQ(c.streams.size(), 2u);
  EXPECT_EQ(c.streams[0], (std::pair{1, 1}));
  EXPECT_EQ(c.streams[1], (std::pair{2, 2}));
  for (const auto& op : s.ops) {
    ASSERT_GE(m.partner[size_t(op.id)], 0);
    EXPECT_EQ(c.of_op[size_t(op.id)], op.stream - 1) << op.id;
    EXPECT_EQ(c.of_op[size_t(op.id)], c.of_op[size_t(m.partner[size_t(op.id)])]) << op.id;
  }
}

TEST(P2pChannels, NonTransfersHaveNoChannel) {
  auto s = ranks(2);
  p2p(s, OpKind::send, 0, 1, 1);
  p2p(s, OpKind::recv, 1, 1, 0);
  schedule::Op gemm;
  gemm.id = 2;
  gemm.kind = OpKind::gemm;
  s.ops.push_back(gemm);
  const auto c = p2p_channels(s, schedule::match_comms(s));
  EXPECT_EQ(c.of_op, (std::vector<int32_t>{0, 0, -1}));
}

TEST(P2pChannels, RefusesAChannelUsedFromTwoStreamsOfOneRank) {
  // Rank 0 sends on a to rank 1's b and receives on b from rank 1's a: both are channel (a, b) on rank 0,
  // from two streams, and NCCL's order on that communicator could wait in a cycle.
  auto s = ranks(2);
  p2p(s, OpKind::send, 0, 1, 1);
  p2p(s, OpKind::recv, 0, 2, 1);
  p2p(s, OpKind::recv, 1, 2, 0);
  p2p(s, OpKind::send, 1, 1, 0);
  const std::string e = error_of(s);
  EXPECT_NE(e.find("op 1 "), std::string::npos) << e;
  EXPECT_NE(e.find("stream 'a'"), std::string::npos) << e;
}

TEST(P2pChannels, RefusesReceivesOutOfSendOrder) {
  // Tags pair the first send with the second recv; NCCL would pair them first-in-first-out.
  auto s = ranks(2);
  p2p(s, OpKind::send, 0, 1, 1, 7);
  p2p(s, OpKind::send, 0, 1, 1, 8);
  p2p(s, OpKind::recv, 1, 1, 0, 8);
  p2p(s, OpKind::recv, 1, 1, 0, 7);
  const std::string e = error_of(s);
  EXPECT_NE(e.find("op 0 "), std::string::npos) << e;
  EXPECT_NE(e.find("order"), std::string::npos) << e;
}

// Random transfers between random ranks, each pair on one stream id, received in
// send order: always accepted, and each channel is exactly its ops' stream pair.
TEST(P2pChannels, AcceptsEveryInOrderScheduleAndKeysByStream) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 2 + int(rng() % 5);
    auto s = ranks(n);
    const int transfers = 1 + int(rng() % 20);
    for (int t = 0; t < transfers; ++t) {
      const int a = int(rng() % unsigned(n));
      const int b = (a + 1 + int(rng() % unsigned(n - 1))) % n;
      const int stream = 1 + int(rng() % 2);
      const int64_t tag = int64_t(rng() % 3);
      p2p(s, OpKind::send, a, stream, b, tag);
      p2p(s, OpKind::recv, b, stream, a, tag);
    }
    const auto m = schedule::match_comms(s);
    P2pChannels c;
    ASSERT_NO_THROW(c = p2p_channels(s, m)) << trial;
    for (const auto& op : s.ops) {
      const int32_t ch = c.of_op[size_t(op.id)];
      ASSERT_GE(ch, 0);
      EXPECT_EQ(c.streams[size_t(ch)], (std::pair{int(op.stream), int(op.stream)}));
    }
  }
}

}  // namespace
}  // namespace rm::runtime
