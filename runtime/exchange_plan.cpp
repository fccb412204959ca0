#include "runtime/exchange_plan.hpp"

#include <string>
#include <unordered_map>

#include "sim/schedule/schedule_error.hpp"

namespace rm::runtime {

namespace {

// Local index of each global token / head of a layout (-1: absent).
struct Index {
  explicit Index(const Layout& l) {
    for (size_t i = 0; i < l.tokens.size(); ++i) token[l.tokens[i]] = int64_t(i);
    for (size_t i = 0; i < l.heads.size(); ++i) head[l.heads[i]] = int64_t(i);
  }
  std::unordered_map<int32_t, int64_t> token, head;
  int64_t t(int32_t g) const { auto it = token.find(g); return it == token.end() ? -1 : it->second; }
  int64_t h(int32_t g) const { auto it = head.find(g); return it == head.end() ? -1 : it->second; }
};

// Rows of `to`'s storage order that `from` holds: (row in from, row in to), in `to`'s order.
template <class F>
void common_rows(const Layout& from, const Layout& to, int64_t batch, F&& emit) {
  const Index fi(from);
  const int parts = to.kv_like() ? 2 : 1;
  for (int part = 0; part < parts; ++part)
    for (int64_t b = 0; b < batch; ++b)
      for (size_t h = 0; h < to.heads.size(); ++h) {
        const int64_t fh = fi.h(to.heads[h]);
        if (fh < 0) continue;
        for (size_t t = 0; t < to.tokens.size(); ++t) {
          const int64_t ft = fi.t(to.tokens[t]);
          if (ft < 0) continue;
          emit(from.row(part, b, fh, ft, batch), to.row(part, b, int64_t(h), int64_t(t), batch));
        }
      }
}

}  // namespace

ExchangePlan exchange_plan(const schedule::Schedule& s, const schedule::CommMatching& m, const Layouts& l,
                           schedule::OpId op) {
  const schedule::Op& me = s.ops.at(size_t(op));
  const auto& call = m.calls.at(size_t(m.call_of.at(size_t(op))));
  const schedule::Access& mine = *s.access_of(me);
  ExchangePlan p;
  p.row_elements = l.head_dim();
  const auto fail = [&](const std::string& what) { throw schedule::ScheduleError(schedule::describe(s, op) + ": " + what); };
  for (size_t i = 0; i < mine.reads.size(); ++i) p.pairs.push_back({mine.reads[i], mine.writes.at(i)});
  p.send_rows.assign(call.size(), std::vector<std::vector<int64_t>>(p.pairs.size()));
  p.recv_rows = p.send_rows;
  for (size_t i = 0; i < p.pairs.size(); ++i) {
    const Layout* r = l.of(p.pairs[i].read);
    const Layout* w = l.of(p.pairs[i].write);
    if (!r || !w) fail("an all-to-all buffer has no tokens x heads layout (docs/runtime.md)");
    int64_t filled = 0;
    for (size_t j = 0; j < call.size(); ++j) {
      const schedule::Access& theirs = *s.access_of(s.ops.at(size_t(call[j])));
      const Layout* tw = l.of(theirs.writes.at(i));
      const Layout* tr = l.of(theirs.reads.at(i));
      if (!tw || !tr) fail("a member's all-to-all buffer has no layout");
      common_rows(*r, *tw, l.batch(), [&](int64_t from, int64_t) { p.send_rows[j][i].push_back(from); });
      common_rows(*tr, *w, l.batch(), [&](int64_t, int64_t to) { p.recv_rows[j][i].push_back(to); });
      filled += int64_t(p.recv_rows[j][i].size());
    }
    const int64_t rows = w->elements(l.batch(), l.head_dim()) / l.head_dim();
    if (filled != rows)
      fail("the members' inputs fill " + std::to_string(filled) + " of the " + std::to_string(rows) +
           " rows of buffer '" + s.buffers[size_t(p.pairs[i].write)].name + "'");
  }
  return p;
}

}  // namespace rm::runtime
