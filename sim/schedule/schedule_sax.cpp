// The one-pass reader (schedule_sax.hpp). Each field is checked as
// schedule_read.cpp checks it, with the limits and post-read checks of
// schedule_read_parts.hpp; any fault or unfamiliar form throws NotTaken.
#include "sim/schedule/schedule_sax.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>

#include "sim/schedule/schedule_read_parts.hpp"
#include "traces/json_text.hpp"

namespace rm::schedule {

namespace {

using namespace read_parts;

struct NotTaken {};  // the text is for the DOM reader

[[noreturn]] void not_taken() { throw NotTaken{}; }

// The experiment is the one free-form value; nested deeper than this it is
// left to the DOM reader, so the depth limit (traces/json_text.hpp, counted
// from the file's top) is never reached inside it here.
constexpr int kMaxExperimentDepth = 128;

class Text {
 public:
  explicit Text(std::string_view t) : p_(t.data()), end_(t.data() + t.size()) {}

  // Bytes left to read: an array cannot hold more values than half of them.
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }

  // The next significant character ('\0' at the end: valid nowhere in JSON).
  char peek() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
    return p_ == end_ ? '\0' : *p_;
  }
  void expect(char c) {
    if (peek() != c) not_taken();
    ++p_;
  }
  bool next_is(char c) {
    if (peek() != c) return false;
    ++p_;
    return true;
  }
  bool at_end() { return peek() == '\0' && p_ == end_; }

  // A string of ASCII without escapes or control characters (all the writer writes).
  std::string_view str() {
    expect('"');
    const char* b = p_;
    for (; p_ != end_; ++p_) {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') return {b, static_cast<size_t>(p_++ - b)};
      if (c < 0x20 || c >= 0x80 || c == '\\') not_taken();
    }
    not_taken();
  }

  // A JSON number, strictly by the grammar: an integer (no fraction, no
  // exponent) that int64_t holds, or a finite double (as nlohmann reads them).
  struct Number {
    bool integer = true;
    int64_t i = 0;
    double d = 0;
  };
  Number number() {
    peek();
    const char* b = p_;
    const bool negative = p_ != end_ && *p_ == '-';
    if (negative) ++p_;
    const char* digits = p_;
    if (p_ == end_ || !is_digit(*p_)) not_taken();
    if (*p_ == '0') ++p_;
    else
      while (p_ != end_ && is_digit(*p_)) ++p_;
    Number n;
    const size_t count = static_cast<size_t>(p_ - digits);
    if (p_ != end_ && *p_ == '.') {
      n.integer = false;
      ++p_;
      skip_digits();
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      n.integer = false;
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      skip_digits();
    }
    if (n.integer && count <= 18) {  // 18 digits cannot overflow
      int64_t v = 0;
      for (const char* q = digits; q != p_; ++q) v = v * 10 + (*q - '0');
      n.i = negative ? -v : v;
    } else if (n.integer) {
      const auto [q, ec] = std::from_chars(b, p_, n.i);
      if (ec != std::errc() || q != p_) not_taken();
    } else {
      const auto [q, ec] = std::from_chars(b, p_, n.d);
      if (ec != std::errc() || q != p_ || !std::isfinite(n.d)) not_taken();
    }
    return n;
  }
  int64_t integer(int64_t min, int64_t max) {
    const Number n = number();
    if (!n.integer || n.i < min || n.i > max) not_taken();
    return n.i;
  }
  double flops() {
    const Number n = number();
    const double d = n.integer ? static_cast<double>(n.i) : n.d;
    if (!(d >= 0 && d <= kMaxOpFlops)) not_taken();
    return d;
  }
  template <class E>
  E enumerator(std::optional<E> (*parse)(std::string_view)) {
    const std::optional<E> e = parse(str());
    if (!e) not_taken();
    return *e;
  }

  // A whole value, unread, from '{' to its '}' (the experiment): its text for
  // the checked JSON parser, which also finds any fault within it.
  std::string_view raw_object() {
    expect('{');
    const char* b = p_ - 1;
    int depth = 1;
    while (p_ != end_ && depth > 0) {
      const char c = *p_++;
      if (c == '"') {
        while (p_ != end_ && *p_ != '"') p_ += *p_ == '\\' && p_ + 1 != end_ ? 2 : 1;
        if (p_ == end_) not_taken();
        ++p_;
      } else if (c == '{' || c == '[') {
        if (++depth > kMaxExperimentDepth) not_taken();
      } else if (c == '}' || c == ']') {
        --depth;
      }
    }
    if (depth > 0) not_taken();
    return {b, static_cast<size_t>(p_ - b)};
  }

  // [item, item, ...]: calls item() for each.
  template <class F>
  void array(F item) {
    expect('[');
    if (next_is(']')) return;
    do item();
    while (next_is(','));
    expect(']');
  }
  // {"key": value, ...}: calls field(key) for each, which reads the value
  // (and refuses a key it does not know or has seen: Seen).
  template <class F>
  void object(F field) {
    expect('{');
    if (next_is('}')) return;
    do {
      const std::string_view key = str();
      expect(':');
      field(key);
    } while (next_is(','));
    expect('}');
  }

 private:
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  void skip_digits() {
    if (p_ == end_ || !is_digit(*p_)) not_taken();
    while (p_ != end_ && is_digit(*p_)) ++p_;
  }

  const char* p_;
  const char* end_;
};

// `count` values, or one value for all of them (kept as one).
template <class T, class Get>
Column<T> column(Text& t, size_t count, Get get) {
  Column<T> c;
  c.given = true;
  if (t.peek() != '[') {
    c.all = get();
    return c;
  }
  // A declared count is not trusted before the text backs it (a tiny file may declare
  // 2^31 buffers): reserve no more than the values the rest of the text could hold.
  c.values.reserve(std::min(count, t.remaining() / 2 + 1));
  t.array([&] { c.values.push_back(get()); });
  if (c.values.size() != count) not_taken();
  return c;
}

// A table's column: exactly `count` values, as an array.
template <class T, class Get>
std::vector<T> table_column(Text& t, size_t count, Get get) {
  if (t.peek() != '[') not_taken();
  return std::move(column<T>(t, count, get).values);
}

std::vector<int> int_list(Text& t, int64_t min, int64_t max) {
  std::vector<int> out;
  t.array([&] { out.push_back(static_cast<int>(t.integer(min, max))); });
  return out;
}

// The keys an object may have, and which it has had: an unknown or
// repeated key is not taken.
template <size_t N>
class Seen {
 public:
  explicit Seen(const std::array<std::string_view, N>& keys) : keys_(keys) {}
  size_t index(std::string_view key) {  // the key's index in the list
    for (size_t i = 0; i < N; ++i)
      if (keys_[i] == key) {
        if (has(i)) not_taken();
        seen_ |= uint64_t(1) << i;
        return i;
      }
    not_taken();
  }
  bool has(size_t i) const { return (seen_ >> i & 1) != 0; }
  bool all(uint64_t required) const { return (seen_ & required) == required; }
  bool all() const { return all((uint64_t(1) << N) - 1); }

 private:
  std::array<std::string_view, N> keys_;
  uint64_t seen_ = 0;
};

void read_ranks(Text& t, Schedule& s) {
  t.array([&] {
    Rank rank{static_cast<int>(s.ranks.size()), 0, {}};
    Seen<2> seen{{"gpu", "streams"}};
    t.object([&](std::string_view key) {
      if (seen.index(key) == 0) {
        rank.gpu = static_cast<int>(t.integer(0, kMaxInt));
        return;
      }
      t.array([&] {
        Stream st{static_cast<int>(rank.streams.size()), StreamKind::compute, {}};
        Seen<2> fields{{"kind", "name"}};
        t.object([&](std::string_view k) {
          if (fields.index(k) == 0) st.kind = t.enumerator(parse_stream_kind);
          else st.name = std::string(t.str());
        });
        if (!fields.all()) not_taken();
        rank.streams.push_back(std::move(st));
      });
    });
    if (!seen.all()) not_taken();
    s.ranks.push_back(std::move(rank));
  });
}

void read_groups(Text& t, Schedule& s) {
  t.array([&] {
    Group g{static_cast<int>(s.groups.size()), {}, {}};
    Seen<2> seen{{"ranks", "name"}};
    t.object([&](std::string_view key) {
      if (seen.index(key) == 0) g.ranks = int_list(t, 0, kMaxInt);
      else g.name = std::string(t.str());
    });
    if (!seen.all()) not_taken();
    s.groups.push_back(std::move(g));
  });
}

void read_buffers(Text& t, Schedule& s) {
  size_t n = 0;
  std::vector<int64_t> rank;
  std::vector<std::string> name;
  std::vector<BufferRole> role;
  std::vector<DType> dtype;
  std::vector<std::vector<int64_t>> shape;
  std::vector<Instances> instances;
  Seen<7> seen{{"count", "rank", "name", "role", "dtype", "shape", "instances"}};
  t.object([&](std::string_view key) {
    const size_t k = seen.index(key);
    if (k != 0 && !seen.has(0)) not_taken();  // count first
    switch (k) {
      case 0: n = static_cast<size_t>(t.integer(0, kMaxInt)); break;
      case 1: rank = table_column<int64_t>(t, n, [&] { return t.integer(0, kMaxInt); }); break;
      case 2: name = table_column<std::string>(t, n, [&] { return std::string(t.str()); }); break;
      case 3: role = table_column<BufferRole>(t, n, [&] { return t.enumerator(parse_buffer_role); }); break;
      case 4: dtype = table_column<DType>(t, n, [&] { return t.enumerator(parse_dtype); }); break;
      case 5:
        shape = table_column<std::vector<int64_t>>(t, n, [&] {
          std::vector<int64_t> dims;
          int64_t elements = 1;
          t.array([&] {
            dims.push_back(t.integer(1, kMaxSize));
            if ((elements = elements_within(elements, dims.back())) < 0) not_taken();
          });
          return dims;
        });
        break;
      default: instances = table_column<Instances>(t, n, [&] { return t.enumerator(parse_instances); }); break;
    }
  });
  if (!seen.all()) not_taken();
  s.buffers.resize(n);
  for (size_t i = 0; i < n; ++i)
    s.buffers[i] = Buffer{static_cast<int>(i), static_cast<int>(rank[i]), std::move(name[i]), role[i], dtype[i],
                          std::move(shape[i]), instances[i]};
}

void read_token_sets(Text& t, Schedule& s) {
  t.array([&] {
    TokenSet set;
    int64_t total = 0;
    t.array([&] {
      TokenRun run;
      int c = 0;
      t.array([&] {
        switch (c++) {
          case 0: run.begin = t.integer(0, kMaxSize); break;
          case 1: run.len = t.integer(1, kMaxSize); break;
          case 2: run.stride = t.integer(0, kMaxSize); break;
          case 3: run.count = t.integer(1, kMaxSize); break;
          default: not_taken();
        }
      });
      if (c != 4 || !run_within(run, total)) not_taken();
      set.runs.push_back(run);
    });
    s.token_sets.push_back(std::move(set));
  });
}

void read_accesses(Text& t, Schedule& s) {
  t.array([&] {
    Access a;
    int side = 0;
    t.array([&] {
      if (side > 1) not_taken();
      (side++ == 0 ? a.reads : a.writes) = int_list(t, 0, kMaxInt);
    });
    if (side != 2) not_taken();
    s.accesses.push_back(std::move(a));
  });
}

void read_attentions(Text& t, Schedule& s) {
  size_t n = 0;
  std::vector<int64_t> ids[6];  // q_tokens, kv_tokens, head_begin, heads, kv_head_begin, kv_heads
  std::vector<Mask> mask;
  std::vector<IndexSource> index;
  std::vector<int64_t> merge;
  Seen<10> seen{{"count", "q_tokens", "kv_tokens", "head_begin", "heads", "kv_head_begin", "kv_heads", "mask", "index", "merge"}};
  t.object([&](std::string_view key) {
    const size_t k = seen.index(key);
    if (k != 0 && !seen.has(0)) not_taken();  // count first
    if (k == 0) n = static_cast<size_t>(t.integer(0, kMaxInt));
    else if (k <= 6) ids[k - 1] = table_column<int64_t>(t, n, [&] { return t.integer(0, kMaxInt); });
    else if (k == 7) mask = table_column<Mask>(t, n, [&] { return t.enumerator(parse_mask); });
    else if (k == 8) index = table_column<IndexSource>(t, n, [&] { return t.enumerator(parse_index_source); });
    else merge = table_column<int64_t>(t, n, [&] { return t.integer(0, 1); });
  });
  if (!seen.all()) not_taken();
  s.attentions.resize(n);
  for (size_t i = 0; i < n; ++i)
    s.attentions[i] = Attention{int(ids[0][i]), int(ids[1][i]), int(ids[2][i]), int(ids[3][i]), int(ids[4][i]),
                                int(ids[5][i]), mask[i], index[i], merge[i] != 0};
}

void read_gemms(Text& t, Schedule& s) {
  t.array([&] {
    int64_t v[3];
    int c = 0;
    t.array([&] {
      if (c > 2) not_taken();
      v[c++] = t.integer(1, kMaxSize);
    });
    if (c != 3) not_taken();
    s.gemms.push_back(Gemm{v[0], v[1], v[2]});
  });
}

Template read_template(Text& t) {
  size_t n = 0;
  Column<int64_t> rank, stream, step, peer, group, joined;
  Column<OpKind> kind;
  Template tm;  // its ops are added as the deps array backs them
  Seen<16> seen{{"count", "rank",  "stream", "kind",   "step", "peer", "group",  "joined",
            "deps",  "flops", "blocks", "tokens", "bytes", "tag", "access", "detail"}};
  t.object([&](std::string_view key) {
    const size_t k = seen.index(key);
    if (k != 0 && !seen.has(0)) not_taken();  // count first
    const auto ints = [&](int64_t min, int64_t max) { return column<int64_t>(t, n, [&t, min, max] { return t.integer(min, max); }); };
    switch (k) {
      case 0: n = static_cast<size_t>(t.integer(1, kMaxInt)); break;
      case 1: rank = ints(0, kMaxInt); break;
      case 2: stream = ints(0, kMaxStreams - 1); break;
      case 3: kind = column<OpKind>(t, n, [&] { return t.enumerator(parse_op_kind); }); break;
      case 4: step = ints(-1, kMaxInt); break;
      case 5: peer = ints(-1, kMaxInt); break;
      case 6: group = ints(-1, kMaxInt); break;
      case 7: joined = ints(0, 1); break;
      case 8:
        t.array([&] {
          if (tm.ops.size() == n) not_taken();
          DepList& deps = tm.ops.emplace_back().deps;
          t.array([&] { deps.push_back(t.integer(-1, static_cast<int64_t>(n) - 1)); });
        });
        if (tm.ops.size() != n) not_taken();
        break;
      case 9: tm.flops = column<double>(t, n, [&] { return t.flops(); }); break;
      case 10: tm.blocks = ints(0, kMaxSize); break;
      case 11: tm.tokens = ints(0, kMaxSize); break;
      case 12: tm.bytes = ints(0, kMaxSize); break;
      case 13: tm.tag = ints(kMinTag, kMaxTag); break;
      case 14: tm.access = ints(-1, kMaxInt); break;
      default: tm.detail = ints(-1, kMaxInt); break;
    }
  });
  if (!seen.all()) not_taken();
  for (size_t i = 0; i < n; ++i) {
    Op& op = tm.ops[i];
    set_op_fields(op, rank[i], stream[i], kind[i], step[i], peer[i], group[i], joined[i]);
  }
  return tm;
}

// [[op index, value], ...] with each part checked.
template <class V>
std::vector<std::pair<size_t, V>> pairs(Text& t, size_t n, int64_t min, int64_t max) {
  std::vector<std::pair<size_t, V>> out;
  t.array([&] {
    int c = 0;
    std::pair<size_t, V> p{};
    t.array([&] {
      if (c > 1) not_taken();
      if (c++ == 0) p.first = static_cast<size_t>(t.integer(0, static_cast<int64_t>(n) - 1));
      else p.second = static_cast<V>(t.integer(min, max));
    });
    if (c != 2) not_taken();
    out.push_back(p);
  });
  return out;
}

Segment read_segment(Text& t, const std::vector<Template>& templates) {
  Segment g;
  size_t n = 0;
  Seen<14> seen{{"template", "first", "layer",  "phase",  "flops",     "blocks",    "tokens",
            "bytes",    "tag",   "access", "detail", "access_at", "detail_at", "outside_deps"}};
  t.object([&](std::string_view key) {
    const size_t k = seen.index(key);
    if (k != 0 && !seen.has(0)) not_taken();  // template first
    const auto ints = [&](int64_t min, int64_t max) { return column<int64_t>(t, n, [&t, min, max] { return t.integer(min, max); }); };
    switch (k) {
      case 0:
        g.tmpl = static_cast<size_t>(t.integer(0, static_cast<int64_t>(templates.size()) - 1));
        n = templates[g.tmpl].ops.size();
        break;
      case 1: g.first = static_cast<size_t>(t.integer(0, kMaxI64)); break;
      case 2: g.layer = static_cast<int>(t.integer(-1, kMaxLayer)); break;
      case 3: g.phase = t.enumerator(parse_phase); break;
      case 4: g.flops = column<double>(t, n, [&] { return t.flops(); }); break;
      case 5: g.blocks = ints(0, kMaxSize); break;
      case 6: g.tokens = ints(0, kMaxSize); break;
      case 7: g.bytes = ints(0, kMaxSize); break;
      case 8: g.tag = ints(kMinTag, kMaxTag); break;
      case 9: g.access = ints(-1, kMaxInt); break;
      case 10: g.detail = ints(-1, kMaxInt); break;
      case 11: g.access_at = pairs<int64_t>(t, n, -1, kMaxInt); break;
      case 12: g.detail_at = pairs<int64_t>(t, n, -1, kMaxInt); break;
      default: g.outside = pairs<OpId>(t, n, 0, kMaxOps - 1); break;
    }
  });
  // The DOM reader reads `access_at` only without `access` (else it is an unknown key).
  if (!seen.all(0xf) || (seen.has(9) && seen.has(11)) || (seen.has(10) && seen.has(12))) not_taken();
  return g;
}

Schedule read(std::string_view text, const OpCountCheck& before_allocating) {
  Text t(text);
  Schedule s;
  size_t op_count = 0;
  std::vector<Template> templates;
  std::vector<Segment> segments;
  Seen<14> seen{{"format",   "version",  "generator",  "experiment", "ranks",    "groups",    "buffers",
            "token_sets", "accesses", "attentions", "gemms",      "op_count", "templates", "segments"}};
  t.object([&](std::string_view key) {
    switch (seen.index(key)) {
      case 0:
        if (t.str() != "ringmaster.schedule") not_taken();
        break;
      case 1:
        if (t.integer(kScheduleFormatVersion, kScheduleFormatVersion) != kScheduleFormatVersion) not_taken();
        break;
      case 2: s.generator = std::string(t.str()); break;
      case 3:
        try {
          s.experiment = traces::parse_json_checked(t.raw_object(), "experiment");
        } catch (const traces::JsonTextError&) {
          not_taken();
        }
        break;
      case 4: read_ranks(t, s); break;
      case 5: read_groups(t, s); break;
      case 6: read_buffers(t, s); break;
      case 7: read_token_sets(t, s); break;
      case 8: read_accesses(t, s); break;
      case 9: read_attentions(t, s); break;
      case 10: read_gemms(t, s); break;
      case 11: op_count = static_cast<size_t>(t.integer(0, kMaxInt)); break;
      case 12: t.array([&] { templates.push_back(read_template(t)); }); break;
      default:
        if (!seen.has(12)) not_taken();  // templates first
        t.array([&] { segments.push_back(read_segment(t, templates)); });
        break;
    }
  });
  if (!seen.all() || !t.at_end()) not_taken();
  const auto fail = [](std::string_view, const std::string&) { not_taken(); };
  std::vector<std::pair<size_t, size_t>> runs;
  for (const Segment& g : segments)
    if (g.first < op_count) runs.emplace_back(g.first, g.first + std::min(templates[g.tmpl].ops.size(), op_count - g.first));
  check_coverage(std::move(runs), op_count, fail);
  if (before_allocating) before_allocating(static_cast<int64_t>(op_count), static_cast<int64_t>(s.ranks.size()));
  s.ops.resize(op_count);
  std::vector<bool> covered(op_count, false);
  TableIndex descs;
  for (const Segment& g : segments) expand_segment(templates[g.tmpl], g, s, descs, covered, fail);
  if (std::find(covered.begin(), covered.end(), false) != covered.end()) not_taken();
  return s;
}

}  // namespace

std::optional<Schedule> read_schedule_one_pass(std::string_view text, const OpCountCheck& before_allocating) {
  try {
    return read(text, before_allocating);
  } catch (const NotTaken&) {
    return std::nullopt;
  }
}

}  // namespace rm::schedule
