// The seeds' real code paths in the generators (issue 8, section 3 and the
// per-step merge of section 4): the stripe / zigzag shuffle per attention call
// or once (`parallel.shuffle`), the dK/dV wire dtype (`parallel.grad_comm_dtype`),
// the flat ring's order (`parallel.ring_order`), the merge of every ring step and
// the outer dK/dV additions of the hierarchical ring, and MTraining's online index
// building in both selection modes with the backward's second conversion. Expected
// counts and sizes are worked out here by hand from the seeds' code, not read
// back from the generator's formulas.
#include <algorithm>
#include <numeric>
#include <set>

#include <gtest/gtest.h>

#include "sim/generate/index_building.hpp"
#include "sim/generate/ring_emitter.hpp"
#include "sim/placement/device_map.hpp"
#include "sim/placement/ring_order.hpp"
#include "tests/support/generate_support.hpp"

namespace rm::generate {
namespace {

using schedule::Op;
using schedule::OpKind;
using schedule::Phase;
using testing::count;
using testing::small_experiment;

std::vector<const Op*> ops_of(const schedule::Schedule& s, int rank, Phase phase, OpKind kind) {
  std::vector<const Op*> out;
  for (const Op& op : s.ops)
    if (op.rank == rank && op.phase == phase && op.kind == kind) out.push_back(&op);
  return out;
}

testing::Generated dense(std::vector<std::string> o) {
  auto e = small_experiment(std::move(o));
  return testing::generate(e, testing::model_of(e, sparsity::HeadPattern::dense_causal()));
}

// ---- parallel.shuffle ------------------------------------------------------------

// Qwen2.5-3B in the small default: 16 heads, 2 KV heads, head dim 128; 8192 tokens on cp = 4.
constexpr int64_t kTokens = 8192 / 4, kQ = kTokens * 16 * 128 * 2, kKv = 2 * kTokens * 2 * 128 * 2;

TEST(Shuffle, StripePerCallIsOneAllToAllPerTensorInEveryCallAndOnceIsNone) {
  auto g = dense({"parallel.cp=4", "parallel.partition=stripe", "scope=layer", "parallel.checkpoint=full"});
  for (int r = 0; r < 4; ++r) {
    // MTraining: shuffle q, k, v and recover out (K and V travel in one K|V all-to-all here);
    // backward: shuffle dout, recover dq, dk, dv; the recomputation shuffles again.
    for (Phase ph : {Phase::forward, Phase::recompute}) {
      auto a = ops_of(g.s, r, ph, OpKind::all_to_all);
      ASSERT_EQ(a.size(), 3u);
      EXPECT_EQ(g.s.desc(*a[0]).bytes, kQ);
      EXPECT_EQ(g.s.desc(*a[1]).bytes, kKv);
      EXPECT_EQ(g.s.desc(*a[2]).bytes, kQ);
      for (const Op* op : a) EXPECT_EQ(g.s.groups[size_t(op->group)].ranks.size(), 4u);
    }
    auto b = ops_of(g.s, r, Phase::backward, OpKind::all_to_all);
    ASSERT_EQ(b.size(), 3u);
    EXPECT_EQ(g.s.desc(*b[0]).bytes, kQ);   // dO in
    EXPECT_EQ(g.s.desc(*b[1]).bytes, kQ);   // dQ out
    EXPECT_EQ(g.s.desc(*b[2]).bytes, kKv);  // dK|dV out, as bf16
  }
  auto once = dense({"parallel.cp=4", "parallel.partition=stripe", "scope=layer", "parallel.shuffle=once"});
  for (int r = 0; r < 4; ++r) EXPECT_EQ(count(once.s, r, OpKind::all_to_all), 0);
}

TEST(Shuffle, ZigzagPerCallSwapsHalvesWithRankWMinus1MinusR) {
  auto g = dense({"parallel.cp=4", "parallel.partition=zigzag", "scope=attention_fwd_bwd"});
  for (int r = 0; r < 4; ++r) {
    for (Phase ph : {Phase::forward, Phase::backward}) {
      auto a = ops_of(g.s, r, ph, OpKind::all_to_all);
      ASSERT_EQ(a.size(), 3u);
      for (const Op* op : a) {
        auto members = g.s.groups[size_t(op->group)].ranks;
        std::sort(members.begin(), members.end());
        EXPECT_EQ(members, (std::vector<int>{std::min(r, 3 - r), std::max(r, 3 - r)}));
      }
      EXPECT_EQ(g.s.desc(*a[0]).bytes, kQ);  // a two-member all-to-all of the whole tensor moves half of it
    }
  }
  auto once = dense({"parallel.cp=4", "parallel.partition=zigzag", "scope=attention_fwd_bwd", "parallel.shuffle=once"});
  EXPECT_EQ(count(once.s, 0, OpKind::all_to_all), 0);
  // Contiguous tokens need no shuffle either way.
  EXPECT_EQ(count(dense({"parallel.cp=4", "scope=attention_fwd"}).s, 0, OpKind::all_to_all), 0);
}

// ---- parallel.grad_comm_dtype -----------------------------------------------------

TEST(GradCommDtype, DkvTransfersAndTheirBuffersFollowTheKey) {
  for (auto [name, bytes] : {std::pair{"fp32", int64_t(4)}, std::pair{"bf16", int64_t(2)}}) {
    auto g = dense({"parallel.cp=4", "scope=attention_fwd_bwd", std::string("parallel.grad_comm_dtype=") + name});
    int dkv_sends = 0;
    for (const Op& op : g.s.ops)
      if (op.kind == OpKind::send && op.tag == kTagDkvInner) {
        ++dkv_sends;
        EXPECT_EQ(g.s.desc(op).bytes, kKv / 2 * bytes);  // 2 (dK, dV) x tokens x KV heads x head dim x element
        for (int b : g.s.access_of(op)->reads) EXPECT_EQ(g.s.buffers[size_t(b)].bytes(), g.s.desc(op).bytes);
      }
    EXPECT_EQ(dkv_sends, 4 * 4);
    // K/V transfers stay bf16 whatever the key.
    for (const Op& op : g.s.ops)
      if (op.kind == OpKind::send && op.tag == kTagKvInner) {
        EXPECT_EQ(g.s.desc(op).bytes, kKv);
      }
  }
}

// ---- parallel.ring_order -------------------------------------------------------------

// Node-crossing K/V hops of context group 0, counted on the schedule's sends.
int crossing_kv_sends(const testing::Generated& g) {
  const topology::Topology& t = g.topo;
  std::set<std::pair<int, int>> hops;
  for (const Op& op : g.s.ops)
    if (op.kind == OpKind::send && op.tag == kTagKvInner && op.phase == Phase::forward)
      hops.insert({g.s.ranks[size_t(op.rank)].gpu, g.s.ranks[size_t(op.peer)].gpu});
  int n = 0;
  for (auto [a, b] : hops) n += !t.same_node(a, b);
  return n;
}

TEST(RingOrder, NodeCrossingHopsOfEachOrderOnTwoNodes) {
  // cp = 16 over two 8-GPU nodes: rank order crosses twice (7 -> 8, 15 -> 0);
  // zigzag_pairs 0 -> 15 -> 1 -> 14 ... -> 8 -> 0 crosses on every one of its 16 hops.
  const std::vector<std::string> base{"parallel.cp=16", "parallel.partition=zigzag", "parallel.shuffle=once",
                                      "scope=attention_fwd"};
  auto with = [&](const char* order) {
    auto o = base;
    o.push_back(std::string("parallel.ring_order=") + order);
    return dense(o);
  };
  EXPECT_EQ(crossing_kv_sends(with("rank")), 2);
  EXPECT_EQ(crossing_kv_sends(with("zigzag_pairs")), 16);
  EXPECT_EQ(crossing_kv_sends(with("topology")), 2);
  // Each rank sends to its successor in the order, and the ring is one cycle.
  auto z = with("zigzag_pairs");
  for (const Op& op : z.s.ops)
    if (op.kind == OpKind::send && op.tag == kTagKvInner && op.rank == 0) {
      EXPECT_EQ(op.peer, 15);
    }
}

TEST(RingOrder, TopologyOrderIsTheFewestCrossingsByBruteForce) {
  topology::Topology t(small_experiment({}).cluster);  // 8 GPUs per node
  // Groups whose context-rank order interleaves nodes, as a placement could lay them.
  const std::vector<std::vector<int>> groups{{0, 8, 1, 9, 2, 10}, {16, 0, 24, 8, 17, 1, 25}, {3, 4, 5, 11}};
  for (const auto& gpus : groups) {
    std::vector<int> perm(gpus.size());
    std::iota(perm.begin(), perm.end(), 0);
    int best = INT32_MAX;
    do best = std::min(best, placement::inter_node_hops(perm, gpus, t));
    while (std::next_permutation(perm.begin(), perm.end()));
    const auto ring = placement::ring_order(RingOrder::topology, gpus, t);
    EXPECT_EQ(placement::inter_node_hops(ring, gpus, t), best);
    EXPECT_EQ(std::set<int>(ring.begin(), ring.end()).size(), gpus.size());  // every rank once
  }
  // The first group in rank order crosses nodes on every hop; grouped by node, twice.
  EXPECT_EQ(placement::inter_node_hops(placement::ring_order(RingOrder::rank, groups[0], t), groups[0], t), 6);
  EXPECT_EQ(placement::inter_node_hops(placement::ring_order(RingOrder::topology, groups[0], t), groups[0], t), 2);
}

TEST(RingOrder, BadCombinationsNameTheKey) {
  auto expect_error = [](std::vector<std::string> o, const char* key) {
    try {
      small_experiment(std::move(o));
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& err) {
      EXPECT_NE(std::string(err.what()).find(key), std::string::npos) << err.what();
    }
  };
  expect_error({"parallel.cp=16", "parallel.ring=hierarchical", "parallel.ring_order=topology"}, "parallel.ring_order");
  expect_error({"parallel.cp=3", "workload.seq_len=6144", "parallel.ring_order=zigzag_pairs"}, "parallel.ring_order");
  expect_error({"parallel.ring_order=fastest"}, "parallel.ring_order");
  expect_error({"parallel.shuffle=sometimes"}, "parallel.shuffle");
  expect_error({"parallel.grad_comm_dtype=fp16"}, "parallel.grad_comm_dtype");
}

// ---- the per-step merge ------------------------------------------------------------------

TEST(Merge, EveryStepAfterTheFirstMergesItsAccumulatorsAsMemoryTraffic) {
  const int64_t T = kTokens, H = 16, Hkv = 2, D = 128;
  for (auto [name, g_bytes] : {std::pair{"fp32", int64_t(4)}, std::pair{"bf16", int64_t(2)}}) {
    auto g = dense({"parallel.cp=4", "scope=attention_fwd_bwd", std::string("parallel.grad_comm_dtype=") + name});
    for (int r = 0; r < 4; ++r) {
      auto fwd = ops_of(g.s, r, Phase::forward, OpKind::elementwise);
      ASSERT_EQ(fwd.size(), 3u);
      for (const Op* op : fwd) {
        EXPECT_GE(op->step, 1);
        // MTraining's kernel merges in its epilogue: running O (bf16) and LSE (fp32) read and written.
        EXPECT_EQ(g.s.desc(*op).bytes, T * H * (2 * D * 2 + 2 * 4));
        EXPECT_GT(op->id, 0);
        EXPECT_EQ(g.s.ops[size_t(op->id - 1)].kind, OpKind::attn_fwd);  // right after its step's attention
      }
      // Backward (flat ring): dq += step_dq (fp32 read and written, bf16 partial read), and
      // dk, dv = the arrived sum (grad dtype) + the step's bf16 partial, written in grad dtype.
      auto bwd = ops_of(g.s, r, Phase::backward, OpKind::elementwise);
      ASSERT_EQ(bwd.size(), 3u);
      for (const Op* op : bwd)
        EXPECT_EQ(g.s.desc(*op).bytes, T * H * D * (4 + 2 + 4) + 2 * T * Hkv * D * (g_bytes + 2 + g_bytes));
    }
  }
  // A FlashAttention kernel returns a partial: it is read (bf16 O, fp32 LSE) and the fp32
  // O and LSE accumulators are read and written (ring-flash-attention's update_out_and_lse).
  auto fa2 = dense({"parallel.cp=4", "scope=attention_fwd", "kernel.attention=fa2"});
  for (const Op* op : ops_of(fa2.s, 0, Phase::forward, OpKind::elementwise))
    EXPECT_EQ(fa2.s.desc(*op).bytes, T * H * ((D * 2 + 4) + 2 * (D * 4 + 4)));
  // A ring of one merges nothing.
  EXPECT_EQ(count(dense({"scope=attention_fwd_bwd"}).s, 0, OpKind::elementwise), 0);
}

TEST(Merge, HierarchicalBackwardAddsTheOuterDkvSumsOnTheComputeStream) {
  // cp = 16 on 8-GPU nodes: 2 rounds of 8 inner steps; 512 tokens per rank, fp32 dK|dV.
  auto g = dense({"parallel.cp=16", "parallel.partition=stripe", "parallel.ring=hierarchical", "scope=attention_fwd_bwd"});
  const int64_t T = 8192 / 16, H = 16, Hkv = 2, D = 128, dkv = 2 * T * Hkv * D * 4;
  const auto& s = g.s;
  for (int r : {0, 9}) {
    auto ew = ops_of(s, r, Phase::backward, OpKind::elementwise);
    // 15 merges (steps 1..15) and one outer addition (round 1: `dk = next_dk; dk += step_dk`).
    ASSERT_EQ(ew.size(), 16u);
    std::vector<const Op*> adds;
    for (const Op* op : ew) {
      std::vector<std::string> reads;
      for (int b : s.access_of(*op)->reads) reads.push_back(s.buffers[size_t(b)].name);
      if (std::find(reads.begin(), reads.end(), "dkv.outer0") != reads.end()) adds.push_back(op);
    }
    ASSERT_EQ(adds.size(), 1u);
    const Op& add = *adds[0];
    EXPECT_EQ(g.s.desc(add).bytes, 3 * dkv);  // two fp32 sums read, one written
    EXPECT_EQ(add.step, 15);
    EXPECT_EQ(add.stream, ew.front()->stream);  // on the compute stream
    EXPECT_TRUE(s.access_of(add)->writes.empty());
    // It waits for the outer recv that brought the earlier nodes' sum, and the outer send waits for it.
    bool waits_outer = false;
    for (OpId d : add.deps) waits_outer |= s.ops[size_t(d)].kind == OpKind::recv && s.ops[size_t(d)].tag == kTagDkvOuter;
    EXPECT_TRUE(waits_outer);
    bool send_after = false;
    for (const Op& op : s.ops)
      if (op.rank == r && op.kind == OpKind::send && op.tag == kTagDkvOuter)
        send_after |= std::find(op.deps.begin(), op.deps.end(), add.id) != op.deps.end();
    EXPECT_TRUE(send_after);
    // The round's first step (k = 8) brings no inner sum: dk = step_dk.to(float32).
    for (const Op* op : ew) {
      if (op->step == 8 && op != &add) {
        EXPECT_EQ(g.s.desc(*op).bytes, T * H * D * 10 + 2 * T * Hkv * D * (2 + 4));
      }
    }
  }
  // A flat ring adds nothing outside its steps.
  EXPECT_EQ(count(dense({"parallel.cp=16", "parallel.partition=stripe", "scope=attention_fwd_bwd"}).s, 0,
                  OpKind::elementwise, int(Phase::backward)),
            15);
}

// ---- index building --------------------------------------------------------------------

struct IndexCase {
  const char* pattern;
  bool top_p;
  int64_t verticals, slashes;  // padded budgets at 16384 local tokens (128 blocks)
};

TEST(IndexBuilding, OpSequenceAndSizesPerSelectionMode) {
  // topp-synthetic: caps 4096 / 4096; qwen2.5-3b-static: largest budgets 3500 / 6096,
  // padded to 3584 / 6144 (MTraining's pattern file, REFERENCE.md).
  for (const IndexCase& c : {IndexCase{"topp-synthetic", true, 4096, 4096}, IndexCase{"qwen2.5-3b-static", false, 3584, 6144}}) {
    auto e = small_experiment({"parallel.cp=4", "workload.seq_len=65536", "parallel.partition=stripe",
                               std::string("workload.pattern=") + c.pattern, "scope=layer", "parallel.checkpoint=full"});
    auto g = testing::generate(e, testing::model_of(e, testing::vertical_slash_pattern(), /*dynamic=*/true));
    const int64_t N = 65536 / 4, H = 16, D = 128;
    const auto z = index_sizes(e);
    EXPECT_EQ(z.top_p, c.top_p);
    EXPECT_EQ(z.verticals, c.verticals);
    EXPECT_EQ(z.slashes, c.slashes);
    EXPECT_EQ(z.blocks, N / 128);
    for (Phase ph : {Phase::forward, Phase::recompute}) {
      // Context rank 0 (GPU 0) is the gather root; the last rank owns the last queries.
      std::vector<OpKind> want{OpKind::broadcast, OpKind::index_build};
      if (c.top_p)
        want.insert(want.end(), {OpKind::index_build, OpKind::all_gather, OpKind::index_build, OpKind::all_gather});
      want.push_back(OpKind::index_build);                            // column sums
      want.insert(want.end(), 3, OpKind::recv);                       // the verticals of ranks 1..3
      want.insert(want.end(), {OpKind::index_build, OpKind::broadcast, OpKind::index_build});  // top-k, send, diagonals
      want.insert(want.end(), 3, OpKind::recv);                       // the slashes
      want.insert(want.end(), {OpKind::index_build, OpKind::broadcast, OpKind::index_build, OpKind::index_build});
      std::vector<OpKind> have;
      std::vector<const Op*> seq;
      for (const Op& op : g.s.ops)
        if (op.rank == 0 && op.phase == ph && op.layer == 0 && op.step < 0 && op.kind != OpKind::all_to_all &&
            (op.kind == OpKind::index_build || op.kind == OpKind::broadcast || op.kind == OpKind::all_gather ||
             op.kind == OpKind::recv))
          have.push_back(op.kind), seq.push_back(&op);
      ASSERT_EQ(have, want) << c.pattern;
      EXPECT_EQ(g.s.desc(*seq[0]).bytes, 64 * H * D * 2);                             // last 64 queries, bf16
      EXPECT_EQ(g.s.ranks[size_t(seq[0]->peer)].gpu, 3);                   // from the last rank
      if (c.top_p) {
        EXPECT_EQ(g.s.desc(*seq[3]).bytes, 4 * H * 64 * 2);  // maxima of every rank
      }
      const size_t v = c.top_p ? 7 : 3;
      EXPECT_EQ(g.s.desc(*seq[v]).bytes, H * N * 2);                                  // vertical scores
      EXPECT_EQ(g.s.desc(*seq[v + 4]).bytes, H * c.verticals * 4);                    // int32 indices
      EXPECT_EQ(g.s.desc(*seq[v + 6]).bytes, H * (N + 63) * 2);                       // N + 63 diagonals
      EXPECT_EQ(g.s.desc(*seq[v + 10]).bytes, H * c.slashes * 4);
      // The conversion writes every ring step's block mask: grows with (N/128)^2 x heads x ranks.
      const int64_t nb = N / 128;
      EXPECT_EQ(g.s.desc(*seq[v + 11]).bytes, 4 * H * nb * nb + 4 * H * nb * c.verticals * 4);
    }
    // Every rank but the root sends its two score vectors, and no other rank runs a top-k.
    int gathers = 0;
    for (const Op& op : g.s.ops) gathers += op.rank == 1 && op.phase == Phase::forward && op.tag == kTagIndexGather;
    EXPECT_EQ(gathers, 2);
    EXPECT_EQ(count(g.s, 1, OpKind::index_build, int(Phase::forward)), (c.top_p ? 3 : 1) + 4);
    // The backward converts the recomputation's block mask once more, per rank
    // (convert_blockmask_col_reverse): 64 bytes per element of [cp, B, H, nb, nb].
    for (int r = 0; r < 4; ++r) {
      auto conv = ops_of(g.s, r, Phase::backward, OpKind::index_build);
      ASSERT_EQ(conv.size(), 1u);
      const int64_t nb = N / 128;
      EXPECT_EQ(g.s.desc(*conv[0]).bytes, 64 * 4 * H * nb * nb);
      const auto* a = g.s.access_of(*conv[0]);
      ASSERT_EQ(a->reads.size(), 1u);
      EXPECT_EQ(g.s.buffers[size_t(a->reads[0])].name, "index.re");
      // before the ring backward: the first attention op of the pass comes after it
      for (const Op& op : g.s.ops)
        if (op.rank == r && op.kind == OpKind::attn_bwd) {
          EXPECT_GT(op.id, conv[0]->id);
          break;
        }
    }
  }
}

// MTraining builds the index on the contiguous layout, then shuffles Q, K and V
// (minfer_striped.py: build_index, then shuffle_striped_input): the scores read
// the pre-shuffle copies, the last queries come from context rank cp - 1, and
// every shuffle all-to-all of the pass comes after the index building. Without a
// per-call shuffle the scores read the attention's own Q and K|V.
TEST(IndexBuilding, BuiltOnTheContiguousLayoutBeforeThePerCallShuffle) {
  for (const char* shuffle : {"per_call", "once"}) {
    auto e = small_experiment({"parallel.cp=4", "workload.seq_len=65536", "parallel.partition=stripe",
                               std::string("parallel.shuffle=") + shuffle, "scope=attention_fwd"});
    auto g = testing::generate(e, testing::model_of(e, testing::vertical_slash_pattern(), /*dynamic=*/true));
    const bool per_call = std::string(shuffle) == "per_call";
    for (int r = 0; r < 4; ++r) {
      OpId last_index = -1, first_a2a = -1;
      for (const Op& op : g.s.ops) {
        if (op.rank != r || op.layer != 0 || op.phase != Phase::forward) continue;
        if (op.kind == OpKind::index_build) last_index = op.id;
        if (op.kind == OpKind::all_to_all && first_a2a < 0) first_a2a = op.id;
      }
      ASSERT_GE(last_index, 0);
      EXPECT_EQ(first_a2a >= 0, per_call) << shuffle;
      if (per_call) {
        EXPECT_LT(last_index, first_a2a) << "rank " << r;
      }
      // The scores: the first index_build of the pass reads the last queries and the local K|V.
      const Op* scores = nullptr;
      for (const Op& op : g.s.ops)
        if (op.rank == r && op.layer == 0 && op.kind == OpKind::index_build) {
          scores = &op;
          break;
        }
      ASSERT_NE(scores, nullptr);
      std::set<std::string> read;
      for (int b : g.s.access_of(*scores)->reads) read.insert(g.s.buffers[size_t(b)].name);
      EXPECT_EQ(read, (std::set<std::string>{"index.last_q", per_call ? "kv.seq" : "kv"})) << shuffle;
    }
    // The last queries' broadcast: its root is context rank 3 (GPU 3) and it reads its Q.
    for (const Op& op : g.s.ops)
      if (op.kind == OpKind::broadcast && op.layer == 0 && op.phase == Phase::forward && op.rank == 3) {
        EXPECT_EQ(g.s.ranks[size_t(op.peer)].gpu, 3);
        ASSERT_EQ(g.s.access_of(op)->reads.size(), 1u);
        EXPECT_EQ(g.s.buffers[size_t(g.s.access_of(op)->reads[0])].name, per_call ? "q.seq" : "q");
        break;
      }
  }
}

TEST(IndexBuilding, SelectiveCheckpointRecomputesNoIndexAndStaticPatternsBuildNone) {
  auto e = small_experiment({"parallel.cp=4", "parallel.partition=stripe", "scope=layer", "parallel.checkpoint=selective"});
  auto g = testing::generate(e, testing::model_of(e, testing::vertical_slash_pattern(), true));
  EXPECT_GT(count(g.s, 0, OpKind::index_build, int(Phase::forward)), 0);
  EXPECT_EQ(count(g.s, 0, OpKind::index_build, int(Phase::recompute)), 0);
  auto fixed = testing::generate(e, testing::model_of(e, testing::vertical_slash_pattern(), false));
  EXPECT_EQ(count(fixed.s, 0, OpKind::index_build), 0);
}

}  // namespace
}  // namespace rm::generate
