#include "sim/report/op_spans.hpp"

namespace rm::report {

OpSpans spans_of(const schedule::Schedule& s, const traces::Timeline& tl) {
  const size_t n = s.ops.size();
  OpSpans t;
  t.start.assign(n, 0.0);
  t.end.assign(n, 0.0);
  t.has.assign(n, 0);
  for (const traces::Event& x : tl.events)
    if (x.op >= 0 && size_t(x.op) < n && !t.has[size_t(x.op)]) {
      const size_t i = size_t(x.op);
      t.has[i] = 1;
      t.start[i] = x.start_s;
      t.end[i] = x.end_s;
    }
  return t;
}

}  // namespace rm::report
