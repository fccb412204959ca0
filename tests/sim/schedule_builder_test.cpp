#include "sim/schedule/builder.hpp"

#include <algorithm>
#include <map>
#include <span>
#include <random>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "sim/schedule/comm_matching.hpp"
#include "sim/schedule/schedule_error.hpp"
#include "sim/schedule/topo_order.hpp"
#include "tests/support/schedule_random.hpp"

namespace rm::schedule {
namespace {

TEST(ScheduleBuilder, BuildsRanksStreamsAndGroups) {
  ScheduleBuilder b({{"name", "x"}}, "test");
  EXPECT_EQ(b.add_rank(4), 0);
  EXPECT_EQ(b.add_rank(5), 1);
  EXPECT_EQ(b.add_stream(0, StreamKind::compute), 0);
  EXPECT_EQ(b.add_stream(0, StreamKind::comm_inter), 1);
  EXPECT_EQ(b.add_stream(0, StreamKind::comm_inter, "dkv"), 2);
  EXPECT_EQ(b.stream(0, StreamKind::comm_inter), 1);
  EXPECT_THROW(b.stream(1, StreamKind::compute), std::invalid_argument);
  EXPECT_THROW(b.add_stream(0, StreamKind::compute), std::invalid_argument);  // name taken
  EXPECT_THROW(b.add_group({0, 0}), std::invalid_argument);
  EXPECT_THROW(b.add_group({0, 7}), std::invalid_argument);
  EXPECT_EQ(b.add_group({1, 0}, "cp"), 0);
  const Schedule& s = b.peek();
  EXPECT_EQ(s.ranks[1].gpu, 5);
  EXPECT_EQ(s.ranks[0].streams[2].name, "dkv");
  EXPECT_EQ(s.groups[0].ranks, (std::vector<int>{1, 0}));
  EXPECT_EQ(s.experiment["name"], "x");
  EXPECT_EQ(s.generator, "test");
}

// The built op array keeps at most a quarter of slack, whatever the count:
// doubling growth alone would leave up to half of it unused.
TEST(ScheduleBuilder, BuiltOpsKeepLittleUnusedCapacityAndTheirDependencies) {
  for (int n : {1, 2, 3, 5, 17, 1000, 1025, 4097}) {
    ScheduleBuilder b;
    b.add_rank(0);
    b.add_stream(0, StreamKind::compute);
    for (int i = 0; i < n; ++i) {
      DepList deps;
      for (int k = 1; k <= i % 4 && k <= i; ++k) deps.push_back(i - k);
      b.compute(0, 0, OpKind::gemm, {Phase::forward, 0, -1}, {1.0, 0, 1}, deps);
    }
    const Schedule s = std::move(b).build();
    ASSERT_EQ(s.ops.size(), size_t(n));
    EXPECT_LE(s.ops.capacity(), s.ops.size() + s.ops.size() / 4) << n;
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(s.ops[size_t(i)].deps.size(), size_t(std::min(i % 4, i))) << i;
      for (size_t k = 0; k < s.ops[size_t(i)].deps.size(); ++k) EXPECT_EQ(s.ops[size_t(i)].deps[k], i - 1 - OpId(k));
    }
  }
}

TEST(ScheduleBuilder, P2PMakesAMatchedPair) {
  ScheduleBuilder b;
  for (int r = 0; r < 2; ++r) b.add_rank(r), b.add_stream(r, StreamKind::comm_intra);
  auto ids = b.p2p({0, 0, 1, 0, 512, {Phase::backward, 3, 5}, 9});
  Schedule s = std::move(b).build();
  const Op& send = s.ops[static_cast<size_t>(ids.send)];
  const Op& recv = s.ops[static_cast<size_t>(ids.recv)];
  EXPECT_EQ(send.kind, OpKind::send);
  EXPECT_EQ(send.peer, 1);
  EXPECT_EQ(recv.kind, OpKind::recv);
  EXPECT_EQ(recv.rank, 1);
  EXPECT_EQ(recv.peer, 0);
  EXPECT_EQ(s.desc(recv).bytes, 512);
  EXPECT_EQ(send.desc, recv.desc);  // the pair shares its entry
  EXPECT_EQ(recv.tag, 9);
  EXPECT_EQ(recv.phase, Phase::backward);
  EXPECT_EQ(recv.layer, 3);
  EXPECT_EQ(recv.step, 5);
  auto m = match_comms(s);
  EXPECT_EQ(m.partner[static_cast<size_t>(ids.send)], ids.recv);
  EXPECT_EQ(m.partner[static_cast<size_t>(ids.recv)], ids.send);
}

TEST(ScheduleBuilder, CollectiveMakesOneOpPerMember) {
  ScheduleBuilder b;
  for (int r = 0; r < 4; ++r) b.add_rank(r), b.add_stream(r, StreamKind::compute), b.add_stream(r, StreamKind::comm_inter);
  int g = b.add_group({3, 1, 2});
  auto ids = b.collective(g, OpKind::broadcast, 100, {}, StreamKind::comm_inter, 2, 1);
  EXPECT_THROW(b.collective(g, OpKind::broadcast, 100, {}, StreamKind::comm_inter, 0, 0), std::invalid_argument);
  EXPECT_THROW(b.collective(g, OpKind::gemm, 100, {}, StreamKind::comm_inter), std::invalid_argument);
  Schedule s = std::move(b).build();
  ASSERT_EQ(ids.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const Op& op = s.ops[static_cast<size_t>(ids[i])];
    EXPECT_EQ(op.rank, s.groups[0].ranks[i]);
    EXPECT_EQ(op.stream, 1);
    EXPECT_EQ(op.peer, 1);  // the root
    EXPECT_EQ(op.tag, 2);
  }
  auto m = match_comms(s);
  ASSERT_EQ(m.calls.size(), 1u);
  EXPECT_EQ(m.calls[0], ids);
}

TEST(ScheduleBuilder, RejectsBadArguments) {
  ScheduleBuilder b;
  b.add_rank(0), b.add_stream(0, StreamKind::compute);
  EXPECT_THROW(b.compute(0, 3, OpKind::gemm, {}, {}), std::invalid_argument);
  EXPECT_THROW(b.compute(0, 0, OpKind::send, {}, {}), std::invalid_argument);
  EXPECT_THROW(b.compute(0, 0, OpKind::gemm, {}, {}, {5}), std::invalid_argument);
  EXPECT_THROW(b.add_dep(0, 0), std::invalid_argument);
  EXPECT_THROW(b.p2p({0, 0, 0, 0, 1, {}}), std::invalid_argument);
}

TEST(ScheduleMatching, KthSendMeetsKthRecvPerTag) {
  ScheduleBuilder b;
  for (int r = 0; r < 2; ++r) b.add_rank(r), b.add_stream(r, StreamKind::comm_intra), b.add_stream(r, StreamKind::comm_inter);
  Op send;
  send.kind = OpKind::send;
  send.peer = 1;
  Op recv = send;
  recv.kind = OpKind::recv;
  recv.rank = 1;
  recv.peer = 0;
  OpId s0 = b.add_op(send, {0.0, 0, 0, 8});
  send.tag = 1;
  OpId s1 = b.add_op(send, {0.0, 0, 0, 8});  // tag 1
  send.tag = 0;
  OpId s2 = b.add_op(send, {0.0, 0, 0, 8});
  recv.tag = 1;
  OpId r1 = b.add_op(recv, {0.0, 0, 0, 8});
  recv.tag = 0;
  OpId r0 = b.add_op(recv, {0.0, 0, 0, 8});
  OpId r2 = b.add_op(recv, {0.0, 0, 0, 8});
  auto m = match_comms(b.peek());
  EXPECT_EQ(m.partner[static_cast<size_t>(s0)], r0);
  EXPECT_EQ(m.partner[static_cast<size_t>(s1)], r1);
  EXPECT_EQ(m.partner[static_cast<size_t>(s2)], r2);
}

TEST(ScheduleTopoOrder, RespectsDependenciesAndStreamOrder) {
  for (unsigned seed = 0; seed < 20; ++seed) {
    Schedule s = testing::random_schedule(seed);
    auto order = topological_order(s);
    ASSERT_EQ(order.size(), s.ops.size());
    std::vector<size_t> pos(s.ops.size());
    for (size_t i = 0; i < order.size(); ++i) pos[static_cast<size_t>(order[i])] = i;
    std::map<std::pair<int, int>, OpId> last;
    for (const Op& op : s.ops) {
      for (OpId d : op.deps) EXPECT_LT(pos[static_cast<size_t>(d)], pos[static_cast<size_t>(op.id)]);
      auto it = last.find({op.rank, op.stream});
      if (it != last.end()) {
        EXPECT_LT(pos[static_cast<size_t>(it->second)], pos[static_cast<size_t>(op.id)]);
      }
      last[{op.rank, op.stream}] = op.id;
    }
  }
}

TEST(ScheduleTopoOrder, SmallestReadyIdFirstAndCyclesThrow) {
  ScheduleBuilder b;
  b.add_rank(0), b.add_stream(0, StreamKind::compute), b.add_stream(0, StreamKind::comm_intra);
  OpId a = b.compute(0, 0, OpKind::gemm, {}, {});
  OpId c = b.compute(0, 1, OpKind::gemm, {}, {});
  b.add_dep(c, a);
  OpId d = b.compute(0, 0, OpKind::gemm, {}, {});
  EXPECT_EQ(topological_order(b.peek()), (std::vector<OpId>{a, c, d}));
  b.add_dep(a, d);
  try {
    topological_order(b.peek());
    FAIL();
  } catch (const ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("is on a dependency cycle"), std::string::npos);
  }
}

TEST(ScheduleNames, RoundTripAndDescribe) {
  for (int k = 0; k < kOpKindCount; ++k) EXPECT_EQ(parse_op_kind(to_string(static_cast<OpKind>(k))), static_cast<OpKind>(k));
  for (int p = 0; p < kPhaseCount; ++p) EXPECT_EQ(parse_phase(to_string(static_cast<Phase>(p))), static_cast<Phase>(p));
  for (int k = 0; k < kStreamKindCount; ++k)
    EXPECT_EQ(parse_stream_kind(to_string(static_cast<StreamKind>(k))), static_cast<StreamKind>(k));
  for (int t = 0; t < kDTypeCount; ++t) EXPECT_EQ(parse_dtype(to_string(static_cast<DType>(t))), static_cast<DType>(t));
  for (int r = 0; r < kBufferRoleCount; ++r)
    EXPECT_EQ(parse_buffer_role(to_string(static_cast<BufferRole>(r))), static_cast<BufferRole>(r));
  for (int m = 0; m < kMaskCount; ++m) EXPECT_EQ(parse_mask(to_string(static_cast<Mask>(m))), static_cast<Mask>(m));
  for (int i = 0; i < kIndexSourceCount; ++i)
    EXPECT_EQ(parse_index_source(to_string(static_cast<IndexSource>(i))), static_cast<IndexSource>(i));
  for (int i = 0; i < kInstancesCount; ++i)
    EXPECT_EQ(parse_instances(to_string(static_cast<Instances>(i))), static_cast<Instances>(i));
  EXPECT_EQ(to_string(OpKind::all_gather), "all_gather");
  EXPECT_EQ(to_string(BufferRole::d_o), "do");
  EXPECT_FALSE(parse_op_kind("matmul"));
  Schedule s;
  EXPECT_EQ(describe(s, 3), "op 3");
}

TEST(ScheduleBuilder, EqualDescriptorsShareOneEntry) {
  ScheduleBuilder b;
  b.add_rank(0), b.add_stream(0, StreamKind::compute);
  const int q = b.add_buffer(0, "q", BufferRole::q, DType::bf16, {4, 8}, Instances::per_layer);
  EXPECT_EQ(b.peek().buffers[size_t(q)].bytes(), 64);
  EXPECT_THROW(b.add_buffer(0, "bad", BufferRole::q, DType::bf16, {4, 0}), std::invalid_argument);
  EXPECT_EQ(b.token_set({{{0, 8, 16, 2}}}), b.token_set({{{0, 8, 16, 2}}}));
  EXPECT_NE(b.token_set({{{0, 8, 16, 2}}}), b.token_set({{{8, 8, 16, 2}}}));
  std::vector<OpId> ops;
  for (int layer = 0; layer < 3; ++layer) {
    ops.push_back(b.compute(0, 0, OpKind::attn_fwd, {Phase::forward, layer, 0}, {1, 1, 1}));
    b.set_access(ops.back(), {q}, {q});
    b.set_attention(ops.back(), {0, 0, 0, 1, 0, 1, Mask::causal, IndexSource::none, false});
  }
  b.set_access(ops[2], {q}, {});  // differs: reads only
  EXPECT_EQ(b.peek().accesses.size(), 2u);
  EXPECT_EQ(b.peek().attentions.size(), 1u);
  EXPECT_EQ(b.peek().desc(b.peek().ops[size_t(ops[0])]).access, b.peek().desc(b.peek().ops[size_t(ops[1])]).access);
  EXPECT_THROW(b.set_gemm(ops[0], {1, 1, 1}), std::invalid_argument);  // not a gemm
  EXPECT_THROW(b.set_access(ops[0], {7}, {}), std::invalid_argument);  // no buffer 7
  EXPECT_THROW(b.drop_buffers(), std::invalid_argument);  // ops name them
}

// Buffers that no op names can be left out: the Schedule is costable-only and
// validates, where with them it would not (its ops would name no buffers).
TEST(ScheduleBuilder, DropBuffersLeavesACostableOnlySchedule) {
  auto make = [] {
    ScheduleBuilder b;
    b.add_rank(0), b.add_stream(0, StreamKind::compute);
    b.add_buffer(0, "q", BufferRole::q, DType::bf16, {4, 8});
    b.compute(0, 0, OpKind::gemm, {Phase::forward, 0, 0}, {1, 1, 1});
    return b;
  };
  EXPECT_THROW(make().build(), ScheduleError);
  auto b = make();
  b.drop_buffers();
  const Schedule s = std::move(b).build();
  EXPECT_TRUE(s.buffers.empty());
  EXPECT_EQ(s.ops.size(), 1u);
}

// Interning against an oracle: the first-seen index of each distinct value, on
// random descriptors drawn from small ranges (many repeats, tables large
// enough to grow the index several times).
TEST(ScheduleBuilder, InterningMatchesFirstSeenOrder) {
  std::mt19937 rng(7);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  ScheduleBuilder b;
  b.add_rank(0), b.add_stream(0, StreamKind::compute);
  for (int i = 0; i < 6; ++i) b.add_buffer(0, "b" + std::to_string(i), BufferRole::q, DType::bf16, {4});
  std::map<std::vector<int64_t>, int> tokens, accesses, attentions, gemms;
  auto oracle = [](std::map<std::vector<int64_t>, int>& ids, std::vector<int64_t> key) {
    return ids.try_emplace(std::move(key), static_cast<int>(ids.size())).first->second;
  };
  for (int i = 0; i < 3000; ++i) {
    TokenSet t;
    std::vector<int64_t> tkey;
    for (int r = pick(3); r >= 0; --r) {
      t.runs.push_back({pick(4), 1 + pick(2), 4, 1 + pick(2)});
      tkey.insert(tkey.end(), {t.runs.back().begin, t.runs.back().len, t.runs.back().stride, t.runs.back().count});
    }
    ASSERT_EQ(b.token_set(t), oracle(tokens, tkey));

    const OpId a = b.compute(0, 0, OpKind::attn_fwd, {}, {1, 1, 1});
    std::vector<int> reads, writes;
    for (int k = pick(3); k > 0; --k) reads.push_back(pick(6));
    for (int k = pick(2); k > 0; --k) writes.push_back(pick(6));
    std::vector<int64_t> akey(reads.begin(), reads.end());
    akey.push_back(-1);
    akey.insert(akey.end(), writes.begin(), writes.end());
    b.set_access(a, reads, writes);
    ASSERT_EQ(b.peek().desc(b.peek().ops[size_t(a)]).access, oracle(accesses, akey));
    const Attention at{pick(3), pick(3), pick(4), 1 + pick(2), pick(2), 1, pick(2) ? Mask::causal : Mask::full,
                       IndexSource::none, pick(2) == 1};
    b.set_attention(a, at);
    ASSERT_EQ(b.peek().desc(b.peek().ops[size_t(a)]).detail,
              oracle(attentions, {at.q_tokens, at.kv_tokens, at.head_begin, at.heads, at.kv_head_begin, at.kv_heads,
                                  int64_t(at.mask), int64_t(at.index), int64_t{at.merge}}));

    const OpId g = b.compute(0, 0, OpKind::gemm, {}, {1, 1, 1});
    const Gemm gm{1 + pick(30), 1 + pick(30), 1};
    b.set_gemm(g, gm);
    ASSERT_EQ(b.peek().desc(b.peek().ops[size_t(g)]).detail, oracle(gemms, {gm.m, gm.n, gm.k}));
  }
  EXPECT_EQ(b.peek().token_sets.size(), tokens.size());
  EXPECT_EQ(b.peek().accesses.size(), accesses.size());
  EXPECT_EQ(b.peek().attentions.size(), attentions.size());
  EXPECT_EQ(b.peek().gemms.size(), gemms.size());
  EXPECT_GT(b.peek().gemms.size(), 200u);  // the index grew past its first 64 slots
}

// The ops' entries (Schedule::descs) against an oracle: each op's costs and data
// descriptors as set, on random ops whose entries are replaced after they are
// made (set_access, set_gemm) and handed out in random chunks. After build() and
// in every chunk, each entry is used, no two are equal, and they come in order
// of first use.
void expect_compact(std::span<const Op> ops, std::span<const OpDesc> descs) {
  std::vector<bool> used(descs.size(), false);
  int32_t next = 0;
  for (const Op& op : ops) {
    if (op.desc < 0) continue;
    ASSERT_LT(size_t(op.desc), descs.size());
    if (!used[size_t(op.desc)]) {
      ASSERT_EQ(op.desc, next++) << "entries come in order of first use";
    }
    used[size_t(op.desc)] = true;
  }
  EXPECT_EQ(size_t(next), descs.size()) << "every entry is used";
  for (size_t i = 0; i < descs.size(); ++i) {
    EXPECT_FALSE(descs[i] == kNoDesc);
    for (size_t j = i + 1; j < descs.size(); ++j) ASSERT_FALSE(descs[i] == descs[j]) << i << " and " << j;
  }
}

TEST(ScheduleBuilder, EntriesHoldEachOpsCostsOnceEachAndInOrderOfFirstUse) {
  for (const bool streamed : {false, true}) {
    std::mt19937 rng(streamed ? 11 : 5);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
    ScheduleBuilder b;
    for (int r = 0; r < 2; ++r) {
      b.add_rank(r), b.add_stream(r, StreamKind::compute), b.add_stream(r, StreamKind::comm_intra);
      // Buffers only where the ops are handed out: build() would want every op to name some.
      for (int i = 0; i < 3 && streamed; ++i) b.add_buffer(r, "b" + std::to_string(i), BufferRole::q, DType::bf16, {4});
    }
    std::vector<OpDesc> want;  // per op
    std::vector<Op> ops;       // handed out so far (streamed)
    std::vector<OpDesc> got;   // their entries, resolved
    auto take = [&] {
      OpChunk c = b.take_ops();
      expect_compact(c.ops, c.descs);
      EXPECT_TRUE(b.peek().descs.empty());
      for (const Op& op : c.ops) ops.push_back(op), got.push_back(desc_in(c.descs, op));
    };
    for (int i = 0; i < 2000; ++i) {
      const int r = pick(2);
      switch (pick(streamed ? 4 : 3)) {
        case 0: {  // a compute op, its costs from a few values (many shared)
          const ComputeCost c{double(pick(3)), pick(2), pick(2), pick(2)};
          b.compute(r, 0, OpKind::gemm, {}, c);
          want.push_back({c.flops, c.blocks, c.tokens, c.bytes});
          break;
        }
        case 1: {  // a pair: both ops share their bytes
          const int64_t bytes = pick(3);
          b.p2p({r, 1, 1 - r, 1, bytes, {}, pick(2)});
          want.push_back({0.0, 0, 0, bytes}), want.push_back({0.0, 0, 0, bytes});
          break;
        }
        case 2: {  // a gemm given a shape after it is made: its entry is replaced
          const OpId g = b.compute(r, 0, OpKind::gemm, {}, {1.0, 0, 0, 0});
          const Gemm gm{1 + pick(3), 1, 1};
          b.set_gemm(g, gm);
          want.push_back({1.0, 0, 0, 0, -1, b.peek().desc(b.peek().ops.back()).detail});
          break;
        }
        default: {  // an op given its buffers after it is made, then its access changed again
          const OpId a = b.compute(r, 0, OpKind::elementwise, {}, {0.0, 0, 0, pick(2)});
          b.set_access(a, {pick(3) + 3 * r}, {});
          b.set_access(a, {}, {pick(3) + 3 * r});
          OpDesc d = b.peek().desc(b.peek().ops.back());
          want.push_back(d);
          EXPECT_EQ(b.peek().access_of(b.peek().ops.back())->writes.size(), 1u);
          break;
        }
      }
      if (streamed && pick(50) == 0) take();
    }
    if (streamed) {
      take();
    } else {
      const Schedule s = std::move(b).build();
      expect_compact(s.ops, s.descs);
      ops = s.ops;
      for (const Op& op : s.ops) got.push_back(s.desc(op));
    }
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_TRUE(got[i] == want[i]) << "op " << i;
  }
}

// Equal Schedules whatever entries their ops name: the same ops with the table
// reversed are equal; a change to one op's costs is not.
TEST(ScheduleEquality, ComparesEachOpsCostsNotItsEntrysIndex) {
  const Schedule s = testing::random_schedule(3);
  ASSERT_GT(s.descs.size(), 2u);
  Schedule r = s;
  std::reverse(r.descs.begin(), r.descs.end());
  for (Op& op : r.ops)
    if (op.desc >= 0) op.desc = int32_t(r.descs.size()) - 1 - op.desc;
  EXPECT_TRUE(r == s);
  size_t i = 0;
  while (s.desc(s.ops[i]).flops == 0) ++i;
  Schedule t = s;
  t.set_desc(t.ops[i], {t.desc(t.ops[i]).flops * 2});
  EXPECT_FALSE(t == s);
  t = s;
  t.ops[i].desc = -1;  // no costs at all
  EXPECT_FALSE(t == s);
}

// The fields an Op holds in 16 or 32 bits take no value they cannot hold.
TEST(ScheduleBuilder, RefusesLayersTagsAndStreamsTheOpCannotHold) {
  ScheduleBuilder b;
  for (int r = 0; r < 2; ++r) b.add_rank(r), b.add_stream(r, StreamKind::compute), b.add_stream(r, StreamKind::comm_intra);
  b.add_group({0, 1});
  EXPECT_NO_THROW(b.compute(0, 0, OpKind::gemm, {Phase::forward, int(kMaxLayer), 0}, {}));
  EXPECT_THROW(b.compute(0, 0, OpKind::gemm, {Phase::forward, int(kMaxLayer) + 1, 0}, {}), std::invalid_argument);
  EXPECT_THROW(b.compute(0, 0, OpKind::gemm, {Phase::forward, -2, 0}, {}), std::invalid_argument);
  EXPECT_NO_THROW(b.p2p({0, 1, 1, 1, 8, {}, kMaxTag}));
  EXPECT_THROW(b.p2p({0, 1, 1, 1, 8, {}, kMaxTag + 1}), std::invalid_argument);
  EXPECT_THROW(b.p2p({0, 1, 1, 1, 8, {}, kMinTag - 1}), std::invalid_argument);
  EXPECT_THROW(b.collective(0, OpKind::all_reduce, 8, {}, StreamKind::comm_intra, int64_t(1) << 40), std::invalid_argument);
  EXPECT_THROW(b.compute(0, 65536, OpKind::gemm, {}, {}), std::invalid_argument);  // not wrapped onto stream 0
  EXPECT_THROW(b.p2p({0, 65537, 1, 1, 8, {}}), std::invalid_argument);
  const Schedule s = std::move(b).build();
  EXPECT_EQ(s.ops[0].layer, kMaxLayer);
  EXPECT_EQ(s.ops[1].tag, kMaxTag);
}

}  // namespace
}  // namespace rm::schedule
