// Oracles for the executable Schedule (format v2), over every generator and a
// sample of shipped experiments made small:
//  - coverage: per pass (data replica, head rank, layer, phase) the attention
//    ops' query x key sets, under the causal mask (every pair with full
//    attention; documents restrict pairs inside the ops, not the ops), cover
//    every allowed pair exactly once (brute force); mask flags and head ranges agree;
//  - dataflow: under happens-before (dependencies, stream order with joined
//    launches, send/recv and collective members as one event), no buffer is
//    read or written while another op may write it, nothing reads a slot,
//    accumulator or index before it is written, every received buffer is read;
//  - data: K|V are followed from their owner through every transfer: each
//    attention op reads the keys its descriptor names, and each rank's dK|dV
//    end up as the sum of exactly the backward ops on its keys.
// The checkers are written here, apart from the generators, and mutation tests
// show that they catch a ring source off by one and a recv into the wrong slot.
#include <algorithm>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/support/generate_support.hpp"
#include "sim/generate/ring_emitter.hpp"
#include "sim/placement/device_map.hpp"
#include "sim/schedule/validate.hpp"

namespace rm::generate {
namespace {

using schedule::Access;
using schedule::Buffer;
using schedule::BufferRole;
using schedule::Op;
using schedule::OpId;
using schedule::OpKind;
using schedule::Schedule;

std::vector<int64_t> tokens_of(const schedule::TokenSet& t) {
  std::vector<int64_t> out;
  for (const auto& r : t.runs)
    for (int64_t c = 0; c < r.count; ++c)
      for (int64_t i = 0; i < r.len; ++i) out.push_back(r.begin + c * r.stride + i);
  return out;
}

// (d, h, t) of every rank: which context group (hence which sequence and heads) it serves.
std::vector<int> context_group_of(const Experiment& e) {
  const Parallel& p = e.parallel;
  placement::DeviceMap map(p);
  std::vector<int> g(size_t(p.world()));
  for (int d = 0; d < p.dp; ++d)
    for (int h = 0; h < p.hp; ++h)
      for (int c = 0; c < p.cp; ++c)
        for (int t = 0; t < p.tp; ++t) g[size_t(map.gpu(d, h, c, t))] = (d * p.hp + h) * p.tp + t;
  return g;
}

bool is_attention(OpKind k) { return k == OpKind::attn_fwd || k == OpKind::attn_bwd; }

// ---- coverage --------------------------------------------------------------

std::vector<std::string> coverage_problems(const Schedule& s, const Experiment& e, const sparsity::SparsityModel& m) {
  const bool causal = m.causal();
  std::vector<std::string> out;
  const int64_t S = e.workload.seq_len;
  const auto group = context_group_of(e);
  struct Pass {
    std::vector<uint8_t> hits;
    int heads = 0, kv_begin = 0, kv_heads = 0;
  };
  std::map<std::tuple<int, int, int, int>, Pass> passes;  // (group, layer, phase, head_begin)
  for (const Op& op : s.ops) {
    if (!is_attention(op.kind)) continue;
    const schedule::Attention* a = s.attention_of(op);
    if (!a) {
      out.push_back(schedule::describe(s, op.id) + ": no attention descriptor");
      continue;
    }
    Pass& p = passes[{group[size_t(op.rank)], op.layer, int(op.phase), a->head_begin}];
    if (p.hits.empty()) p = {std::vector<uint8_t>(size_t(S * S), 0), a->heads, a->kv_head_begin, a->kv_heads};
    if (p.heads != a->heads || p.kv_begin != a->kv_head_begin || p.kv_heads != a->kv_heads)
      out.push_back(schedule::describe(s, op.id) + ": head ranges differ within a pass");
    const auto q = tokens_of(s.token_sets[size_t(a->q_tokens)]);
    const auto k = tokens_of(s.token_sets[size_t(a->kv_tokens)]);
    int64_t allowed = 0;
    for (int64_t qi : q)
      for (int64_t ki : k)
        if (!causal || ki <= qi) ++allowed, ++p.hits[size_t(qi * S + ki)];
    const int64_t all = int64_t(q.size() * k.size());
    const schedule::Mask want = allowed == all ? schedule::Mask::full
                                : allowed == 0 ? schedule::Mask::empty
                                               : schedule::Mask::causal;
    if (a->mask != want)
      out.push_back(fmt::format("{}: mask {}, but {} of {} pairs are allowed", schedule::describe(s, op.id),
                                schedule::to_string(a->mask), allowed, all));
  }
  // Every head rank's heads, and the KV heads they need under GQA.
  std::map<std::tuple<int, int, int>, std::vector<int>> head_begins;  // ((d, t), layer, phase) -> head_begin
  const int per_kv = e.model.heads / e.model.kv_heads;
  const int hp = e.parallel.hp, tp = e.parallel.tp;
  for (auto& [key, p] : passes) {
    auto [g, layer, phase, head_begin] = key;
    head_begins[{g / (hp * tp) * tp + g % tp, layer, phase}].push_back(head_begin);
    if (p.kv_begin != head_begin / per_kv || p.kv_begin + p.kv_heads != (head_begin + p.heads - 1) / per_kv + 1)
      out.push_back(fmt::format("heads [{}, {}) name KV heads [{}, {})", head_begin, head_begin + p.heads, p.kv_begin,
                                p.kv_begin + p.kv_heads));
    if (p.heads != e.model.heads / (hp * tp)) out.push_back(fmt::format("a head rank with {} heads", p.heads));
    int64_t missed = 0, twice = 0;
    for (int64_t qi = 0; qi < S; ++qi)
      for (int64_t ki = 0; ki < (causal ? qi + 1 : S); ++ki) {
        const uint8_t n = p.hits[size_t(qi * S + ki)];
        missed += n == 0;
        twice += n > 1;
      }
    if (missed || twice)
      out.push_back(fmt::format("group {} layer {} phase {} heads from {}: {} pairs missed, {} computed twice", g,
                                layer, phase, head_begin, missed, twice));
  }
  for (auto& [key, begins] : head_begins)
    if (int(begins.size()) != e.parallel.hp) out.push_back(fmt::format("{} head ranks attend, not hp", begins.size()));
  if (passes.empty()) out.push_back("no attention ops");
  return out;
}

// ---- happens-before ----------------------------------------------------------

// Ops as events: a send and its recv are one transfer, a collective call one
// event; an event happens after its dependencies and after the previous launch
// of each of its streams (ops joined to a launch start with it).
struct Events {
  std::vector<int> of;                // per op
  std::vector<std::vector<int>> ops;  // per event
  std::vector<int> order;             // events in a topological order
  std::vector<std::vector<uint64_t>> before;  // before[e]: bitset of events that end before e starts
  bool precedes(int a, int b) const { return (before[size_t(b)][size_t(a) / 64] >> (a % 64)) & 1; }
  bool ordered(int a, int b) const { return precedes(a, b) || precedes(b, a); }
};

Events events_of(const Schedule& s) {
  const size_t n = s.ops.size();
  std::vector<int> parent(n);
  for (size_t i = 0; i < n; ++i) parent[i] = int(i);
  auto find = [&](int x) {
    while (parent[size_t(x)] != x) x = parent[size_t(x)] = parent[size_t(parent[size_t(x)])];
    return x;
  };
  auto unite = [&](int a, int b) { parent[size_t(find(a))] = find(b); };
  // Matching, written afresh: the k-th send A->B with tag t meets the k-th recv on B from A
  // with tag t; the k-th op of each member on (group, tag) is the k-th call.
  std::map<std::tuple<int, int, int64_t>, std::vector<OpId>> sends, recvs;
  std::map<std::tuple<int, int64_t, int>, std::vector<OpId>> member_ops;  // (group, tag, rank)
  for (const Op& op : s.ops) {
    if (op.kind == OpKind::send) sends[{op.rank, op.peer, op.tag}].push_back(op.id);
    if (op.kind == OpKind::recv) recvs[{op.peer, op.rank, op.tag}].push_back(op.id);
    if (schedule::is_collective(op.kind)) member_ops[{op.group, op.tag, op.rank}].push_back(op.id);
  }
  for (auto& [key, ids] : sends) {
    const auto& r = recvs[key];
    for (size_t i = 0; i < ids.size() && i < r.size(); ++i) unite(int(ids[i]), int(r[i]));
  }
  for (auto& [key, ids] : member_ops) {
    const int leader_rank = s.groups[size_t(std::get<0>(key))].ranks.front();
    const auto& lead = member_ops[{std::get<0>(key), std::get<1>(key), leader_rank}];
    for (size_t i = 0; i < ids.size() && i < lead.size(); ++i) unite(int(ids[i]), int(lead[i]));
  }
  Events ev;
  ev.of.resize(n);
  std::map<int, int> index;
  for (size_t i = 0; i < n; ++i) {
    auto [it, fresh] = index.try_emplace(find(int(i)), int(ev.ops.size()));
    if (fresh) ev.ops.emplace_back();
    ev.of[i] = it->second;
    ev.ops[size_t(it->second)].push_back(int(i));
  }
  const size_t m = ev.ops.size();
  std::vector<std::set<int>> preds(m);
  std::map<std::pair<int, int>, std::vector<int>> launch, prev_launch;  // per stream: the current and previous launch
  for (const Op& op : s.ops) {
    const int e = ev.of[size_t(op.id)];
    for (OpId d : op.deps) preds[size_t(e)].insert(ev.of[size_t(d)]);
    auto key = std::make_pair(op.rank, op.stream);
    if (!op.joined) prev_launch[key] = std::move(launch[key]), launch[key].clear();
    launch[key].push_back(e);
    for (int p : prev_launch[key]) preds[size_t(e)].insert(p);
  }
  // Kahn's order, then ancestors as bitsets.
  std::vector<std::vector<int>> succ(m);
  std::vector<int> indeg(m, 0);
  for (size_t e = 0; e < m; ++e)
    for (int p : preds[e])
      if (p != int(e)) succ[size_t(p)].push_back(int(e)), ++indeg[e];
  std::vector<int> ready;
  for (size_t e = 0; e < m; ++e)
    if (indeg[e] == 0) ready.push_back(int(e));
  while (!ready.empty()) {
    const int e = ready.back();
    ready.pop_back();
    ev.order.push_back(e);
    for (int x : succ[size_t(e)])
      if (--indeg[size_t(x)] == 0) ready.push_back(x);
  }
  const size_t words = (m + 63) / 64;
  ev.before.assign(m, std::vector<uint64_t>(words, 0));
  for (int e : ev.order)
    for (int p : preds[size_t(e)]) {
      if (p == e) continue;
      auto& b = ev.before[size_t(e)];
      const auto& bp = ev.before[size_t(p)];
      for (size_t w = 0; w < words; ++w) b[w] |= bp[w];
      b[size_t(p) / 64] |= uint64_t{1} << (p % 64);
    }
  return ev;
}

// ---- dataflow ------------------------------------------------------------------

// Which copies of a buffer an op uses (docs/schedule-format.md, `instances`).
class Copies {
 public:
  explicit Copies(const Schedule& s) : s_(s) {
    for (const Op& op : s.ops) {
      layers_ = std::max(layers_, op.layer + 1);
      if (const Access* a = s.access_of(op))
        for (const auto* list : {&a->reads, &a->writes})
          for (int b : *list)
            if (s.buffers[size_t(b)].instances == schedule::Instances::per_pass)
              pass_.try_emplace({b, op.layer, int(op.phase)}, int(pass_count_[b]++));
    }
  }
  std::vector<int> of(const Op& op, int b) const {
    switch (s_.buffers[size_t(b)].instances) {
      case schedule::Instances::one: return {-1};
      case schedule::Instances::per_pass: return {pass_.at({b, op.layer, int(op.phase)}) % 2};
      case schedule::Instances::per_layer: break;
    }
    if (op.layer >= 0) return {op.layer};
    std::vector<int> all;
    for (int l = 0; l < layers_; ++l) all.push_back(l);
    return all;
  }

 private:
  const Schedule& s_;
  int layers_ = 0;
  std::map<std::tuple<int, int, int>, int> pass_;  // (buffer, layer, phase) -> n-th pass using it
  std::map<int, size_t> pass_count_;
};

// Roles whose buffers may be read before anything writes them: the inputs a
// scope starts from (and weights, which the optimizer updates at the end).
bool may_start_filled(BufferRole r) {
  return r == BufferRole::q || r == BufferRole::kv || r == BufferRole::d_o || r == BufferRole::exchange ||
         r == BufferRole::activation || r == BufferRole::weight;
}

struct Use {
  int event;
  OpId op;
  bool write;
};

std::vector<std::string> dataflow_problems(const Schedule& s, const Events& ev) {
  std::vector<std::string> out;
  if (ev.order.size() != ev.ops.size()) return {"the events have a cycle"};
  const Copies copies(s);
  std::map<std::pair<int, int>, std::vector<Use>> uses;  // (buffer, copy)
  for (const Op& op : s.ops) {
    const Access* a = s.access_of(op);
    if (!a) {
      out.push_back(schedule::describe(s, op.id) + ": names no buffers");
      continue;
    }
    for (int side = 0; side < 2; ++side)
      for (int b : side == 0 ? a->reads : a->writes) {
        for (int copy : copies.of(op, b)) uses[{b, copy}].push_back({ev.of[size_t(op.id)], op.id, side == 1});
      }
  }
  std::vector<int> position(ev.ops.size());
  for (size_t i = 0; i < ev.order.size(); ++i) position[size_t(ev.order[i])] = int(i);
  for (auto& [key, list] : uses) {
    const Buffer& buf = s.buffers[size_t(key.first)];
    auto name = [&] { return fmt::format("buffer '{}' (rank {}, copy {})", buf.name, buf.rank, key.second); };
    std::sort(list.begin(), list.end(), [&](const Use& x, const Use& y) {
      return position[size_t(x.event)] < position[size_t(y.event)] ||
             (x.event == y.event && x.write < y.write);  // an op reads before it writes
    });
    // Weights gathered again hold the same values: a prefetch may overlap their readers.
    if (buf.role != BufferRole::weight)
      for (const Use& w : list) {
        if (!w.write) continue;
        for (const Use& x : list)
          if (x.event != w.event && !ev.ordered(w.event, x.event))
            out.push_back(fmt::format("{}: {} writes it while {} may {} it", name(), schedule::describe(s, w.op),
                                      schedule::describe(s, x.op), x.write ? "write" : "read"));
      }
    // In this order every access is ordered with every write, so a read sees the last write before it.
    const Use* last_write = nullptr;
    std::set<OpId> consumed;
    for (const Use& u : list) {
      if (u.write) {
        last_write = &u;
        continue;
      }
      if (last_write && last_write->event != u.event) consumed.insert(last_write->op);
      if (!last_write && !may_start_filled(buf.role))
        out.push_back(fmt::format("{}: {} reads it before anything writes it", name(), schedule::describe(s, u.op)));
    }
    for (const Use& u : list)
      if (u.write && s.ops[size_t(u.op)].kind == OpKind::recv && !consumed.count(u.op) &&
          buf.role != BufferRole::dkv)  // finished dK|dV are the attention's output
        out.push_back(fmt::format("{}: what {} received is never read", name(), schedule::describe(s, u.op)));
  }
  return out;
}

// ---- data: K|V and dK|dV followed through the transfers ---------------------------

std::vector<std::string> data_problems(const Schedule& s, const Experiment& e, const Events& ev) {
  std::vector<std::string> out;
  const auto group = context_group_of(e);
  std::vector<int> own(s.ranks.size(), -1);  // each rank's query token set
  for (const Op& op : s.ops)
    if (const auto* a = s.attention_of(op)) own[size_t(op.rank)] = a->q_tokens;
  // K|V: (context group, token set) a buffer holds; dK|dV: the backward ops summed into it.
  std::map<std::pair<int, int>, std::pair<int, int>> kv;
  std::map<std::pair<int, int>, std::vector<OpId>> dkv;
  const Copies copies(s);  // every buffer followed here has one copy per op
  auto inst = [&](const Op& op, int b) { return std::make_pair(b, copies.of(op, b).front()); };
  auto role = [&](int b) { return s.buffers[size_t(b)].role; };
  // A rank's finished dK|dV: every backward op of its group on its keys, once.
  std::map<std::tuple<int, int, int>, std::vector<OpId>> want;  // (group, layer, key set)
  for (const Op& op : s.ops)
    if (op.kind == OpKind::attn_bwd)
      want[{group[size_t(op.rank)], op.layer, s.attention_of(op)->kv_tokens}].push_back(op.id);
  auto check_finished = [&](const Op& op, int b) {
    if (role(b) != BufferRole::dkv) return;
    const auto& have = dkv[inst(op, b)];
    const auto& w = want[{group[size_t(op.rank)], op.layer, own[size_t(op.rank)]}];
    if (have != w)
      out.push_back(fmt::format("{}: leaves a dK|dV summed over {} backward ops, expected the {} on its keys",
                                schedule::describe(s, op.id), have.size(), w.size()));
  };
  for (int event : ev.order) {
    const auto& ops = ev.ops[size_t(event)];
    // A transfer: the recv gets what the send read.
    const Op* send = nullptr;
    for (int id : ops)
      if (s.ops[size_t(id)].kind == OpKind::send) send = &s.ops[size_t(id)];
    for (int id : ops) {
      const Op& op = s.ops[size_t(id)];
      const Access& a = *s.access_of(op);
      if (is_attention(op.kind)) {
        const auto* at = s.attention_of(op);
        for (int b : a.reads)  // Q holds the op's queries: [batch, tokens, heads, head_dim]
          if (role(b) == BufferRole::q && (s.buffers[size_t(b)].shape.at(1) != s.token_sets[size_t(at->q_tokens)].size() ||
                                           s.buffers[size_t(b)].shape.at(2) != at->heads))
            out.push_back(schedule::describe(s, op.id) + ": its Q buffer's shape disagrees with its tokens or heads");
        for (int b : a.reads)
          if (role(b) == BufferRole::kv || role(b) == BufferRole::kv_slot) {
            auto it = kv.find(inst(op, b));
            const auto named = std::make_pair(group[size_t(op.rank)], at->kv_tokens);
            const auto have = role(b) == BufferRole::kv ? std::make_pair(group[size_t(op.rank)], own[size_t(op.rank)])
                              : it != kv.end()           ? it->second
                                                         : std::make_pair(-1, -1);
            if (have != named)
              out.push_back(fmt::format("{}: reads the K|V of tokens {} (group {}), its descriptor says {}",
                                        schedule::describe(s, op.id), have.second, have.first, named.second));
          }
        for (int b : a.writes)
          if (role(b) == BufferRole::dkv || role(b) == BufferRole::dkv_slot) {
            dkv[inst(op, b)] = {op.id};
            check_finished(op, b);
          }
      }
      if (op.kind == OpKind::recv && send) {
        const Access& sa = *s.access_of(*send);
        const int to = a.writes.at(0);
        if (role(to) == BufferRole::kv_slot) {
          const int from = sa.reads.at(0);
          kv[inst(op, to)] = role(from) == BufferRole::kv ? std::make_pair(group[size_t(send->rank)], own[size_t(send->rank)])
                                                          : kv[inst(*send, from)];
        }
        if (role(to) == BufferRole::dkv_slot || role(to) == BufferRole::dkv) {
          std::vector<OpId> sum;
          for (int b : sa.reads) {
            const auto& part = dkv[inst(*send, b)];
            sum.insert(sum.end(), part.begin(), part.end());
          }
          std::sort(sum.begin(), sum.end());
          dkv[inst(op, to)] = sum;
          check_finished(op, to);
        }
      }
    }
  }
  return out;
}

std::string joined(const std::vector<std::string>& v, size_t at_most = 5) {
  std::string out;
  for (size_t i = 0; i < v.size() && i < at_most; ++i) out += v[i] + "\n";
  if (v.size() > at_most) out += fmt::format("... and {} more\n", v.size() - at_most);
  return out;
}

// ---- cases ---------------------------------------------------------------------------

struct Case {
  std::string name;
  std::vector<std::string> overrides;
  bool sparse = false, dynamic = false;
  std::string experiment = "";  // a shipped experiment, else the small default
  std::string mask = "";        // dense-full, document-causal, document-full; else dense causal or `sparse`
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }  // readable failures, no byte dump

sparsity::HeadPattern small_vertical_slash() {
  return sparsity::HeadPattern::vertical_slash(sparsity::IntervalSet({{0, 8}, {200, 204}}),
                                               sparsity::IntervalSet({{0, 32}, {100, 102}}));
}

testing::Generated generate_case(const Case& c) {
  std::vector<std::string> all{"workload.seq_len=512", "parallel.stripe_tokens=16", "model.layers=2"};
  all.insert(all.end(), c.overrides.begin(), c.overrides.end());
  Experiment e = c.experiment.empty()
                     ? testing::small_experiment(all)
                     : load_experiment(ConfigStore({std::string(RINGMASTER_SOURCE_DIR) + "/configs"}), c.experiment, all);
  const std::vector<int64_t> docs{0, 100, 300, 301};
  auto pattern = c.sparse                        ? small_vertical_slash()
                 : c.mask == "dense-full"        ? sparsity::HeadPattern::dense_full()
                 : c.mask == "document-causal"   ? sparsity::HeadPattern::document_causal(docs)
                 : c.mask == "document-full"     ? sparsity::HeadPattern::document_full(docs)
                                                 : sparsity::HeadPattern::dense_causal();
  return testing::generate(e, testing::model_of(e, pattern, c.dynamic));
}

const std::vector<Case> kCases{
    {"local_step", {"scope=step"}},
    {"ulysses_layer_selective", {"parallel.hp=4", "scope=layer", "parallel.checkpoint=selective"}},
    {"ring_contiguous_fwd_bwd", {"parallel.cp=4", "scope=attention_fwd_bwd"}},
    {"ring_zigzag_layer_full", {"parallel.cp=4", "parallel.partition=zigzag", "scope=layer", "parallel.checkpoint=full"}},
    {"ring_stripe_dynamic_layer",
     {"parallel.cp=4", "parallel.partition=stripe", "scope=layer", "parallel.checkpoint=full"}, true, true},
    {"ring_balanced_sparse_fwd_bwd", {"parallel.cp=4", "parallel.partition=balanced", "scope=attention_fwd_bwd"}, true},
    {"hierarchical_fwd_bwd",
     {"parallel.cp=16", "parallel.partition=stripe", "parallel.ring=hierarchical", "scope=attention_fwd_bwd"}},
    {"double_ring_interleaved_fwd_bwd",
     {"parallel.cp=8", "parallel.ring=double_ring", "parallel.window=2", "parallel.placement=interleaved",
      "scope=attention_fwd_bwd"}},
    {"hierarchical_step_selective",
     {"parallel.cp=16", "parallel.partition=stripe", "parallel.ring=hierarchical", "scope=step",
      "parallel.checkpoint=selective"}},
    {"double_ring_step_full",
     {"parallel.cp=8", "parallel.ring=double_ring", "parallel.window=2", "scope=step", "parallel.checkpoint=full",
      "model.layers=3"}},
    {"2d_double_ring_layer",
     {"parallel.hp=2", "parallel.cp=4", "parallel.ring=double_ring", "parallel.window=2", "parallel.partition=zigzag",
      "scope=layer", "parallel.checkpoint=selective"}},
    {"2d_stripe_dp2_step_zero1",
     {"parallel.dp=2", "parallel.hp=2", "parallel.cp=2", "parallel.partition=stripe", "scope=step",
      "parallel.zero_stage=1", "model.layers=1"}},
    {"dp4_step_zero3", {"parallel.dp=4", "scope=step", "parallel.zero_stage=3"}},
    {"ring_zigzag_pairs_once_fwd_bwd",
     {"parallel.cp=4", "parallel.partition=zigzag", "parallel.ring_order=zigzag_pairs", "parallel.shuffle=once",
      "scope=attention_fwd_bwd"}},
    {"ring_topology_order_zigzag_per_call_layer",
     {"parallel.cp=16", "parallel.partition=zigzag", "parallel.ring_order=topology", "scope=layer"}},
    {"stripe_bf16_grads_dynamic_layer",
     {"parallel.cp=4", "parallel.partition=stripe", "parallel.grad_comm_dtype=bf16", "scope=layer",
      "parallel.checkpoint=full"}, true, true},
    // Full and document masks: every op of a full mask is `full`, none is causally empty.
    {"full_zigzag_fwd_bwd", {"parallel.cp=4", "parallel.partition=zigzag", "scope=attention_fwd_bwd"}, false, false, "",
     "dense-full"},
    {"full_hierarchical_layer",
     {"parallel.cp=16", "parallel.partition=stripe", "parallel.ring=hierarchical", "scope=layer"}, false, false, "",
     "dense-full"},
    {"document_causal_balanced_fwd_bwd", {"parallel.cp=4", "parallel.partition=balanced", "scope=attention_fwd_bwd"},
     false, false, "", "document-causal"},
    {"document_full_double_ring_fwd_bwd",
     {"parallel.cp=8", "parallel.ring=double_ring", "parallel.window=2", "scope=attention_fwd_bwd"}, false, false, "",
     "document-full"},
    // Shipped experiments, made small.
    {"mtraining_default_layer", {"scope=layer", "parallel.cp=16", "workload.seq_len=1024"}, true, true,
     "mtraining-qwen2.5-3b-512k"},
    {"loongtrain_layer", {"scope=layer", "parallel.hp=4", "workload.seq_len=512"}, false, false,
     "loongtrain-llama2-7b-1m"},
    // Tensor parallelism: each tensor rank's rings over its own heads.
    {"tp2_zigzag_layer_full", {"parallel.tp=2", "parallel.cp=4", "parallel.partition=zigzag", "scope=layer"}},
    {"tp2_2d_double_ring_step_selective",
     {"parallel.tp=2", "parallel.hp=2", "parallel.cp=2", "parallel.ring=double_ring", "parallel.window=2",
      "scope=step", "parallel.checkpoint=selective", "model=llama2-7b-gqa"}},
    {"tp2_stripe_dynamic_layer", {"parallel.tp=2", "parallel.cp=4", "parallel.partition=stripe", "scope=layer"},
     true, true},
};

class Dataflow : public ::testing::TestWithParam<Case> {};

// One test per case (the three oracles share the generated Schedule).
TEST_P(Dataflow, CoversTheMaskOnceAndMovesEveryBufferSafely) {
  auto g = generate_case(GetParam());
  EXPECT_TRUE(schedule::check(g.s).empty());
  auto coverage = coverage_problems(g.s, g.e, g.m);
  EXPECT_TRUE(coverage.empty()) << "coverage:\n" << joined(coverage);
  const Events ev = events_of(g.s);
  auto flow = dataflow_problems(g.s, ev);
  EXPECT_TRUE(flow.empty()) << "dataflow:\n" << joined(flow);
  auto data = data_problems(g.s, g.e, ev);
  EXPECT_TRUE(data.empty()) << "data:\n" << joined(data);
}

INSTANTIATE_TEST_SUITE_P(Generators, Dataflow, ::testing::ValuesIn(kCases),
                         [](const auto& param_info) { return param_info.param.name; });

// ---- the checkers catch what they are for ---------------------------------------------

// Points `op` at a copy of its access with `from` replaced by `to`.
void redirect(Schedule& s, OpId op, int from, int to) {
  Access a = *s.access_of(s.ops[size_t(op)]);
  for (auto* list : {&a.reads, &a.writes}) std::replace(list->begin(), list->end(), from, to);
  s.accesses.push_back(a);
  rm::testing::edit_desc(s, s.ops[size_t(op)]).access = int32_t(s.accesses.size() - 1);
}

bool writes(const Schedule& s, const Op& op, int b) {
  const Access* a = s.access_of(op);
  return a && std::find(a->writes.begin(), a->writes.end(), b) != a->writes.end();
}

int buffer_named(const Schedule& s, int rank, const std::string& name) {
  for (const Buffer& b : s.buffers)
    if (b.rank == rank && b.name == name) return b.id;
  return -1;
}

TEST(DataflowCheckers, CatchARingSourceOffByOne) {
  auto g = generate_case(kCases[2]);  // ring of 4, forward and backward
  auto ok = coverage_problems(g.s, g.e, g.m);
  ASSERT_TRUE(ok.empty()) << joined(ok);
  // Rank 3 at step 1 claims the keys of the rank one further back (its step 2 source).
  for (Op& op : g.s.ops)
    if (op.kind == OpKind::attn_fwd && op.rank == 3 && op.step == 1) {
      schedule::Attention a = *g.s.attention_of(op);
      for (const Op& other : g.s.ops)
        if (other.kind == OpKind::attn_fwd && other.rank == 3 && other.step == 2)
          a.kv_tokens = g.s.attention_of(other)->kv_tokens;
      g.s.attentions.push_back(a);
      rm::testing::edit_desc(g.s, op).detail = int32_t(g.s.attentions.size() - 1);
    }
  EXPECT_FALSE(coverage_problems(g.s, g.e, g.m).empty());
  EXPECT_FALSE(data_problems(g.s, g.e, events_of(g.s)).empty());
}

TEST(DataflowCheckers, CatchARecvIntoTheWrongSlot) {
  auto g = generate_case(kCases[2]);
  const int slot0 = buffer_named(g.s, 2, "kv.inner0"), slot1 = buffer_named(g.s, 2, "kv.inner1");
  ASSERT_GE(slot0, 0);
  ASSERT_GE(slot1, 0);
  for (const Op& op : g.s.ops)
    if (op.kind == OpKind::recv && op.rank == 2 && op.step == 1 && writes(g.s, op, slot1)) {
      redirect(g.s, op.id, slot1, slot0);  // step 1's recv lands on the K|V step 1 computes on
      break;
    }
  const Events ev = events_of(g.s);
  EXPECT_FALSE(dataflow_problems(g.s, ev).empty());
  EXPECT_FALSE(data_problems(g.s, g.e, ev).empty());
}

TEST(DataflowCheckers, CatchADkvPartialLeftOut) {
  auto g = generate_case(kCases[2]);
  for (const Op& op : g.s.ops)
    if (op.kind == OpKind::send && op.rank == 3 && op.step == 2 && op.tag == kTagDkvInner) {
      Access a = *g.s.access_of(op);
      a.reads.resize(1);  // sends its own partial without what came with the block
      g.s.accesses.push_back(a);
      rm::testing::edit_desc(g.s, g.s.ops[size_t(op.id)]).access = int32_t(g.s.accesses.size() - 1);
    }
  EXPECT_FALSE(data_problems(g.s, g.e, events_of(g.s)).empty());
}

}  // namespace
}  // namespace rm::generate
