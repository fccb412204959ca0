#include "runtime/index_building.hpp"

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "kernels/bf16.hpp"
#include "runtime/pattern_index.hpp"
#include "sim/schedule/schedule_error.hpp"
#include "sim/sparsity/sparsity_model.hpp"

namespace rm::runtime {

using schedule::BufferRole;
using schedule::OpId;
using schedule::OpKind;
using kernels::bf16_bits;
namespace alg = index_alg;

namespace {

constexpr int64_t kQ = alg::kLastQueries;

[[noreturn]] void fail(const schedule::Schedule& s, OpId op, const std::string& what) {
  throw schedule::ScheduleError(schedule::describe(s, op) + ": " + what);
}

const std::string& name_of(const schedule::Schedule& s, int b) { return s.buffers[size_t(b)].name; }

bool has_name(const schedule::Schedule& s, const std::vector<int>& ids, const std::string& name) {
  return std::any_of(ids.begin(), ids.end(), [&](int b) { return name_of(s, b) == name; });
}
int find_name(const schedule::Schedule& s, const std::vector<int>& ids, const std::string& name) {
  for (int b : ids)
    if (name_of(s, b) == name) return b;
  return -1;
}
int find_content(const schedule::Schedule& s, const Layouts& l, const std::vector<int>& ids, BufferRole content) {
  for (int b : ids)
    if (const Layout* x = l.of(b); x && x->content == content && s.buffers[size_t(b)].role != BufferRole::index_work)
      return b;
  return -1;
}

IndexStage classify(const schedule::Schedule& s, const schedule::Op& op) {
  const schedule::Access* a = s.access_of(op);
  if (!a) fail(s, op.id, "an index_build op without its buffers");
  const auto &r = a->reads, &w = a->writes;
  if (has_name(s, w, "index.vertical")) return IndexStage::columns;
  if (has_name(s, w, "index.sum")) return IndexStage::exp_sum;
  if (has_name(s, w, "index.qk")) return IndexStage::scores;
  if (has_name(s, w, "index.max")) return IndexStage::row_max;
  if (has_name(s, w, "index.slash")) return IndexStage::diagonals;
  if (has_name(s, w, "index.v.top") || (has_name(s, w, "index.v") && !has_name(s, r, "index.s")))
    return IndexStage::select_v;
  if (has_name(s, w, "index.s.top") || has_name(s, w, "index.s")) return IndexStage::select_s;
  if (has_name(s, r, "index.v") && has_name(s, r, "index.s")) return IndexStage::convert;
  const auto is_index = [&](int b) { return s.buffers[size_t(b)].role == BufferRole::index; };
  if (!r.empty() && std::all_of(r.begin(), r.end(), is_index) && std::all_of(w.begin(), w.end(), is_index))
    return IndexStage::passthrough;  // the block mask's sort, the backward's conversion: no data of their own
  fail(s, op.id, "its buffers match no stage of the index building (docs/runtime.md, \"Index building\")");
}


}  // namespace

bool writes_last_queries(const schedule::Schedule& s, const schedule::Op& op) {
  const schedule::Access* a = s.access_of(op);
  return op.kind == OpKind::broadcast && a && has_name(s, a->writes, "index.last_q");
}

IndexPlan plan_index_building(const schedule::Schedule& s, const Experiment& e, const Layouts& l,
                              const schedule::CommMatching& m) {
  IndexPlan p;
  // Heads of each (rank, layer, phase) from its attention ops.
  std::map<std::tuple<int, int, int>, std::pair<int, int>> heads;
  for (const auto& op : s.ops)
    if (const schedule::Attention* a = s.attention_of(op))
      heads.try_emplace({op.rank, op.layer, int(op.phase)}, a->head_begin, a->heads);
  std::map<std::tuple<int, int, int>, int> pass_index;
  int v_slots = 0, s_slots = 0;
  for (const auto& op : s.ops) {
    if (op.kind != OpKind::index_build) continue;
    const IndexStage st = classify(s, op);
    p.stage[op.id] = st;
    if (st == IndexStage::passthrough) continue;
    const auto key = std::tuple{op.rank, op.layer, int(op.phase)};
    auto [it, fresh] = pass_index.try_emplace(key, int(p.passes.size()));
    if (fresh) {
      auto h = heads.find(key);
      if (h == heads.end()) fail(s, op.id, "no attention op of its layer and phase on its rank says which heads it indexes");
      p.passes.push_back({h->second.first, h->second.second, {}, -1, -1});
    }
    p.pass_of[op.id] = it->second;
    const schedule::Access& a = *s.access_of(op);
    if (st == IndexStage::scores) {
      IndexPlan::Pass& pass = p.passes[size_t(it->second)];
      pass.kv_in = find_content(s, l, a.reads, BufferRole::kv);
      pass.q_in = find_content(s, l, a.reads, BufferRole::q);
      if (pass.kv_in < 0) fail(s, op.id, "the scores read no K|V buffer with a layout");
      if (pass.q_in < 0 && !has_name(s, a.reads, "index.last_q")) fail(s, op.id, "the scores read no queries");
      pass.kpos = l.of(pass.kv_in)->tokens;
      for (size_t i = 1; i < pass.kpos.size(); ++i)
        if (pass.kpos[i] != pass.kpos[0] + int32_t(i))
          fail(s, op.id, fmt::format("its keys ({}) are not one contiguous run: MTraining builds the index on the "
                                     "contiguous layout, before the per-call shuffle; export with parallel.shuffle = "
                                     "per_call (or a contiguous partition)", name_of(s, pass.kv_in)));
      const int qk = find_name(s, a.writes, "index.qk");
      p.kpos_of_buffer[qk] = pass.kpos;
    }
  }
  // Keys of the score vectors, following them from the qk buffer through the gathers.
  for (const auto& op : s.ops) {
    if (op.kind != OpKind::index_build || !p.stage.count(op.id)) continue;
    const IndexStage st = p.stage[op.id];
    const schedule::Access& a = *s.access_of(op);
    if (st == IndexStage::columns || st == IndexStage::diagonals) {
      const int qk = find_name(s, a.reads, "index.qk");
      const int out = find_name(s, a.writes, st == IndexStage::columns ? "index.vertical" : "index.slash");
      p.kpos_of_buffer[out] = p.kpos_of_buffer.at(qk);
    }
  }
  for (const auto& op : s.ops) {
    if (op.kind != OpKind::recv) continue;
    const schedule::Access* a = s.access_of(op);
    if (!a || a->writes.size() != 1) continue;
    const std::string& n = name_of(s, a->writes[0]);
    if (n.rfind("index.vertical.from", 0) != 0 && n.rfind("index.slash.from", 0) != 0) continue;
    const OpId send = m.partner[size_t(op.id)];
    const schedule::Access* sa = send >= 0 ? s.access_of(s.ops[size_t(send)]) : nullptr;
    if (!sa || sa->reads.size() != 1 || !p.kpos_of_buffer.count(sa->reads[0]))
      fail(s, op.id, "a gathered score vector whose sender's keys are unknown");
    p.kpos_of_buffer[a->writes[0]] = p.kpos_of_buffer.at(sa->reads[0]);
  }
  for (const auto& b : s.buffers) {
    if (b.name == "index.v") v_slots = int(b.shape.back());
    if (b.name == "index.s") s_slots = int(b.shape.back());
  }
  // The selection rule and, for static budgets, every head's budgets from the pattern.
  const nlohmann::json& pat = e.workload.pattern;
  alg::Selection& sel = p.selection;
  sel.top_p = pat.is_object() && pat.contains("top_p");
  sel.seq_len = e.workload.seq_len;
  sel.sink_tokens = pat.is_object() && pat.contains("sink_tokens") ? pat["sink_tokens"].get<int>() : 30;
  sel.local_diagonals = pat.is_object() && pat.contains("local_diagonals") ? pat["local_diagonals"].get<int>() : 100;
  sel.v_slots = v_slots, sel.s_slots = s_slots;
  if (!p.passes.empty() && !sel.top_p) {
    const sparsity::SparsityModel model = pattern_model(e);
    std::set<int> layers;
    for (const auto& op : s.ops)
      if (p.pass_of.count(op.id)) layers.insert(op.layer);
    for (int layer : layers) {
      auto& [v, sl] = p.budgets[layer];
      for (int h = 0; h < model.heads(); ++h) {
        v.push_back(model.head(layer, h).verticals().size());
        sl.push_back(model.head(layer, h).slash_offsets().size());
      }
    }
  }
  return p;
}

IndexBuilding::IndexBuilding(const schedule::Schedule& s, const Experiment& e, const Layouts& l,
                             const schedule::CommMatching& m, const BufferInstances& in, TensorStore& store)
    : s_(s), e_(e), l_(l), in_(in), store_(store), plan_(plan_index_building(s, e, l, m)) {}

namespace {

// A bf16 buffer as floats, and back.
std::vector<float> load_bf16(std::span<const std::byte> b) {
  std::vector<float> out(b.size() / 2);
  const auto* x = reinterpret_cast<const bf16_bits*>(b.data());
  for (size_t i = 0; i < out.size(); ++i) out[i] = kernels::from_bf16(x[i]);
  return out;
}
void store_bf16(std::span<const float> v, std::span<std::byte> b) {
  auto* x = reinterpret_cast<bf16_bits*>(b.data());
  for (size_t i = 0; i < v.size() && (i + 1) * 2 <= b.size(); ++i) x[i] = kernels::to_bf16(v[i]);
}

// Rows [batch][head][Q][D] of the last queries from a Q-like buffer.
std::vector<float> last_rows(std::span<const std::byte> q, const Layout& l, int64_t B, int64_t S, int64_t D) {
  const auto* x = reinterpret_cast<const bf16_bits*>(q.data());
  const int64_t H = int64_t(l.heads.size());
  std::vector<float> out(size_t(B * H * kQ * D), 0.f);
  for (size_t t = 0; t < l.tokens.size(); ++t) {
    const int64_t r = int64_t(l.tokens[t]) - (S - kQ);
    if (r < 0 || r >= kQ) continue;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t from = l.row(0, b, h, int64_t(t), B) * D;
        for (int64_t d = 0; d < D; ++d) out[size_t(((b * H + h) * kQ + r) * D + d)] = kernels::from_bf16(x[from + d]);
      }
  }
  return out;
}

}  // namespace

std::vector<std::byte> IndexBuilding::last_queries(OpId bcast) {
  const schedule::Op& op = s_.ops[size_t(bcast)];
  const schedule::Access& a = *s_.access_of(op);
  const int qb = find_content(s_, l_, a.reads, BufferRole::q);
  if (qb < 0) fail(s_, bcast, "the root of the last queries' broadcast reads no Q buffer with a layout");
  const auto rows = last_rows(store_.bytes(qb, in_.copy(bcast, qb)), *l_.of(qb), e_.workload.batch, e_.workload.seq_len,
                              e_.model.head_dim);
  std::vector<std::byte> out(size_t(s_.desc(op).bytes));
  store_bf16(rows, out);
  return out;
}

void IndexBuilding::run(OpId id) {
  const IndexStage st = plan_.stage.at(id);
  if (st == IndexStage::passthrough) return;
  const schedule::Op& op = s_.ops[size_t(id)];
  const schedule::Access& a = *s_.access_of(op);
  const IndexPlan::Pass& pass = plan_.passes[size_t(plan_.pass_of.at(id))];
  const alg::Selection& sel = plan_.selection;
  const int64_t H = pass.heads, N = int64_t(pass.kpos.size()), D = e_.model.head_dim, S = e_.workload.seq_len;
  // Every stage works on (batch, head) rows g = b x H + h: MTraining builds one index per batch element.
  const int64_t B = e_.workload.batch, G = B * H;
  auto bytes = [&](int b) { return store_.bytes(b, in_.copy(id, b)); };
  // `name`, or (cp = 1: no all-gather) `alone`.
  auto read = [&](const char* name, const char* alone = nullptr) {
    int b = find_name(s_, a.reads, name);
    if (b < 0 && alone) b = find_name(s_, a.reads, alone);
    if (b < 0) fail(s_, id, std::string("reads no ") + name);
    return load_bf16(bytes(b));
  };
  auto write = [&](const char* name, std::span<const float> v) {
    const int b = find_name(s_, a.writes, name);
    if (b < 0) fail(s_, id, std::string("writes no ") + name);
    store_bf16(v, bytes(b));
  };
  const int64_t rows = G * kQ;
  switch (st) {
    case IndexStage::scores: {
      std::vector<float> q = pass.q_in >= 0 && !has_name(s_, a.reads, "index.last_q")
                                 ? last_rows(bytes(pass.q_in), *l_.of(pass.q_in), B, S, D)
                                 : read("index.last_q");
      const Layout& kl = *l_.of(pass.kv_in);
      const auto* kv = reinterpret_cast<const bf16_bits*>(bytes(pass.kv_in).data());
      const int group = e_.model.heads / std::max(1, e_.model.kv_heads);
      std::vector<float> qk(size_t(rows * N)), k(size_t(N * D));
      for (int64_t g = 0; g < G; ++g) {
        const int64_t b = g / H, h = g % H;
        const int kvh = (pass.head_begin + int(h)) / group;
        const auto at = std::find(kl.heads.begin(), kl.heads.end(), kvh);
        if (at == kl.heads.end()) fail(s_, id, fmt::format("its K|V holds no KV head {}", kvh));
        const int64_t lh = at - kl.heads.begin();
        for (int64_t j = 0; j < N; ++j) {
          const bf16_bits* row = kv + kl.row(0, b, lh, j, B) * D;
          for (int64_t d = 0; d < D; ++d) k[size_t(j * D + d)] = kernels::from_bf16(row[d]);
        }
        alg::scores(std::span<const float>(q).subspan(size_t(g * kQ * D), size_t(kQ * D)), k, pass.kpos, S, int(D),
                    std::span<float>(qk).subspan(size_t(g * kQ * N), size_t(kQ * N)));
      }
      write("index.qk", qk);
      return;
    }
    case IndexStage::row_max: {
      const auto qk = read("index.qk");
      std::vector<float> mx(static_cast<size_t>(rows));
      alg::row_max(qk, N, mx);
      write("index.max", mx);
      return;
    }
    case IndexStage::exp_sum: {
      auto qk = read("index.qk");
      const auto gmax = alg::combine_max(read("index.max.all", "index.max"), rows);
      std::vector<float> sums(static_cast<size_t>(rows));
      alg::exp_rows(qk, N, gmax, sums);
      write("index.qk", qk);
      write("index.sum", sums);
      return;
    }
    case IndexStage::columns: {
      auto qk = read("index.qk");
      if (sel.top_p) {
        const auto gsum = alg::combine_sum(read("index.sum.all", "index.sum"), rows);
        for (int64_t g = 0; g < G; ++g)
          alg::normalize(std::span<float>(qk).subspan(size_t(g * kQ * N), size_t(kQ * N)), N,
                         std::span<const float>(gsum).subspan(size_t(g * kQ), size_t(kQ)));
        write("index.qk", qk);
      }
      std::vector<float> col(size_t(G * N));
      for (int64_t g = 0; g < G; ++g)
        alg::columns(std::span<const float>(qk).subspan(size_t(g * kQ * N), size_t(kQ * N)), N, pass.kpos, sel,
                     std::span<float>(col).subspan(size_t(g * N), size_t(N)));
      write("index.vertical", col);
      return;
    }
    case IndexStage::diagonals: {
      const auto qk = read("index.qk");
      const int64_t W = N + kQ - 1;
      std::vector<float> dia(size_t(G * W));
      for (int64_t g = 0; g < G; ++g)
        alg::diagonals(std::span<const float>(qk).subspan(size_t(g * kQ * N), size_t(kQ * N)), N, pass.kpos, sel,
                       std::span<float>(dia).subspan(size_t(g * W), size_t(W)));
      write("index.slash", dia);
      return;
    }
    case IndexStage::select_v:
    case IndexStage::select_s: {
      const bool v = st == IndexStage::select_v;
      std::vector<std::vector<float>> parts;
      std::vector<std::vector<int32_t>> keys;
      for (int b : a.reads) {
        parts.push_back(load_bf16(bytes(b)));
        keys.push_back(plan_.kpos_of_buffer.at(b));
      }
      alg::Selection sl = sel;
      if (!sel.top_p) std::tie(sl.v_budget, sl.s_budget) = plan_.budgets.at(op.layer);
      const int64_t slots = v ? sel.v_slots : sel.s_slots;
      std::vector<int32_t> out(size_t(G * slots));
      for (int64_t g = 0; g < G; ++g) {
        const int h = int(g % H);
        std::vector<std::span<const float>> spans;
        std::vector<std::span<const int32_t>> kp;
        std::vector<int64_t> dmin;
        for (size_t c = 0; c < parts.size(); ++c) {
          const int64_t n = int64_t(keys[c].size()), w = v ? n : n + kQ - 1;
          spans.push_back(std::span<const float>(parts[c]).subspan(size_t(g * w), size_t(w)));
          kp.push_back(keys[c]);
          dmin.push_back(alg::diagonal_min(S, keys[c].empty() ? 0 : keys[c][0], n));
        }
        const auto pick = v ? alg::select_verticals(spans, kp, sl, pass.head_begin + h)
                            : alg::select_slashes(spans, dmin, sl, pass.head_begin + h);
        std::copy(pick.begin(), pick.end(), out.begin() + g * slots);
      }
      const int wb = a.writes.at(0);
      std::memcpy(bytes(wb).data(), out.data(), std::min(bytes(wb).size(), out.size() * 4));
      return;
    }
    case IndexStage::convert: {
      const int vb = find_name(s_, a.reads, "index.v"), sb = find_name(s_, a.reads, "index.s");
      const auto* v = reinterpret_cast<const int32_t*>(bytes(vb).data());
      const auto* sl = reinterpret_cast<const int32_t*>(bytes(sb).data());
      std::vector<kernels::SparseIndex> index(static_cast<size_t>(B));  // per batch element, over the pass's heads
      for (int64_t g = 0; g < G; ++g) {
        kernels::SparseIndex& x = index[size_t(g / H)];
        x.mode = kernels::SparseMode::vertical_slash;
        x.vertical_slash.push_back(alg::to_vertical_slash({v + g * sel.v_slots, size_t(sel.v_slots)},
                                                          {sl + g * sel.s_slots, size_t(sel.s_slots)}, S));
      }
      if (op.phase == schedule::Phase::forward) forward_[op.layer] = {pass.head_begin, index};
      if (built_)
        for (int b : a.writes)
          if (s_.buffers[size_t(b)].role == BufferRole::index) built_(b, in_.copy(id, b), pass.head_begin, index);
      return;
    }
    case IndexStage::passthrough: return;
  }
}

void pack_built(int head_begin, const std::vector<kernels::SparseIndex>& per_batch, std::string& out) {
  auto put = [&](int32_t x) { out.append(reinterpret_cast<const char*>(&x), sizeof x); };
  put(head_begin);
  put(int32_t(per_batch.size()));
  put(int32_t(per_batch.empty() ? 0 : per_batch[0].vertical_slash.size()));
  for (const auto& index : per_batch)
    for (const auto& vs : index.vertical_slash) {
      put(int32_t(vs.verticals.size()));
      for (int32_t x : vs.verticals) put(x);
      put(int32_t(vs.slashes.size()));
      for (int32_t x : vs.slashes) put(x);
    }
}

void IndexBuilding::pack_forward(int layer, std::string& out) const {
  auto it = forward_.find(layer);
  if (it == forward_.end()) return;
  pack_built(it->second.first, it->second.second, out);
}

}  // namespace rm::runtime
