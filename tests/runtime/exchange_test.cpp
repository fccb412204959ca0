// Layouts and all-to-all routing, by simulation: for many random groups, home
// layouts (random token partitions, or head splits) and batch sizes, every
// member's exchange plan is executed in memory and each element must land at
// its own global coordinate, in both directions (into the ring and back out).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "runtime/exchange_plan.hpp"
#include "runtime/layouts.hpp"
#include "sim/schedule/comm_matching.hpp"
#include "sim/schedule/schedule_error.hpp"

namespace rm::runtime {
namespace {

using schedule::BufferRole;
using schedule::OpKind;

struct Case {
  int n = 2, seq = 0, heads = 0, dim = 4;
  int64_t batch = 1;
  bool split_heads = false;  // Ulysses-like: every member keeps all tokens, heads split
  BufferRole role = BufferRole::q;
  std::vector<std::vector<int32_t>> tokens;  // per member: its home tokens, local order
};

// n ranks; per rank: buffer 0 "x" (exchange, the far side) and 1 "home", an
// attention op naming home's tokens and heads, and an all-to-all x -> home;
// then an all-to-all home -> "y" (exchange) back out.
schedule::Schedule build(const Case& c) {
  schedule::Schedule s;
  for (int r = 0; r < c.n; ++r) s.ranks.push_back({r, r, {{0, schedule::StreamKind::compute, "compute"}}});
  std::vector<int> all(size_t(c.n));
  std::iota(all.begin(), all.end(), 0);
  s.groups.push_back({0, all, "g"});
  const int heads = c.split_heads ? c.heads / c.n : c.heads;
  const int64_t tokens = c.split_heads ? c.seq : c.seq / c.n;
  const bool kv = c.role == BufferRole::kv || c.role == BufferRole::dkv;
  auto shape = [&] { return kv ? std::vector<int64_t>{2, c.batch, tokens, heads, c.dim} : std::vector<int64_t>{c.batch, tokens, heads, c.dim}; };
  for (int r = 0; r < c.n; ++r) {
    const int base = int(s.buffers.size());
    s.buffers.push_back({base, r, "x", BufferRole::exchange, schedule::DType::bf16, shape(), schedule::Instances::one});
    s.buffers.push_back({base + 1, r, "home", c.role, schedule::DType::bf16, shape(), schedule::Instances::one});
    s.buffers.push_back({base + 2, r, "y", BufferRole::exchange, schedule::DType::bf16, shape(), schedule::Instances::one});
    schedule::TokenSet t;
    for (int32_t p : c.tokens[size_t(r)]) t.runs.push_back({p, 1, 0, 1});
    s.token_sets.push_back(t);
    const int h0 = c.split_heads ? r * heads : 0;
    s.attentions.push_back({r, r, kv ? 0 : h0, kv ? heads : heads, h0, heads, schedule::Mask::causal,
                            schedule::IndexSource::none, false});
  }
  auto op = [&](int r, OpKind k, std::vector<int> reads, std::vector<int> writes, int detail) {
    schedule::Op o;
    o.id = int64_t(s.ops.size());
    o.rank = r;
    o.kind = k;
    o.group = k == OpKind::all_to_all ? 0 : -1;
    s.set_desc(o, {0.0, 0, 0, 0, int32_t(s.accesses.size()), detail});
    s.accesses.push_back({std::move(reads), std::move(writes)});
    s.ops.push_back(o);
  };
  for (int r = 0; r < c.n; ++r) op(r, OpKind::all_to_all, {3 * r}, {3 * r + 1}, -1);
  for (int r = 0; r < c.n; ++r)
    op(r, c.role == BufferRole::dkv ? OpKind::attn_bwd : OpKind::attn_fwd, {3 * r + 1}, {}, r);
  for (int r = 0; r < c.n; ++r) op(r, OpKind::all_to_all, {3 * r + 1}, {3 * r + 2}, -1);
  return s;
}

// A value that names its global coordinate.
float code(int part, int64_t b, int32_t head, int32_t token, int64_t d) {
  return float((((part * 7 + b) * 64 + head) * 4096 + token) * 8 + d);
}

// Fills every member's `from` buffer from its layout, runs the all-to-all ops
// (`first`.. one per member) through their plans, checks every `to` buffer.
void exchange_and_check(const schedule::Schedule& s, const Layouts& l, const schedule::CommMatching& m, int first,
                        int64_t batch) {
  const int n = int(s.ranks.size());
  const int64_t D = l.head_dim();
  std::vector<std::vector<float>> data(s.buffers.size());
  for (const auto& b : s.buffers) data[size_t(b.id)].assign(size_t(b.elements()), -1.f);
  auto fill = [&](int buf) {
    const Layout& x = *l.of(buf);
    for (int part = 0; part < (x.kv_like() ? 2 : 1); ++part)
      for (int64_t b = 0; b < batch; ++b)
        for (size_t h = 0; h < x.heads.size(); ++h)
          for (size_t t = 0; t < x.tokens.size(); ++t)
            for (int64_t d = 0; d < D; ++d)
              data[size_t(buf)][size_t(x.row(part, b, int64_t(h), int64_t(t), batch) * D + d)] =
                  code(part, b, x.heads[h], x.tokens[t], d);
  };
  std::vector<ExchangePlan> plans;
  for (int r = 0; r < n; ++r) {
    plans.push_back(exchange_plan(s, m, l, first + r));
    fill(plans.back().pairs[0].read);
  }
  for (int r = 0; r < n; ++r)      // receiver
    for (int j = 0; j < n; ++j) {  // sender: its rows for r, in r's order
      const auto& sent = plans[size_t(j)].send_rows[size_t(r)][0];
      const auto& land = plans[size_t(r)].recv_rows[size_t(j)][0];
      ASSERT_EQ(sent.size(), land.size());
      for (size_t i = 0; i < sent.size(); ++i)
        for (int64_t d = 0; d < D; ++d)
          data[size_t(plans[size_t(r)].pairs[0].write)][size_t(land[i] * D + d)] =
              data[size_t(plans[size_t(j)].pairs[0].read)][size_t(sent[i] * D + d)];
    }
  for (int r = 0; r < n; ++r) {
    const int buf = plans[size_t(r)].pairs[0].write;
    const std::vector<float> got = data[size_t(buf)];
    fill(buf);
    ASSERT_EQ(got, data[size_t(buf)]) << "rank " << r << " buffer " << s.buffers[size_t(buf)].name;
  }
}

TEST(Exchange, EveryElementLandsAtItsCoordinate) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    Case c;
    c.n = 2 + int(rng() % 3);
    c.split_heads = trial % 3 == 0;
    c.heads = c.n * (1 + int(rng() % 2));
    c.seq = c.n * 4 * (1 + int(rng() % 4));
    c.batch = 1 + int(rng() % 2);
    c.role = std::array{BufferRole::q, BufferRole::kv, BufferRole::o, BufferRole::dkv}[size_t(trial % 4)];
    std::vector<int32_t> order(size_t(c.seq));
    std::iota(order.begin(), order.end(), 0);
    if (c.split_heads) {
      c.tokens.assign(size_t(c.n), order);
    } else {
      std::shuffle(order.begin(), order.end(), rng);  // any partition, any local order
      for (int r = 0; r < c.n; ++r)
        c.tokens.emplace_back(order.begin() + r * (c.seq / c.n), order.begin() + (r + 1) * (c.seq / c.n));
    }
    const schedule::Schedule s = build(c);
    const schedule::CommMatching m = schedule::match_comms(s);
    const Layouts l(s, m, c.batch, c.dim);
    SCOPED_TRACE("trial " + std::to_string(trial));
    // The far side by the rule: member j holds the j-th contiguous chunk of the sorted tokens, all heads.
    for (int r = 0; r < c.n; ++r) {
      const Layout* far = l.of(3 * r);
      ASSERT_NE(far, nullptr);
      EXPECT_EQ(far->content, c.role);
      const int chunk = c.split_heads ? c.seq / c.n : c.seq / c.n;
      ASSERT_EQ(int(far->tokens.size()), chunk);
      for (int i = 0; i < chunk; ++i) EXPECT_EQ(far->tokens[size_t(i)], r * chunk + i);
      EXPECT_EQ(int(far->heads.size()), c.split_heads ? c.heads : c.heads);
      EXPECT_EQ(l.of(3 * r + 2)->tokens, far->tokens);  // the way out lands in the same layout
    }
    exchange_and_check(s, l, m, 0, c.batch);            // into the ring
    exchange_and_check(s, l, m, 2 * c.n, c.batch);      // and back
  }
}

TEST(Exchange, RefusesSidesThatDoNotAddUp) {
  // Ulysses with replicated KV heads: every member keeps the same one KV head,
  // so the far side would need more elements than its buffer holds.
  Case c;
  c.n = 2, c.seq = 8, c.heads = 2, c.split_heads = true, c.role = BufferRole::kv;
  std::vector<int32_t> all(8);
  std::iota(all.begin(), all.end(), 0);
  c.tokens = {all, all};
  schedule::Schedule s = build(c);
  for (auto& a : s.attentions) a.kv_head_begin = 0;  // both members: KV head 0
  const auto m = schedule::match_comms(s);
  EXPECT_THROW(Layouts(s, m, 1, 4), schedule::ScheduleError);
}

}  // namespace
}  // namespace rm::runtime
