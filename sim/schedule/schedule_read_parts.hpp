// What the Schedule file's two readers share (schedule_read.cpp: over
// nlohmann's DOM, naming every fault; schedule_sax.cpp: one pass over the
// text, for files it reads in full): the limits on values, a template and a
// segment as read, and the checks and expansion that follow reading. Each
// check takes `fail(key, what)`, which must throw: the DOM reader names the
// key's JSON path, the one-pass reader hands the text to the DOM reader.
// Internal to sim/schedule.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "sim/schedule/builder.hpp"
#include "sim/schedule/schedule.hpp"

namespace rm::schedule::read_parts {

// An op's FLOPs: 1e24 is ~10^9 GPU-seconds at 1 PFLOP/s, far beyond any op
// generated, and far below what turns a step time into nonsense (1e308).
inline constexpr double kMaxOpFlops = 1e24;

inline constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
inline constexpr int64_t kMinI64 = std::numeric_limits<int64_t>::min();
inline constexpr int64_t kMaxI64 = std::numeric_limits<int64_t>::max();
// Bytes, blocks and tokens of one op or buffer, and a token set's extent:
// 2^50 (1 PiB, 10^15 tokens) is far beyond any run, and sums of such values
// (a transfer's buffers, a rank's bytes) stay far inside int64_t.
inline constexpr int64_t kMaxSize = int64_t(1) << 50;
inline constexpr int64_t kWidestDtypeBytes = 4;

// a * b, or -1 when it exceeds kMaxSize (a, b >= 0).
inline int64_t product_within(int64_t a, int64_t b) {
  int64_t p = 0;
  if (__builtin_mul_overflow(a, b, &p) || p > kMaxSize) return -1;
  return p;
}

// A buffer's element count after one more dimension, or -1 when the buffer
// would hold more than 2^50 bytes of the widest dtype.
inline int64_t elements_within(int64_t elements, int64_t dim) {
  const int64_t e = product_within(elements, dim);
  return e < 0 || product_within(e, kWidestDtypeBytes) < 0 ? -1 : e;
}

// Whether a token run's extent (begin + (count - 1) * stride + len) and size
// (len * count), and its set's size so far (`total`, updated), stay within 2^50.
inline bool run_within(const TokenRun& run, int64_t& total) {
  const int64_t span = product_within(run.count - 1, run.stride), size = product_within(run.len, run.count);
  total += size;
  return span >= 0 && size >= 0 && run.begin + span + run.len <= kMaxSize && total <= kMaxSize;
}
inline constexpr std::string_view kRunBeyond = "the run reaches beyond token 2^50 (or the set holds more than 2^50 tokens)";

// A column of a template or segment: its values, or one value for all of them
// (kept as one: a segment's `"flops": 0` over a 10^5-op template stays 8 bytes
// until it is expanded). `given` false: a segment's column is the template's.
template <class T>
struct Column {
  std::vector<T> values;
  T all{};
  bool given = false;
  T operator[](size_t i) const { return values.empty() ? all : values[i]; }
};
template <class T>
Column<T> whole(std::vector<T> v) {
  return {std::move(v), T{}, true};
}

// A template's ops with their ids, layer and phase not yet set; outside deps as -1.
struct Template {
  std::vector<Op> ops;
  Column<double> flops;
  Column<int64_t> blocks, tokens, bytes, tag, access, detail;
};

// A template op's own fields from its columns' i-th values, already range-checked
// by the reader (one place for the narrowing, whichever reader read them).
inline void set_op_fields(Op& op, int64_t rank, int64_t stream, OpKind kind, int64_t step, int64_t peer,
                          int64_t group, int64_t joined) {
  op.rank = static_cast<int>(rank);
  op.stream = static_cast<int>(stream);
  op.kind = kind;
  op.step = static_cast<int>(step);
  op.peer = static_cast<int>(peer);
  op.group = static_cast<int>(group);
  op.joined = joined != 0;
}

// A segment as read, before it is expanded into ops; `*_at` replace entries
// of the template's column, in order.
struct Segment {
  size_t tmpl = 0, first = 0;
  int layer = -1;
  Phase phase = Phase::forward;
  Column<double> flops;
  Column<int64_t> blocks, tokens, bytes, tag, access, detail;
  std::vector<std::pair<size_t, int64_t>> access_at, detail_at;
  std::vector<std::pair<size_t, OpId>> outside;  // [op index, dependency id], in op order
};

// Checks, from the segments' [first, first + count) runs alone (cut at
// op_count), that they cover ids 0..op_count-1 once each: run before the ops
// are allocated, so an op_count the segments do not back (3e7 in a 7 KB file)
// is refused without allocating for it. fail("segments", ...).
template <class Fail>
void check_coverage(std::vector<std::pair<size_t, size_t>> runs, size_t op_count, const Fail& fail) {
  std::sort(runs.begin(), runs.end());
  size_t next = 0;
  for (const auto& [b, e] : runs) {
    if (b < next) fail("segments", fmt::format("op {}: duplicate id (two segments cover it)", b));
    if (b > next) break;
    next = e;
  }
  if (next < op_count)
    fail("segments", fmt::format("op {}: missing (no segment covers it; op_count is {})", next, op_count));
}

// Expands segment `g` of template `t` into s.ops (allocated), marking the ids
// it covers. fail("first" or "outside_deps", ...).
template <class Fail>
void expand_segment(const Template& t, const Segment& g, Schedule& s, TableIndex& descs, std::vector<bool>& covered,
                    const Fail& fail) {
  const size_t n = t.ops.size(), first = g.first;
  if (first > s.ops.size() || n > s.ops.size() - first)
    fail("first", fmt::format("ops {}..{} lie beyond op_count {}", first, first + n - 1, s.ops.size()));
  const auto pick = [](const auto& own, const auto& theirs, size_t i) { return own.given ? own[i] : theirs[i]; };
  std::vector<OpDesc> d(n);
  for (size_t i = 0; i < n; ++i) {
    d[i].flops = pick(g.flops, t.flops, i);
    d[i].blocks = pick(g.blocks, t.blocks, i);
    d[i].tokens = pick(g.tokens, t.tokens, i);
    d[i].bytes = pick(g.bytes, t.bytes, i);
    d[i].access = static_cast<int32_t>(pick(g.access, t.access, i));
    d[i].detail = static_cast<int32_t>(pick(g.detail, t.detail, i));
  }
  for (const auto& [i, v] : g.access_at) d[i].access = static_cast<int32_t>(v);
  for (const auto& [i, v] : g.detail_at) d[i].detail = static_cast<int32_t>(v);
  size_t next_outside = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<OpId>(first + i);
    if (covered[first + i])
      fail("first", fmt::format("op {}: duplicate id (this segment overlaps an earlier one)", id));
    covered[first + i] = true;
    Op op = t.ops[i];
    op.id = static_cast<int32_t>(id);
    op.layer = static_cast<int16_t>(g.layer);
    op.phase = g.phase;
    op.tag = static_cast<int32_t>(pick(g.tag, t.tag, i));
    op.desc = intern_desc(s.descs, descs, d[i]);
    for (DepId& dep : op.deps) {
      if (dep >= 0) {
        dep += static_cast<DepId>(first);
      } else {
        if (next_outside == g.outside.size() || g.outside[next_outside].first != i)
          fail("outside_deps", fmt::format("op {}: its outside dependencies are missing or out of order", id));
        dep = static_cast<DepId>(g.outside[next_outside++].second);
      }
    }
    s.ops[first + i] = std::move(op);
  }
  if (next_outside != g.outside.size())
    fail("outside_deps", fmt::format("entry {} matches no outside dependency of the template", next_outside));
}

}  // namespace rm::schedule::read_parts
