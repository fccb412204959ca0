#include "runtime/index_building.hpp"

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "kernels/bf16.hpp"
#include "runtime/pattern_index.hpp"
#include "runtime/seed.hpp"
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
    if (e.workload.batch != 1)
      fail(s, op.id, fmt::format("the runtime builds a sparse index for batch 1 only (the kernels take one index per "
                                 "head); this Schedule has batch {}", e.workload.batch));
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

// Rows [head][Q][D] of the last queries from a Q-like buffer (batch 1).
std::vector<float> last_rows(std::span<const std::byte> q, const Layout& l, int64_t S, int64_t D) {
  const auto* x = reinterpret_cast<const bf16_bits*>(q.data());
  const int64_t H = int64_t(l.heads.size());
  std::vector<float> out(size_t(H * kQ * D), 0.f);
  for (size_t t = 0; t < l.tokens.size(); ++t) {
    const int64_t r = int64_t(l.tokens[t]) - (S - kQ);
    if (r < 0 || r >= kQ) continue;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t from = l.row(0, 0, h, int64_t(t), 1) * D;
      for (int64_t d = 0; d < D; ++d) out[size_t((h * kQ + r) * D + d)] = kernels::from_bf16(x[from + d]);
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
  const auto rows = last_rows(store_.bytes(qb, in_.copy(bcast, qb)), *l_.of(qb), e_.workload.seq_len, e_.model.head_dim);
  std::vector<std::byte> out(size_t(op.bytes));
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
  const int64_t rows = H * kQ;
  switch (st) {
    case IndexStage::scores: {
      std::vector<float> q = pass.q_in >= 0 && !has_name(s_, a.reads, "index.last_q")
                                 ? last_rows(bytes(pass.q_in), *l_.of(pass.q_in), S, D)
                                 : read("index.last_q");
      const Layout& kl = *l_.of(pass.kv_in);
      const auto* kv = reinterpret_cast<const bf16_bits*>(bytes(pass.kv_in).data());
      const int group = e_.model.heads / std::max(1, e_.model.kv_heads);
      std::vector<float> qk(size_t(rows * N)), k(size_t(N * D));
      for (int64_t h = 0; h < H; ++h) {
        const int kvh = (pass.head_begin + int(h)) / group;
        const auto at = std::find(kl.heads.begin(), kl.heads.end(), kvh);
        if (at == kl.heads.end()) fail(s_, id, fmt::format("its K|V holds no KV head {}", kvh));
        const int64_t lh = at - kl.heads.begin();
        for (int64_t j = 0; j < N; ++j)
          for (int64_t d = 0; d < D; ++d) k[size_t(j * D + d)] = kernels::from_bf16(kv[kl.row(0, 0, lh, j, 1) * D + d]);
        alg::scores(std::span<const float>(q).subspan(size_t(h * kQ * D), size_t(kQ * D)), k, pass.kpos, S, int(D),
                    std::span<float>(qk).subspan(size_t(h * kQ * N), size_t(kQ * N)));
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
        for (int64_t h = 0; h < H; ++h)
          alg::normalize(std::span<float>(qk).subspan(size_t(h * kQ * N), size_t(kQ * N)), N,
                         std::span<const float>(gsum).subspan(size_t(h * kQ), size_t(kQ)));
        write("index.qk", qk);
      }
      std::vector<float> col(size_t(H * N));
      for (int64_t h = 0; h < H; ++h)
        alg::columns(std::span<const float>(qk).subspan(size_t(h * kQ * N), size_t(kQ * N)), N, pass.kpos, sel,
                     std::span<float>(col).subspan(size_t(h * N), size_t(N)));
      write("index.vertical", col);
      return;
    }
    case IndexStage::diagonals: {
      const auto qk = read("index.qk");
      const int64_t W = N + kQ - 1;
      std::vector<float> dia(size_t(H * W));
      for (int64_t h = 0; h < H; ++h)
        alg::diagonals(std::span<const float>(qk).subspan(size_t(h * kQ * N), size_t(kQ * N)), N, pass.kpos, sel,
                       std::span<float>(dia).subspan(size_t(h * W), size_t(W)));
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
      std::vector<int32_t> out(size_t(H * slots));
      for (int64_t h = 0; h < H; ++h) {
        std::vector<std::span<const float>> spans;
        std::vector<std::span<const int32_t>> kp;
        std::vector<int64_t> dmin;
        for (size_t c = 0; c < parts.size(); ++c) {
          const int64_t n = int64_t(keys[c].size()), w = v ? n : n + kQ - 1;
          spans.push_back(std::span<const float>(parts[c]).subspan(size_t(h * w), size_t(w)));
          kp.push_back(keys[c]);
          dmin.push_back(alg::diagonal_min(S, keys[c].empty() ? 0 : keys[c][0], n));
        }
        const auto pick = v ? alg::select_verticals(spans, kp, sl, pass.head_begin + int(h))
                            : alg::select_slashes(spans, dmin, sl, pass.head_begin + int(h));
        std::copy(pick.begin(), pick.end(), out.begin() + h * slots);
      }
      const int wb = a.writes.at(0);
      std::memcpy(bytes(wb).data(), out.data(), std::min(bytes(wb).size(), out.size() * 4));
      return;
    }
    case IndexStage::convert: {
      const int vb = find_name(s_, a.reads, "index.v"), sb = find_name(s_, a.reads, "index.s");
      const auto* v = reinterpret_cast<const int32_t*>(bytes(vb).data());
      const auto* sl = reinterpret_cast<const int32_t*>(bytes(sb).data());
      kernels::SparseIndex index;
      index.mode = kernels::SparseMode::vertical_slash;
      for (int64_t h = 0; h < H; ++h)
        index.vertical_slash.push_back(alg::to_vertical_slash({v + h * sel.v_slots, size_t(sel.v_slots)},
                                                              {sl + h * sel.s_slots, size_t(sel.s_slots)}, S));
      if (op.phase == schedule::Phase::forward) forward_[op.layer] = {pass.head_begin, index};
      if (built_)
        for (int b : a.writes)
          if (s_.buffers[size_t(b)].role == BufferRole::index) built_(b, in_.copy(id, b), pass.head_begin, index);
      return;
    }
    case IndexStage::passthrough: return;
  }
}

namespace {
void put(std::string& out, int32_t x) { out.append(reinterpret_cast<const char*>(&x), sizeof x); }
int32_t take(std::string_view& in) {
  int32_t x = 0;
  if (in.size() < sizeof x) throw std::runtime_error("built index: truncated message");
  std::memcpy(&x, in.data(), sizeof x);
  in.remove_prefix(sizeof x);
  return x;
}
std::vector<int32_t> take_list(std::string_view& in) {
  const int32_t n = take(in);
  if (n < 0 || size_t(n) > in.size() / sizeof(int32_t)) throw std::runtime_error("built index: bad list length");
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = take(in);
  return v;
}
}  // namespace

std::string IndexBuilding::packed_forward(int layer) const {
  auto it = forward_.find(layer);
  if (it == forward_.end()) return {};
  std::string out;
  put(out, it->second.first);
  put(out, int32_t(it->second.second.vertical_slash.size()));
  for (const auto& vs : it->second.second.vertical_slash) {
    put(out, int32_t(vs.verticals.size()));
    for (int32_t x : vs.verticals) put(out, x);
    put(out, int32_t(vs.slashes.size()));
    for (int32_t x : vs.slashes) put(out, x);
  }
  return out;
}

TensorCheck check_built_index(const kernels::SparseIndex& reference, const std::vector<std::string>& packed) {
  TensorCheck t;
  t.name = "index";
  int64_t heads = 0, wrong = 0;
  for (const std::string& msg : packed) {
    std::string_view in(msg);
    if (in.empty()) continue;
    const int32_t begin = take(in), n = take(in);
    for (int32_t h = 0; h < n; ++h) {
      kernels::VerticalSlash got;
      got.verticals = take_list(in);
      got.slashes = take_list(in);
      const auto& want = reference.vertical_slash.at(size_t(begin + h));
      ++heads;
      t.elements += int64_t(want.verticals.size() + want.slashes.size());
      t.max_ref = std::max(t.max_ref, double(want.verticals.size() + want.slashes.size()));
      wrong += got.verticals != want.verticals || got.slashes != want.slashes;
    }
  }
  if (heads == 0) throw std::runtime_error("built index: no rank reported one");
  t.max_rel_error = double(wrong) / double(heads);
  t.max_abs_error = double(wrong);
  t.bound = 0;
  return t;
}

kernels::SparseIndex reference_index(const schedule::Schedule& s, const Experiment& e, const Layouts& l,
                                     const schedule::CommMatching& m, uint64_t seed, int layer) {
  const IndexPlan p = plan_index_building(s, e, l, m);
  const int64_t S = e.workload.seq_len, D = e.model.head_dim;
  const int group = e.model.heads / std::max(1, e.model.kv_heads);
  // One forward pass of the layer per context group: the passes with the same heads, one per key range.
  std::map<int, std::map<int32_t, const IndexPlan::Pass*>> groups;  // head_begin -> first key -> pass
  for (const auto& [op, pass] : p.pass_of) {
    const schedule::Op& o = s.ops[size_t(op)];
    if (o.layer != layer || o.phase != schedule::Phase::forward) continue;
    const IndexPlan::Pass& x = p.passes[size_t(pass)];
    if (!x.kpos.empty()) groups[x.head_begin].try_emplace(x.kpos[0], &x);
  }
  alg::Selection sel = p.selection;
  if (!sel.top_p) std::tie(sel.v_budget, sel.s_budget) = p.budgets.at(layer);
  kernels::SparseIndex index;
  index.mode = kernels::SparseMode::vertical_slash;
  index.vertical_slash.resize(size_t(e.model.heads));
  for (const auto& [head_begin, members] : groups) {
    const int H = members.begin()->second->heads;
    for (int h = 0; h < H; ++h) {
      const int gh = head_begin + h;
      std::vector<float> q(size_t(kQ * D));
      for (int64_t r = 0; r < kQ; ++r)
        for (int64_t d = 0; d < D; ++d) q[size_t(r * D + d)] = input_value(seed, InputTensor::q, 0, S - kQ + r, gh, d);
      // Per member: scores, then the row statistics combined over members (top-p).
      std::vector<std::vector<float>> qk;
      for (const auto& [first, pass] : members) {
        const int64_t N = int64_t(pass->kpos.size());
        std::vector<float> k(size_t(N * D)), out(size_t(kQ * N));
        for (int64_t j = 0; j < N; ++j)
          for (int64_t d = 0; d < D; ++d)
            k[size_t(j * D + d)] = input_value(seed, InputTensor::k, 0, pass->kpos[size_t(j)], gh / group, d);
        alg::scores(q, k, pass->kpos, S, int(D), out);
        qk.push_back(std::move(out));
      }
      if (sel.top_p) {
        std::vector<float> maxes, sums;
        size_t c = 0;
        for (const auto& [first, pass] : members) {
          std::vector<float> mx(static_cast<size_t>(kQ));
          alg::row_max(qk[c++], int64_t(pass->kpos.size()), mx);
          maxes.insert(maxes.end(), mx.begin(), mx.end());
        }
        const auto gmax = alg::combine_max(maxes, kQ);
        c = 0;
        for (const auto& [first, pass] : members) {
          std::vector<float> sm(static_cast<size_t>(kQ));
          alg::exp_rows(qk[c++], int64_t(pass->kpos.size()), gmax, sm);
          sums.insert(sums.end(), sm.begin(), sm.end());
        }
        const auto gsum = alg::combine_sum(sums, kQ);
        c = 0;
        for (const auto& [first, pass] : members) alg::normalize(qk[c++], int64_t(pass->kpos.size()), gsum);
      }
      std::vector<std::vector<float>> cols, dias;
      std::vector<std::span<const int32_t>> kp;
      std::vector<int64_t> dmin;
      size_t c = 0;
      for (const auto& [first, pass] : members) {
        const int64_t N = int64_t(pass->kpos.size());
        std::vector<float> col(static_cast<size_t>(N)), dia(size_t(N + kQ - 1));
        alg::columns(qk[c], N, pass->kpos, sel, col);
        alg::diagonals(qk[c], N, pass->kpos, sel, dia);
        ++c;
        cols.push_back(std::move(col)), dias.push_back(std::move(dia));
        kp.push_back(pass->kpos);
        dmin.push_back(alg::diagonal_min(S, pass->kpos[0], N));
      }
      std::vector<std::span<const float>> cs(cols.begin(), cols.end()), ds(dias.begin(), dias.end());
      index.vertical_slash[size_t(gh)] =
          alg::to_vertical_slash(alg::select_verticals(cs, kp, sel, gh), alg::select_slashes(ds, dmin, sel, gh), S);
    }
  }
  return index;
}

}  // namespace rm::runtime
