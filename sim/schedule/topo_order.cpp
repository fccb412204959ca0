#include "sim/schedule/topo_order.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <queue>

#include <fmt/format.h>

#include "sim/schedule/schedule_error.hpp"

namespace rm::schedule {

namespace {

// Per op, the previous op of its stream (-1 for the first).
std::vector<OpId> stream_predecessors(const Schedule& s) {
  std::vector<OpId> prev(s.ops.size(), -1);
  std::map<std::pair<int, int>, OpId> last;
  for (const Op& op : s.ops) {
    auto [it, fresh] = last.try_emplace({op.rank, op.stream}, op.id);
    if (!fresh) prev[static_cast<size_t>(op.id)] = std::exchange(it->second, op.id);
  }
  return prev;
}

bool valid(const Schedule& s, OpId id) { return id >= 0 && id < static_cast<OpId>(s.ops.size()); }

// Calls f(pred) for every op that must come before `op`.
template <class F>
void for_each_pred(const Schedule& s, const std::vector<OpId>& prev, OpId op, F&& f) {
  for (OpId d : s.ops[static_cast<size_t>(op)].deps)
    if (valid(s, d)) f(d);
  if (prev[static_cast<size_t>(op)] >= 0) f(prev[static_cast<size_t>(op)]);
}

}  // namespace

std::vector<OpId> topological_order(const Schedule& s) {
  const size_t n = s.ops.size();
  const auto prev = stream_predecessors(s);
  std::vector<int> waiting(n, 0);
  std::vector<std::vector<OpId>> succ(n);
  for (size_t i = 0; i < n; ++i)
    for_each_pred(s, prev, static_cast<OpId>(i), [&](OpId p) {
      succ[static_cast<size_t>(p)].push_back(static_cast<OpId>(i));
      ++waiting[i];
    });
  std::priority_queue<OpId, std::vector<OpId>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i)
    if (waiting[i] == 0) ready.push(static_cast<OpId>(i));
  std::vector<OpId> order;
  order.reserve(n);
  while (!ready.empty()) {
    OpId op = ready.top();
    ready.pop();
    order.push_back(op);
    for (OpId nxt : succ[static_cast<size_t>(op)])
      if (--waiting[static_cast<size_t>(nxt)] == 0) ready.push(nxt);
  }
  if (order.size() != n) {
    auto cycle = find_cycle(s);
    throw ScheduleError(fmt::format("{}: is on a dependency cycle", describe(s, cycle ? cycle->front() : -1)));
  }
  return order;
}

std::optional<std::vector<OpId>> find_cycle(const Schedule& s) {
  const size_t n = s.ops.size();
  const auto prev = stream_predecessors(s);
  enum : uint8_t { unseen, open, done };
  std::vector<uint8_t> state(n, unseen);
  for (size_t root = 0; root < n; ++root) {
    if (state[root] != unseen) continue;
    // Iterative DFS; each frame remembers its predecessors and how far it got.
    std::vector<std::pair<OpId, std::vector<OpId>>> stack;
    auto push = [&](OpId op) {
      state[static_cast<size_t>(op)] = open;
      std::vector<OpId> preds;
      for_each_pred(s, prev, op, [&](OpId p) { preds.push_back(p); });
      std::reverse(preds.begin(), preds.end());  // popped from the back: visit in listed order
      stack.emplace_back(op, std::move(preds));
    };
    push(static_cast<OpId>(root));
    while (!stack.empty()) {
      auto& [op, preds] = stack.back();
      if (preds.empty()) {
        state[static_cast<size_t>(op)] = done;
        stack.pop_back();
        continue;
      }
      OpId p = preds.back();
      preds.pop_back();
      if (state[static_cast<size_t>(p)] == open) {
        // The stack from p up to op: each frame depends on the one above it, and op on p.
        std::vector<OpId> cycle{p};
        for (size_t k = stack.size(); k-- > 0 && stack[k].first != p;) cycle.insert(cycle.begin() + 1, stack[k].first);
        return cycle;
      }
      if (state[static_cast<size_t>(p)] == unseen) push(p);  // invalidates op and preds
    }
  }
  return std::nullopt;
}

}  // namespace rm::schedule
