#include "traces/timeline_join.hpp"

#include <algorithm>
#include <tuple>

namespace rm::traces {

namespace {
// Events with an op, ordered by (op, rank, start): equal keys are adjacent and
// their occurrences are in time order.
std::vector<const Event*> keyed(const Timeline& t) {
  std::vector<const Event*> v;
  for (const auto& e : t.events)
    if (e.op >= 0) v.push_back(&e);
  std::stable_sort(v.begin(), v.end(), [](const Event* a, const Event* b) {
    return std::tie(a->op, a->rank, a->start_s, a->end_s) < std::tie(b->op, b->rank, b->start_s, b->end_s);
  });
  return v;
}
}  // namespace

TimelineJoin join_on_op(const Timeline& left, const Timeline& right) {
  auto l = keyed(left), r = keyed(right);
  TimelineJoin j;
  size_t i = 0, k = 0;
  auto key = [](const Event* e) { return std::pair(e->op, e->rank); };
  while (i < l.size() || k < r.size()) {
    if (k == r.size() || (i < l.size() && key(l[i]) < key(r[k]))) {
      j.left_only.push_back(l[i++]);
    } else if (i == l.size() || key(r[k]) < key(l[i])) {
      j.right_only.push_back(r[k++]);
    } else {
      j.pairs.push_back({l[i]->op, l[i]->rank, l[i], r[k]});
      ++i, ++k;
    }
  }
  return j;
}

}  // namespace rm::traces
