// Reading the Schedule file (see schedule_write.cpp and docs/schedule-format.md):
// strict about structure, naming the file and JSON path of any fault; the
// Schedule's meaning is checked afterwards by validate(). This is the reader
// over nlohmann's DOM, the one that names faults; parse_schedule_text first
// tries the one-pass reader (schedule_sax.hpp), which takes the same files.
#include <algorithm>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "sim/config/json_reader.hpp"
#include "sim/schedule/schedule_error.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "sim/schedule/schedule_read_parts.hpp"
#include "sim/schedule/schedule_sax.hpp"
#include "sim/schedule/validate.hpp"
#include "traces/json_text.hpp"
#include "traces/text_file.hpp"
#include "traces/trace_error.hpp"

namespace rm::schedule {

namespace {

using nlohmann::json;
using namespace read_parts;

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
  if (!v.is_array()) {
    out.assign(count, get(v, key));
    return out;
  }
  // The size check comes first: `count` is what the file claims, the array is what it holds.
  if (v.size() != count) r.fail(key, fmt::format("expected {} values (or one for all), got {}", count, v.size()));
  out.reserve(count);
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

auto flops_in(const JsonReader& r) {
  return [&r](const json& v, const auto& key) {
    if (!v.is_number() || !(v.get<double>() >= 0 && v.get<double>() <= kMaxOpFlops))
      r.fail(key_text(key), fmt::format("expected a number in [0, {:g}], got {}", kMaxOpFlops, v.dump()));
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

Template read_template(const JsonReader& r) {
  const auto n = static_cast<size_t>(r.integer("count", 1, kMaxInt));
  // deps holds one array per op, so a count the file does not back is refused
  // here, before any column of `count` values is allocated.
  const json& deps = r.value("deps");
  if (!deps.is_array() || deps.size() != n) r.fail("deps", fmt::format("expected an array of {} arrays", n));
  auto rank = column<int64_t>(r, "rank", n, integer_in(r, 0, kMaxInt));
  auto stream = column<int64_t>(r, "stream", n, integer_in(r, 0, kMaxStreams - 1));
  auto kind = column<OpKind>(r, "kind", n, enum_in<OpKind>(r, parse_op_kind, "op kind"));
  auto step = column<int64_t>(r, "step", n, integer_in(r, -1, kMaxInt));
  auto peer = column<int64_t>(r, "peer", n, integer_in(r, -1, kMaxInt));
  auto group = column<int64_t>(r, "group", n, integer_in(r, -1, kMaxInt));
  auto joined = column<int64_t>(r, "joined", n, integer_in(r, 0, 1));
  Template t;
  t.flops = whole(column<double>(r, "flops", n, flops_in(r)));
  t.blocks = whole(column<int64_t>(r, "blocks", n, integer_in(r, 0, kMaxSize)));
  t.tokens = whole(column<int64_t>(r, "tokens", n, integer_in(r, 0, kMaxSize)));
  t.bytes = whole(column<int64_t>(r, "bytes", n, integer_in(r, 0, kMaxSize)));
  t.tag = whole(column<int64_t>(r, "tag", n, integer_in(r, kMinTag, kMaxTag)));
  t.access = whole(column<int64_t>(r, "access", n, integer_in(r, -1, kMaxInt)));
  t.detail = whole(column<int64_t>(r, "detail", n, integer_in(r, -1, kMaxInt)));
  r.finish();
  t.ops.resize(n);
  for (size_t i = 0; i < n; ++i) {
    Op& op = t.ops[i];
    set_op_fields(op, rank[i], stream[i], kind[i], step[i], peer[i], group[i], joined[i]);
    const json& d = deps[i];
    if (!d.is_array()) r.fail(key_text(At{"deps", i}), "expected an array of local op indices");
    op.deps.reserve(d.size());
    const auto dep_in = integer_in(r, -1, static_cast<int64_t>(n) - 1);
    for (size_t k = 0; k < d.size(); ++k) op.deps.push_back(dep_in(d[k], At2{"deps", i, k}));
  }
  return t;
}

// A segment's descriptor column: its own (`key`, into `own`), the template's
// with some entries replaced (`key_at`: [[op index, value], ...], into `at`),
// or the template's (neither set).
void descriptor_column(const JsonReader& r, const std::string& key, size_t n, Column<int64_t>& own,
                       std::vector<std::pair<size_t, int64_t>>& at) {
  if (r.has(key)) {
    own = whole(column<int64_t>(r, key, n, integer_in(r, -1, kMaxInt)));
    return;
  }
  const std::string at_key = key + "_at";
  if (!r.has(at_key)) return;
  const json& v = r.value(at_key);
  if (!v.is_array()) r.fail(at_key, "expected an array of [op index, value] pairs");
  for (size_t k = 0; k < v.size(); ++k) {
    auto where = fmt::format("{}[{}]", at_key, k);
    if (!v[k].is_array() || v[k].size() != 2) r.fail(where, "expected [op index, value]");
    const auto i = static_cast<size_t>(integer_in(r, 0, static_cast<int64_t>(n) - 1)(v[k][0], where));
    at.emplace_back(i, integer_in(r, -1, kMaxInt)(v[k][1], where));
  }
}

// A segment's fields, checked as read; expand_segment (schedule_read_parts.hpp) does the rest.
Segment read_segment(const JsonReader& r, const std::vector<Template>& templates) {
  Segment g;
  g.tmpl = static_cast<size_t>(r.integer("template", 0, static_cast<int64_t>(templates.size()) - 1));
  const size_t n = templates[g.tmpl].ops.size();
  g.first = static_cast<size_t>(r.integer("first", 0, kMaxI64));
  g.layer = static_cast<int>(r.integer("layer", -1, kMaxLayer));
  g.phase = enum_in<Phase>(r, parse_phase, "phase")(r.value("phase"), "phase");
  if (r.has("flops")) g.flops = whole(column<double>(r, "flops", n, flops_in(r)));
  if (r.has("blocks")) g.blocks = whole(column<int64_t>(r, "blocks", n, integer_in(r, 0, kMaxSize)));
  if (r.has("tokens")) g.tokens = whole(column<int64_t>(r, "tokens", n, integer_in(r, 0, kMaxSize)));
  if (r.has("bytes")) g.bytes = whole(column<int64_t>(r, "bytes", n, integer_in(r, 0, kMaxSize)));
  if (r.has("tag")) g.tag = whole(column<int64_t>(r, "tag", n, integer_in(r, kMinTag, kMaxTag)));
  descriptor_column(r, "access", n, g.access, g.access_at);
  descriptor_column(r, "detail", n, g.detail, g.detail_at);
  if (r.has("outside_deps")) {
    const json& o = r.value("outside_deps");
    if (!o.is_array()) r.fail("outside_deps", "expected an array of [op index, dependency id] pairs");
    for (size_t k = 0; k < o.size(); ++k) {
      auto key = fmt::format("outside_deps[{}]", k);
      if (!o[k].is_array() || o[k].size() != 2) r.fail(key, "expected [op index, dependency id]");
      g.outside.emplace_back(static_cast<size_t>(integer_in(r, 0, static_cast<int64_t>(n) - 1)(o[k][0], key)),
                             integer_in(r, 0, kMaxOps - 1)(o[k][1], key));
    }
  }
  r.finish();
  return g;
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
    int64_t elements = 1;
    for (size_t k = 0; k < v.size(); ++k) {
      dims.push_back(integer_in(r, 1, kMaxSize)(v[k], fmt::format("{}[{}]", key_text(key), k)));
      elements = elements_within(elements, dims.back());
      if (elements < 0)
        r.fail(key_text(key), fmt::format("a buffer of more than 2^50 bytes: {}", v.dump()));
    }
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
    for (size_t c = 0; c < width; ++c) row.push_back(integer_in(r, min, kMaxSize)(v[i][c], fmt::format("{}[{}]", k, c)));
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
    int64_t total = 0;
    for (size_t k = 0; k < set.size(); ++k) {
      auto rk = fmt::format("{}[{}]", key, k);
      if (!set[k].is_array() || set[k].size() != 4) r.fail(rk, "expected [begin, len, stride, count]");
      auto get = [&](size_t c, int64_t min) { return integer_in(r, min, kMaxSize)(set[k][c], fmt::format("{}[{}]", rk, c)); };
      const TokenRun run{get(0, 0), get(1, 1), get(2, 0), get(3, 1)};
      if (!run_within(run, total)) r.fail(rk, kRunBeyond);
      t.runs.push_back(run);
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

// check_coverage (schedule_read_parts.hpp) on the segments' (first, template),
// each checked as read_segment checks it; segments beyond op_count are left
// to expand_segment, which names them.
void check_coverage(const JsonReader& r, const std::vector<Template>& templates, size_t op_count) {
  std::vector<std::pair<size_t, size_t>> runs;  // [first, first + count)
  for (const JsonReader& sr : r.objects("segments")) {
    const auto& t = templates[static_cast<size_t>(sr.integer("template", 0, static_cast<int64_t>(templates.size()) - 1))];
    const auto first = static_cast<size_t>(sr.integer("first", 0, kMaxI64));
    if (first < op_count) runs.emplace_back(first, first + std::min(t.ops.size(), op_count - first));
  }
  read_parts::check_coverage(std::move(runs), op_count, [&r](std::string_view key, const std::string& what) { r.fail(key, what); });
}

}  // namespace

Schedule from_schedule_json(const json& j, const std::string& name, const OpCountCheck& before_allocating) {
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
  const auto op_count = static_cast<size_t>(r.integer("op_count", 0, kMaxInt));
  std::vector<Template> templates;  // each template's size is backed by its deps array
  for (const JsonReader& tr : r.objects("templates")) templates.push_back(read_template(tr));
  check_coverage(r, templates, op_count);
  if (before_allocating) before_allocating(static_cast<int64_t>(op_count), static_cast<int64_t>(s.ranks.size()));
  s.ops.resize(op_count);
  std::vector<bool> covered(s.ops.size(), false);
  TableIndex descs;
  for (const JsonReader& sr : r.objects("segments")) {
    const Segment g = read_segment(sr, templates);
    expand_segment(templates[g.tmpl], g, s, descs, covered, [&sr](std::string_view key, const std::string& what) { sr.fail(key, what); });
  }
  r.finish();
  for (size_t i = 0; i < covered.size(); ++i)
    if (!covered[i]) r.fail("segments", fmt::format("op {}: missing (no segment covers it; op_count is {})", i, covered.size()));
  return s;
}

namespace {

// Whether the JSON parser runs out of input before the text is valid: a
// truncated file, said plainly. Parsed again keeping nothing (no tree), only
// after the checked parse failed.
bool ends_early(std::string_view text) {
  try {
    const json kept = json::parse(text.begin(), text.end(), [](int, json::parse_event_t, json&) { return false; });
    (void)kept;
  } catch (const json::parse_error& e) {
    return e.byte >= text.size();
  } catch (const json::exception&) {
  }
  return false;
}

}  // namespace

Schedule parse_schedule_text(std::string_view text, const std::string& name, const OpCountCheck& before_allocating) {
  // The one-pass reader takes the files it can read in full; any other text
  // (a fault, or a form it does not take) is read again here, through the
  // DOM, which names the fault as it always has.
  if (std::optional<Schedule> fast = read_schedule_one_pass(text, before_allocating)) {
    validate(*fast, name);
    return std::move(*fast);
  }
  json j;
  try {
    j = traces::parse_json_checked(text, name);  // depth, repeated keys, 1e999, UTF-8: traces/json_text.hpp
  } catch (const traces::JsonTextError& e) {
    if (ends_early(text))
      throw ScheduleError(fmt::format("{}: truncated file (JSON ends early, after {} bytes)", name, text.size()));
    throw ScheduleError(e.what());
  }
  Schedule s = from_schedule_json(j, name, before_allocating);
  validate(s, name);
  return s;
}

Schedule read_schedule(const std::string& path, const OpCountCheck& before_allocating) {
  std::string text;
  try {
    text = traces::read_text_file(path);
  } catch (const traces::TraceError& e) {
    throw ScheduleError(e.what());
  }
  return parse_schedule_text(text, path, before_allocating);
}

}  // namespace rm::schedule
