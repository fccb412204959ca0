// Reading the Schedule file (see schedule_write.cpp and docs/schedule-format.md):
// strict about structure, naming the file and JSON path of any fault; the
// Schedule's meaning is checked afterwards by validate().
#include <limits>

#include <fmt/format.h>

#include "sim/config/json_reader.hpp"
#include "sim/schedule/schedule_error.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "sim/schedule/validate.hpp"
#include "traces/text_file.hpp"
#include "traces/trace_error.hpp"

namespace rm::schedule {

namespace {

using nlohmann::json;

// A JSON path made into text only when an error names it: reading a column
// must not format one string per value (a 10^5-op template has 10^6 values).
struct At {
  std::string_view base;
  size_t i;
};
struct At2 {
  std::string_view base;
  size_t i, k;
};
std::string_view key_text(std::string_view k) { return k; }
std::string key_text(const At& k) { return fmt::format("{}[{}]", k.base, k.i); }
std::string key_text(const At2& k) { return fmt::format("{}[{}][{}]", k.base, k.i, k.k); }

// A column: `count` values, or one value standing for all of them.
template <class T, class Get>
std::vector<T> column(const JsonReader& r, std::string_view key, size_t count, Get get) {
  const json& v = r.value(key);
  std::vector<T> out;
  out.reserve(count);
  if (!v.is_array()) {
    out.assign(count, get(v, key));
    return out;
  }
  if (v.size() != count) r.fail(key, fmt::format("expected {} values (or one for all), got {}", count, v.size()));
  for (size_t i = 0; i < count; ++i) out.push_back(get(v[i], At{key, i}));
  return out;
}

auto integer_in(const JsonReader& r, int64_t min, int64_t max) {
  return [&r, min, max](const json& v, const auto& key) {
    if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > max)
      r.fail(key_text(key), fmt::format("expected an integer in [{}, {}], got {}", min, max, v.dump()));
    return v.get<int64_t>();
  };
}

auto non_negative_number(const JsonReader& r) {
  return [&r](const json& v, const auto& key) {
    if (!v.is_number() || v.get<double>() < 0)
      r.fail(key_text(key), fmt::format("expected a number >= 0, got {}", v.dump()));
    return v.get<double>();
  };
}

// An enum column's parser: `what` names the enum in the error.
template <class E>
auto enum_in(const JsonReader& r, std::optional<E> (*parse)(std::string_view), std::string_view what) {
  return [&r, parse, what](const json& v, const auto& key) {
    std::optional<E> e = v.is_string() ? parse(v.get_ref<const std::string&>()) : std::nullopt;
    if (!e) r.fail(key_text(key), fmt::format("unknown {} {}", what, v.dump()));
    return *e;
  };
}

constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
constexpr int64_t kMaxI64 = std::numeric_limits<int64_t>::max();

// A template's ops with their ids, layer and phase not yet set; outside deps as -1.
struct Template {
  std::vector<Op> ops;
  std::vector<double> flops;
  std::vector<int64_t> blocks, tokens, bytes, tag, access, detail;
};

Template read_template(const JsonReader& r) {
  const auto n = static_cast<size_t>(r.integer("count", 1, kMaxInt));
  auto rank = column<int64_t>(r, "rank", n, integer_in(r, 0, kMaxInt));
  auto stream = column<int64_t>(r, "stream", n, integer_in(r, 0, kMaxInt));
  auto kind = column<OpKind>(r, "kind", n, enum_in<OpKind>(r, parse_op_kind, "op kind"));
  auto step = column<int64_t>(r, "step", n, integer_in(r, -1, kMaxInt));
  auto peer = column<int64_t>(r, "peer", n, integer_in(r, -1, kMaxInt));
  auto group = column<int64_t>(r, "group", n, integer_in(r, -1, kMaxInt));
  auto joined = column<int64_t>(r, "joined", n, integer_in(r, 0, 1));
  const json& deps = r.value("deps");
  if (!deps.is_array() || deps.size() != n) r.fail("deps", fmt::format("expected an array of {} arrays", n));
  Template t;
  t.flops = column<double>(r, "flops", n, non_negative_number(r));
  t.blocks = column<int64_t>(r, "blocks", n, integer_in(r, 0, kMaxI64));
  t.tokens = column<int64_t>(r, "tokens", n, integer_in(r, 0, kMaxI64));
  t.bytes = column<int64_t>(r, "bytes", n, integer_in(r, 0, kMaxI64));
  t.tag = column<int64_t>(r, "tag", n, integer_in(r, std::numeric_limits<int64_t>::min(), kMaxI64));
  t.access = column<int64_t>(r, "access", n, integer_in(r, -1, kMaxInt));
  t.detail = column<int64_t>(r, "detail", n, integer_in(r, -1, kMaxInt));
  r.finish();
  t.ops.resize(n);
  for (size_t i = 0; i < n; ++i) {
    Op& op = t.ops[i];
    op.rank = static_cast<int>(rank[i]);
    op.stream = static_cast<int>(stream[i]);
    op.kind = kind[i];
    op.step = static_cast<int>(step[i]);
    op.peer = static_cast<int>(peer[i]);
    op.group = static_cast<int>(group[i]);
    op.joined = joined[i] != 0;
    const json& d = deps[i];
    if (!d.is_array()) r.fail(key_text(At{"deps", i}), "expected an array of local op indices");
    op.deps.reserve(d.size());
    const auto dep_in = integer_in(r, -1, static_cast<int64_t>(n) - 1);
    for (size_t k = 0; k < d.size(); ++k) op.deps.push_back(dep_in(d[k], At2{"deps", i, k}));
  }
  return t;
}

// A segment's descriptor column: its own (`key`), the template's with some
// entries replaced (`key_at`: [[op index, value], ...]), or the template's.
std::vector<int64_t> descriptor_column(const JsonReader& r, const std::string& key, size_t n,
                                       const std::vector<int64_t>& from_template) {
  if (r.has(key)) return column<int64_t>(r, key, n, integer_in(r, -1, kMaxInt));
  std::vector<int64_t> out = from_template;
  const std::string at = key + "_at";
  if (!r.has(at)) return out;
  const json& v = r.value(at);
  if (!v.is_array()) r.fail(at, "expected an array of [op index, value] pairs");
  for (size_t k = 0; k < v.size(); ++k) {
    auto where = fmt::format("{}[{}]", at, k);
    if (!v[k].is_array() || v[k].size() != 2) r.fail(where, "expected [op index, value]");
    const auto i = static_cast<size_t>(integer_in(r, 0, static_cast<int64_t>(n) - 1)(v[k][0], where));
    out[i] = integer_in(r, -1, kMaxInt)(v[k][1], where);
  }
  return out;
}

// Expands one segment into s.ops, marking the ids it covers.
void read_segment(const JsonReader& r, const std::vector<Template>& templates, Schedule& s,
                  std::vector<bool>& covered) {
  const auto& t = templates[static_cast<size_t>(r.integer("template", 0, static_cast<int64_t>(templates.size()) - 1))];
  const size_t n = t.ops.size();
  const auto first = static_cast<size_t>(r.integer("first", 0, kMaxI64));
  const int layer = static_cast<int>(r.integer("layer", -1, kMaxInt));
  const Phase phase = enum_in<Phase>(r, parse_phase, "phase")(r.value("phase"), "phase");
  auto flops = r.has("flops") ? column<double>(r, "flops", n, non_negative_number(r)) : t.flops;
  auto blocks = r.has("blocks") ? column<int64_t>(r, "blocks", n, integer_in(r, 0, kMaxI64)) : t.blocks;
  auto tokens = r.has("tokens") ? column<int64_t>(r, "tokens", n, integer_in(r, 0, kMaxI64)) : t.tokens;
  auto bytes = r.has("bytes") ? column<int64_t>(r, "bytes", n, integer_in(r, 0, kMaxI64)) : t.bytes;
  auto tag = r.has("tag") ? column<int64_t>(r, "tag", n, integer_in(r, std::numeric_limits<int64_t>::min(), kMaxI64))
                          : t.tag;
  auto access = descriptor_column(r, "access", n, t.access);
  auto detail = descriptor_column(r, "detail", n, t.detail);
  std::vector<std::pair<size_t, OpId>> outside;
  if (r.has("outside_deps")) {
    const json& o = r.value("outside_deps");
    if (!o.is_array()) r.fail("outside_deps", "expected an array of [op index, dependency id] pairs");
    for (size_t k = 0; k < o.size(); ++k) {
      auto key = fmt::format("outside_deps[{}]", k);
      if (!o[k].is_array() || o[k].size() != 2) r.fail(key, "expected [op index, dependency id]");
      outside.emplace_back(static_cast<size_t>(integer_in(r, 0, static_cast<int64_t>(n) - 1)(o[k][0], key)),
                           integer_in(r, std::numeric_limits<int64_t>::min(), kMaxI64)(o[k][1], key));
    }
  }
  r.finish();
  if (first > s.ops.size() || n > s.ops.size() - first)
    r.fail("first", fmt::format("ops {}..{} lie beyond op_count {}", first, first + n - 1, s.ops.size()));
  size_t next_outside = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<OpId>(first + i);
    if (covered[first + i])
      r.fail("first", fmt::format("op {}: duplicate id (this segment overlaps an earlier one)", id));
    covered[first + i] = true;
    Op op = t.ops[i];
    op.id = id;
    op.layer = layer;
    op.phase = phase;
    op.flops = flops[i];
    op.blocks = blocks[i];
    op.tokens = tokens[i];
    op.bytes = bytes[i];
    op.tag = tag[i];
    op.access = static_cast<int32_t>(access[i]);
    op.detail = static_cast<int32_t>(detail[i]);
    for (OpId& d : op.deps) {
      if (d >= 0) {
        d += static_cast<OpId>(first);
      } else {
        if (next_outside == outside.size() || outside[next_outside].first != i)
          r.fail("outside_deps", fmt::format("op {}: its outside dependencies are missing or out of order", id));
        d = outside[next_outside++].second;
      }
    }
    s.ops[first + i] = std::move(op);
  }
  if (next_outside != outside.size())
    r.fail("outside_deps", fmt::format("entry {} matches no outside dependency of the template", next_outside));
}

// A table stored as one array per field, each of `count` values (no shorthand).
template <class T, class Get>
std::vector<T> table_column(const JsonReader& r, std::string_view key, size_t count, Get get) {
  if (!r.value(key).is_array()) r.fail(key, fmt::format("expected an array of {} values", count));
  return column<T>(r, key, count, get);
}

std::vector<Buffer> read_buffers(const JsonReader& r) {
  const auto n = static_cast<size_t>(r.integer("count", 0, kMaxInt));
  auto rank = table_column<int64_t>(r, "rank", n, integer_in(r, 0, kMaxInt));
  auto name = table_column<std::string>(r, "name", n, [&r](const json& v, const auto& key) {
    if (!v.is_string()) r.fail(key_text(key), fmt::format("expected a string, got {}", v.dump()));
    return v.get<std::string>();
  });
  auto role = table_column<BufferRole>(r, "role", n, enum_in<BufferRole>(r, parse_buffer_role, "buffer role"));
  auto dtype = table_column<DType>(r, "dtype", n, enum_in<DType>(r, parse_dtype, "dtype"));
  auto shape = table_column<std::vector<int64_t>>(r, "shape", n, [&r](const json& v, const auto& key) {
    if (!v.is_array()) r.fail(key_text(key), fmt::format("expected an array of dimensions, got {}", v.dump()));
    std::vector<int64_t> dims;
    for (size_t k = 0; k < v.size(); ++k)
      dims.push_back(integer_in(r, 1, kMaxI64)(v[k], fmt::format("{}[{}]", key_text(key), k)));
    return dims;
  });
  auto instances = table_column<Instances>(r, "instances", n, enum_in<Instances>(r, parse_instances, "instances"));
  r.finish();
  std::vector<Buffer> out(n);
  for (size_t i = 0; i < n; ++i)
    out[i] = Buffer{static_cast<int>(i), static_cast<int>(rank[i]), std::move(name[i]), role[i], dtype[i],
                    std::move(shape[i]), instances[i]};
  return out;
}

std::vector<Attention> read_attentions(const JsonReader& r) {
  const auto n = static_cast<size_t>(r.integer("count", 0, kMaxInt));
  auto id_col = [&](std::string_view key) { return table_column<int64_t>(r, key, n, integer_in(r, 0, kMaxInt)); };
  auto q = id_col("q_tokens"), kv = id_col("kv_tokens"), hb = id_col("head_begin"), h = id_col("heads"),
       kvb = id_col("kv_head_begin"), kvh = id_col("kv_heads");
  auto mask = table_column<Mask>(r, "mask", n, enum_in<Mask>(r, parse_mask, "mask"));
  auto index = table_column<IndexSource>(r, "index", n, enum_in<IndexSource>(r, parse_index_source, "index source"));
  auto merge = table_column<int64_t>(r, "merge", n, integer_in(r, 0, 1));
  r.finish();
  std::vector<Attention> out(n);
  for (size_t i = 0; i < n; ++i)
    out[i] = Attention{int(q[i]), int(kv[i]), int(hb[i]), int(h[i]), int(kvb[i]), int(kvh[i]), mask[i], index[i],
                       merge[i] != 0};
  return out;
}

// An array of fixed-length integer rows, e.g. [[m, n, k], ...].
std::vector<std::vector<int64_t>> int_rows(const JsonReader& r, std::string_view key, size_t width, int64_t min) {
  const json& v = r.value(key);
  if (!v.is_array()) r.fail(key, fmt::format("expected an array of [{} integers]", width));
  std::vector<std::vector<int64_t>> out;
  for (size_t i = 0; i < v.size(); ++i) {
    auto k = fmt::format("{}[{}]", key, i);
    if (!v[i].is_array() || v[i].size() != width) r.fail(k, fmt::format("expected {} integers", width));
    std::vector<int64_t> row;
    for (size_t c = 0; c < width; ++c) row.push_back(integer_in(r, min, kMaxI64)(v[i][c], fmt::format("{}[{}]", k, c)));
    out.push_back(std::move(row));
  }
  return out;
}

std::vector<TokenSet> read_token_sets(const JsonReader& r) {
  const json& v = r.value("token_sets");
  if (!v.is_array()) r.fail("token_sets", "expected an array of token sets");
  std::vector<TokenSet> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& set = v[i];
    auto key = fmt::format("token_sets[{}]", i);
    if (!set.is_array()) r.fail(key, "expected an array of [begin, len, stride, count] runs");
    TokenSet t;
    for (size_t k = 0; k < set.size(); ++k) {
      auto rk = fmt::format("{}[{}]", key, k);
      if (!set[k].is_array() || set[k].size() != 4) r.fail(rk, "expected [begin, len, stride, count]");
      auto get = [&](size_t c, int64_t min) { return integer_in(r, min, kMaxI64)(set[k][c], fmt::format("{}[{}]", rk, c)); };
      t.runs.push_back(TokenRun{get(0, 0), get(1, 1), get(2, 0), get(3, 1)});
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<Access> read_accesses(const JsonReader& r) {
  const json& v = r.value("accesses");
  if (!v.is_array()) r.fail("accesses", "expected an array of [reads, writes]");
  std::vector<Access> out;
  for (size_t i = 0; i < v.size(); ++i) {
    auto key = fmt::format("accesses[{}]", i);
    if (!v[i].is_array() || v[i].size() != 2) r.fail(key, "expected [reads, writes] (two arrays of buffer ids)");
    Access a;
    for (size_t side = 0; side < 2; ++side) {
      const json& ids = v[i][side];
      auto sk = fmt::format("{}[{}]", key, side);
      if (!ids.is_array()) r.fail(sk, "expected an array of buffer ids");
      auto& list = side == 0 ? a.reads : a.writes;
      for (size_t k = 0; k < ids.size(); ++k)
        list.push_back(static_cast<int>(integer_in(r, 0, kMaxInt)(ids[k], fmt::format("{}[{}]", sk, k))));
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace

Schedule from_schedule_json(const json& j, const std::string& name) {
  JsonReader r(j, name);
  const std::string format = r.str("format");
  if (format != "ringmaster.schedule")
    r.fail("format", fmt::format("unknown format \"{}\", expected \"ringmaster.schedule\"", format));
  const int64_t version = r.integer("version", 0, kMaxI64);
  if (version == 1)
    r.fail("version", "version 1 is no longer read (it has no buffers): re-export it with `ringmaster schedule`");
  if (version != kScheduleFormatVersion)
    r.fail("version", fmt::format("unsupported schedule version {} (this build reads version {})", version,
                                  kScheduleFormatVersion));
  Schedule s;
  s.generator = r.str("generator");
  s.experiment = r.object("experiment").raw();
  for (const JsonReader& rr : r.objects("ranks")) {
    Rank rank{static_cast<int>(s.ranks.size()), static_cast<int>(rr.integer("gpu", 0, kMaxInt)), {}};
    for (const JsonReader& sr : rr.objects("streams")) {
      auto kind = enum_in<StreamKind>(sr, parse_stream_kind, "stream kind")(sr.value("kind"), "kind");
      rank.streams.push_back(Stream{static_cast<int>(rank.streams.size()), kind, sr.str("name")});
      sr.finish();
    }
    rr.finish();
    s.ranks.push_back(std::move(rank));
  }
  for (const JsonReader& gr : r.objects("groups")) {
    std::vector<int64_t> members = gr.int_list("ranks", 0, kMaxInt);
    s.groups.push_back(Group{static_cast<int>(s.groups.size()), {members.begin(), members.end()}, gr.str("name")});
    gr.finish();
  }
  s.buffers = read_buffers(r.object("buffers"));
  s.token_sets = read_token_sets(r);
  s.accesses = read_accesses(r);
  s.attentions = read_attentions(r.object("attentions"));
  for (const auto& g : int_rows(r, "gemms", 3, 1)) s.gemms.push_back(Gemm{g[0], g[1], g[2]});
  s.ops.resize(static_cast<size_t>(r.integer("op_count", 0, kMaxInt)));
  std::vector<Template> templates;
  for (const JsonReader& tr : r.objects("templates")) templates.push_back(read_template(tr));
  std::vector<bool> covered(s.ops.size(), false);
  for (const JsonReader& sr : r.objects("segments")) read_segment(sr, templates, s, covered);
  r.finish();
  for (size_t i = 0; i < covered.size(); ++i)
    if (!covered[i]) r.fail("segments", fmt::format("op {}: missing (no segment covers it; op_count is {})", i, covered.size()));
  return s;
}

Schedule read_schedule(const std::string& path) {
  std::string text;
  try {
    text = traces::read_text_file(path);
  } catch (const traces::TraceError& e) {
    throw ScheduleError(e.what());
  }
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    if (e.byte >= text.size())  // the parser ran out of input: say so plainly
      throw ScheduleError(fmt::format("{}: truncated file (JSON ends early, after {} bytes)", path, text.size()));
    throw ScheduleError(fmt::format("{}: not valid JSON ({})", path, e.what()));
  }
  Schedule s = from_schedule_json(j, path);
  validate(s, path);
  return s;
}

}  // namespace rm::schedule
