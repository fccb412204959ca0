// Writing the Schedule file: ops are cut into segments (maximal runs of
// consecutive ids with one layer and phase); segments with the same structure
// share a template, and each segment stores only what differs from it.
#include <string>
#include <unordered_map>

#include <fmt/format.h>

#include "sim/schedule/schedule_error.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "traces/text_file.hpp"
#include "traces/trace_error.hpp"

namespace rm::schedule {

namespace {

using ojson = nlohmann::ordered_json;

struct Span {
  size_t first = 0, count = 0;
};

std::vector<Span> segments_of(const std::vector<Op>& ops) {
  std::vector<Span> out;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (out.empty() || ops[i].layer != ops[i - 1].layer || ops[i].phase != ops[i - 1].phase) out.push_back({i, 0});
    ++out.back().count;
  }
  return out;
}

bool inside(const Span& sp, OpId d) { return d >= static_cast<OpId>(sp.first) && d < static_cast<OpId>(sp.first + sp.count); }

// Everything a template fixes, as bytes: equal keys mean one template fits both.
std::string structure_key(const std::vector<Op>& ops, const Span& sp) {
  std::string k;
  auto put = [&k](int64_t v) { k.append(reinterpret_cast<const char*>(&v), sizeof v); };
  for (size_t i = sp.first; i < sp.first + sp.count; ++i) {
    const Op& op = ops[i];
    for (int64_t v : {int64_t{op.rank}, int64_t{op.stream}, int64_t(op.kind), int64_t{op.step}, int64_t{op.peer},
                      int64_t{op.group}, int64_t{op.joined}, static_cast<int64_t>(op.deps.size())})
      put(v);
    for (OpId d : op.deps) put(inside(sp, d) ? d - static_cast<OpId>(sp.first) : -1);
  }
  return k;
}

// A column is written as one value when every entry is equal.
template <class F>
ojson column(const std::vector<Op>& ops, const Span& sp, F field) {
  ojson first = field(ops[sp.first]);
  bool same = true;
  for (size_t i = sp.first + 1; i < sp.first + sp.count && same; ++i) same = field(ops[i]) == first;
  if (same) return first;
  ojson a = ojson::array();
  for (size_t i = sp.first; i < sp.first + sp.count; ++i) a.push_back(field(ops[i]));
  return a;
}

// The per-op columns a segment may override: costs and data descriptor ids.
struct CostColumns {
  ojson flops, blocks, tokens, bytes, tag, access, detail;
};

CostColumns costs(const Schedule& s, const Span& sp) {
  const auto& ops = s.ops;
  return {column(ops, sp, [&s](const Op& o) { return ojson(s.desc(o).flops); }),
          column(ops, sp, [&s](const Op& o) { return ojson(s.desc(o).blocks); }),
          column(ops, sp, [&s](const Op& o) { return ojson(s.desc(o).tokens); }),
          column(ops, sp, [&s](const Op& o) { return ojson(s.desc(o).bytes); }),
          column(ops, sp, [](const Op& o) { return ojson(o.tag); }),
          column(ops, sp, [&s](const Op& o) { return ojson(s.desc(o).access); }),
          column(ops, sp, [&s](const Op& o) { return ojson(s.desc(o).detail); })};
}

ojson template_json(const std::vector<Op>& ops, const Span& sp, const CostColumns& c) {
  ojson t;
  t["count"] = sp.count;
  t["rank"] = column(ops, sp, [](const Op& o) { return ojson(o.rank); });
  t["stream"] = column(ops, sp, [](const Op& o) { return ojson(o.stream); });
  t["kind"] = column(ops, sp, [](const Op& o) { return ojson(to_string(o.kind)); });
  t["step"] = column(ops, sp, [](const Op& o) { return ojson(o.step); });
  t["peer"] = column(ops, sp, [](const Op& o) { return ojson(o.peer); });
  t["group"] = column(ops, sp, [](const Op& o) { return ojson(o.group); });
  t["joined"] = column(ops, sp, [](const Op& o) { return ojson(o.joined ? 1 : 0); });
  ojson deps = ojson::array();
  for (size_t i = sp.first; i < sp.first + sp.count; ++i) {
    ojson d = ojson::array();
    for (OpId x : ops[i].deps) d.push_back(inside(sp, x) ? x - static_cast<OpId>(sp.first) : -1);
    deps.push_back(std::move(d));
  }
  t["deps"] = std::move(deps);
  t["flops"] = c.flops;
  t["blocks"] = c.blocks;
  t["tokens"] = c.tokens;
  t["bytes"] = c.bytes;
  t["tag"] = c.tag;
  t["access"] = c.access;
  t["detail"] = c.detail;
  return t;
}

// A table of n rows as one array per field.
template <class T, class F>
ojson table_column(const std::vector<T>& rows, F field) {
  ojson a = ojson::array();
  for (const T& r : rows) a.push_back(field(r));
  return a;
}

ojson buffers_json(const std::vector<Buffer>& b) {
  ojson j;
  j["count"] = b.size();
  j["rank"] = table_column(b, [](const Buffer& x) { return ojson(x.rank); });
  j["name"] = table_column(b, [](const Buffer& x) { return ojson(x.name); });
  j["role"] = table_column(b, [](const Buffer& x) { return ojson(to_string(x.role)); });
  j["dtype"] = table_column(b, [](const Buffer& x) { return ojson(to_string(x.dtype)); });
  j["shape"] = table_column(b, [](const Buffer& x) { return ojson(x.shape); });
  j["instances"] = table_column(b, [](const Buffer& x) { return ojson(to_string(x.instances)); });
  return j;
}

ojson attentions_json(const std::vector<Attention>& a) {
  ojson j;
  j["count"] = a.size();
  j["q_tokens"] = table_column(a, [](const Attention& x) { return ojson(x.q_tokens); });
  j["kv_tokens"] = table_column(a, [](const Attention& x) { return ojson(x.kv_tokens); });
  j["head_begin"] = table_column(a, [](const Attention& x) { return ojson(x.head_begin); });
  j["heads"] = table_column(a, [](const Attention& x) { return ojson(x.heads); });
  j["kv_head_begin"] = table_column(a, [](const Attention& x) { return ojson(x.kv_head_begin); });
  j["kv_heads"] = table_column(a, [](const Attention& x) { return ojson(x.kv_heads); });
  j["mask"] = table_column(a, [](const Attention& x) { return ojson(to_string(x.mask)); });
  j["index"] = table_column(a, [](const Attention& x) { return ojson(to_string(x.index)); });
  j["merge"] = table_column(a, [](const Attention& x) { return ojson(x.merge ? 1 : 0); });
  return j;
}

// A descriptor column that differs from its template: whole, or, when few ops
// differ (a layer's own residual-stream buffer), as `<key>_at: [[i, value], ...]`.
void put_descriptor_column(ojson& seg, const std::string& key, const ojson& mine, const ojson& theirs, size_t n) {
  if (mine == theirs) return;
  auto at = [](const ojson& c, size_t i) { return c.is_array() ? c[i] : c; };
  ojson diff = ojson::array();
  for (size_t i = 0; i < n; ++i)
    if (at(mine, i) != at(theirs, i)) diff.push_back({i, at(mine, i)});
  if (mine.is_array() && 4 * diff.size() < n) seg[key + "_at"] = std::move(diff);
  else seg[key] = mine;
}

}  // namespace

std::string to_schedule_json(const Schedule& s) {
  // One replica standing for all (ReplicaSymmetry) is the engines' shortcut, not a
  // Schedule to run or keep: files hold every rank.
  if (s.symmetry.replicas > 1)
    throw ScheduleError("a replica-symmetric Schedule (one replica of several) is not written to files");
  ojson j;
  j["format"] = "ringmaster.schedule";
  j["version"] = kScheduleFormatVersion;
  j["generator"] = s.generator;
  j["experiment"] = ojson::parse(s.experiment.dump());  // keys sorted, as nlohmann::json keeps them
  ojson ranks = ojson::array();
  for (const Rank& r : s.ranks) {
    ojson streams = ojson::array();
    for (const Stream& st : r.streams) streams.push_back({{"kind", to_string(st.kind)}, {"name", st.name}});
    ranks.push_back({{"gpu", r.gpu}, {"streams", std::move(streams)}});
  }
  j["ranks"] = std::move(ranks);
  ojson groups = ojson::array();
  for (const Group& g : s.groups) groups.push_back({{"name", g.name}, {"ranks", g.ranks}});
  j["groups"] = std::move(groups);
  j["buffers"] = buffers_json(s.buffers);
  ojson sets = ojson::array();
  for (const TokenSet& t : s.token_sets) {
    ojson runs = ojson::array();
    for (const TokenRun& r : t.runs) runs.push_back({r.begin, r.len, r.stride, r.count});
    sets.push_back(std::move(runs));
  }
  j["token_sets"] = std::move(sets);
  ojson accesses = ojson::array();
  for (const Access& a : s.accesses) accesses.push_back({a.reads, a.writes});
  j["accesses"] = std::move(accesses);
  j["attentions"] = attentions_json(s.attentions);
  ojson gemms = ojson::array();
  for (const Gemm& g : s.gemms) gemms.push_back({g.m, g.n, g.k});
  j["gemms"] = std::move(gemms);
  j["op_count"] = s.ops.size();

  ojson templates = ojson::array(), segments = ojson::array();
  std::unordered_map<std::string, size_t> by_key;
  std::vector<CostColumns> template_costs;
  for (const Span& sp : segments_of(s.ops)) {
    CostColumns c = costs(s, sp);
    auto [it, fresh] = by_key.try_emplace(structure_key(s.ops, sp), templates.size());
    if (fresh) {
      templates.push_back(template_json(s.ops, sp, c));
      template_costs.push_back(c);
    }
    const Op& first = s.ops[sp.first];
    ojson seg;
    seg["template"] = it->second;
    seg["first"] = sp.first;
    seg["layer"] = first.layer;
    seg["phase"] = to_string(first.phase);
    ojson outside = ojson::array();
    for (size_t i = sp.first; i < sp.first + sp.count; ++i)
      for (OpId d : s.ops[i].deps)
        if (!inside(sp, d)) outside.push_back({i - sp.first, d});
    if (!outside.empty()) seg["outside_deps"] = std::move(outside);
    const CostColumns& t = template_costs[it->second];
    if (c.flops != t.flops) seg["flops"] = c.flops;
    if (c.blocks != t.blocks) seg["blocks"] = c.blocks;
    if (c.tokens != t.tokens) seg["tokens"] = c.tokens;
    if (c.bytes != t.bytes) seg["bytes"] = c.bytes;
    if (c.tag != t.tag) seg["tag"] = c.tag;
    put_descriptor_column(seg, "access", c.access, t.access, sp.count);
    put_descriptor_column(seg, "detail", c.detail, t.detail, sp.count);
    segments.push_back(std::move(seg));
  }
  j["templates"] = std::move(templates);
  j["segments"] = std::move(segments);
  return j.dump() + "\n";
}

void write_schedule(const Schedule& s, const std::string& path) {
  try {
    traces::write_text_file_atomic(path, to_schedule_json(s));
  } catch (const traces::TraceError& e) {
    throw ScheduleError(e.what());
  }
}

std::string schedule_hash(const Schedule& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : to_schedule_json(s)) h = (h ^ c) * 0x100000001b3ull;
  return fmt::format("{:016x}", h);
}

}  // namespace rm::schedule
