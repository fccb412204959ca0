#include "sim/search/plan_space.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "sim/generate/footprint.hpp"

namespace rm::search {

Layout layout_of(const Experiment& e) {
  const Parallel& p = e.parallel;
  return Layout{p.dp,         p.tp,        p.hp,        p.cp,      p.partition,  p.stripe_tokens,
                p.ring,       p.window,    p.placement, p.ring_order, p.shuffle, p.checkpoint,
                p.zero_stage};
}

nlohmann::json layout_json(const Layout& l) {
  return {{"dp", l.dp},
                      {"tp", l.tp},
                      {"hp", l.hp},
                      {"cp", l.cp},
                      {"partition", to_string(l.partition)},
                      {"stripe_tokens", l.stripe_tokens},
                      {"ring", to_string(l.ring)},
                      {"window", l.window},
                      {"placement", to_string(l.placement)},
                      {"ring_order", to_string(l.ring_order)},
                      {"shuffle", to_string(l.shuffle)},
                      {"checkpoint", to_string(l.checkpoint)},
                      {"zero_stage", l.zero_stage}};
}

std::string layout_label(const Layout& l) {
  std::string s = fmt::format("dp{} ", l.dp);
  if (l.tp != 1) s += fmt::format("tp{} ", l.tp);
  s += fmt::format("hp{} cp{}", l.hp, l.cp);
  if (l.cp > 1) {
    s += fmt::format(" {}", to_string(l.partition));
    if (l.partition == Partition::stripe || l.partition == Partition::balanced) s += fmt::format("/{}", l.stripe_tokens);
    s += fmt::format(" {}", to_string(l.ring));
    if (l.ring == RingKind::double_ring) s += fmt::format("/w{}", l.window);
    if (l.ring_order != RingOrder::rank) s += fmt::format(" {}", to_string(l.ring_order));
    if (l.partition != Partition::contiguous) s += fmt::format(" {}", to_string(l.shuffle));
  }
  if (l.hp > 1 && l.cp > 1) s += fmt::format(" {}", to_string(l.placement));
  else if (l.placement == PlacementOrder::interleaved) s += " interleaved";
  s += fmt::format(" ckpt={}", to_string(l.checkpoint));
  if (l.dp > 1) s += fmt::format(" zero{}", l.zero_stage);
  return s;
}

const std::vector<std::string>& searched_keys() {
  static const std::vector<std::string> k = {
      "parallel.dp",        "parallel.tp",         "parallel.hp",        "parallel.cp",
      "parallel.partition", "parallel.stripe_tokens", "parallel.ring",   "parallel.window",
      "parallel.placement", "parallel.ring_order", "parallel.shuffle",   "parallel.checkpoint",
      "parallel.zero_stage"};
  return k;
}

void assign_layout(Experiment& e, const Layout& l) {
  Parallel& p = e.parallel;
  p.dp = l.dp;
  p.tp = l.tp;
  p.hp = l.hp;
  p.cp = l.cp;
  p.partition = l.partition;
  p.stripe_tokens = l.stripe_tokens;
  p.ring = l.ring;
  p.window = l.window;
  p.placement = l.placement;
  p.ring_order = l.ring_order;
  p.shuffle = l.shuffle;
  p.checkpoint = l.checkpoint;
  p.zero_stage = l.zero_stage;
}

void set_layout(Experiment& e, const Layout& l) {
  assign_layout(e, l);
  check_parallel(e);
}

Experiment apply_layout(const Experiment& base, const Layout& l) {
  Experiment e = base;
  set_layout(e, l);
  // The keys as an experiment file spells them, over the base's parallel block
  // (its other keys, e.g. grad_comm_dtype, stay as written).
  nlohmann::json& p = e.resolved["parallel"];
  const nlohmann::json keys = layout_json(l);
  for (auto it = keys.begin(); it != keys.end(); ++it) p[it.key()] = *it;
  return e;
}

namespace {

// Ascending, in O(sqrt(n)): the space of a 100,000-node cluster asks for
// divisors of 800,000 thousands of times.
std::vector<int> divisors(int n) {
  std::vector<int> low, high;
  for (int i = 1; int64_t(i) * i <= n; ++i) {
    if (n % i != 0) continue;
    low.push_back(i);
    if (i != n / i) high.push_back(n / i);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

// The values a key takes: the base's when fixed, every value when it can
// change the step, else one canonical value.
template <class T>
std::vector<T> pick(const SpaceOptions& o, const std::string& key, T base, bool applies, std::vector<T> all,
                    T canonical) {
  if (o.fixed.count(key)) return {base};
  if (!applies) return {canonical};
  return all;
}

// The keys below the ring kind: their values depend only on the keys above
// (the factorisation, partition, stripe width, ring), so a group's points are
// their product — what count_space multiplies and enumerate_space walks.
struct InnerAxes {
  std::vector<int> windows;
  std::vector<PlacementOrder> placements;
  std::vector<RingOrder> orders;
  std::vector<ShuffleMode> shuffles;
  std::vector<Checkpoint> checkpoints;
  std::vector<int> zero_stages;

  int64_t points() const {
    return int64_t(windows.size()) * int64_t(placements.size()) * int64_t(orders.size()) *
           int64_t(shuffles.size()) * int64_t(checkpoints.size()) * int64_t(zero_stages.size());
  }
};

// Calls visit(head, axes) for every group of the space, in enumeration order;
// `head` holds the keys above the ring kind's inner axes (the rest are the
// base's until set). The one definition of the space's shape.
template <class Visit>
void for_each_group(const Experiment& base, const SpaceOptions& o, Visit&& visit) {
  const Layout b = layout_of(base);
  const int gpus = o.gpus > 0 ? o.gpus : base.cluster.gpus();
  auto is_fixed = [&](const char* k) { return o.fixed.count(k) > 0; };

  std::vector<int64_t> widths = o.stripe_tokens;
  widths.push_back(b.stripe_tokens);
  std::sort(widths.begin(), widths.end());
  widths.erase(std::unique(widths.begin(), widths.end()), widths.end());

  for (int dp : divisors(gpus)) {
    if (is_fixed("parallel.dp") && dp != b.dp) continue;
    for (int tp : divisors(gpus / dp)) {
      const int max_tp = o.max_tp > 0 ? o.max_tp : base.cluster.gpus_per_node;
      if (tp > max_tp || (is_fixed("parallel.tp") && tp != b.tp)) continue;
      for (int hp : divisors(gpus / dp / tp)) {
        if (base.model.heads % hp != 0 || (is_fixed("parallel.hp") && hp != b.hp)) continue;
        const int cp = gpus / dp / tp / hp;
        if (is_fixed("parallel.cp") && cp != b.cp) continue;
        const bool ring_applies = cp > 1;
        for (Partition part : pick(o, "parallel.partition", b.partition, ring_applies,
                                   {Partition::contiguous, Partition::zigzag, Partition::stripe, Partition::balanced},
                                   Partition::contiguous)) {
          const bool striped = part == Partition::stripe || part == Partition::balanced;
          for (int64_t width : pick(o, "parallel.stripe_tokens", b.stripe_tokens, striped, widths, b.stripe_tokens)) {
            for (RingKind ring : pick(o, "parallel.ring", b.ring, ring_applies,
                                      {RingKind::ring, RingKind::double_ring, RingKind::hierarchical}, RingKind::ring)) {
              const bool dr = ring == RingKind::double_ring;
              InnerAxes a;
              a.windows = pick(o, "parallel.window", b.window, dr, dr ? divisors(cp) : std::vector<int>{}, 1);
              std::vector<PlacementOrder> placements = {PlacementOrder::head_first};
              if (hp > 1 && cp > 1) placements.push_back(PlacementOrder::context_first);
              if (dr) placements.push_back(PlacementOrder::interleaved);
              a.placements = pick(o, "parallel.placement", b.placement, true, placements, PlacementOrder::head_first);
              std::vector<RingOrder> orders = {RingOrder::rank, RingOrder::topology};
              if (cp % 2 == 0) orders.insert(orders.begin() + 1, RingOrder::zigzag_pairs);
              a.orders = pick(o, "parallel.ring_order", b.ring_order, ring_applies && ring == RingKind::ring, orders,
                              RingOrder::rank);
              a.shuffles = pick(o, "parallel.shuffle", b.shuffle, ring_applies && part != Partition::contiguous,
                                {ShuffleMode::per_call, ShuffleMode::once}, ShuffleMode::per_call);
              a.checkpoints = pick(o, "parallel.checkpoint", b.checkpoint, true,
                                   {Checkpoint::none, Checkpoint::full, Checkpoint::selective}, Checkpoint::full);
              a.zero_stages = pick(o, "parallel.zero_stage", b.zero_stage, dp > 1, {0, 1, 2, 3}, b.zero_stage);
              Layout head = b;
              head.dp = dp, head.tp = tp, head.hp = hp, head.cp = cp;
              head.partition = part, head.stripe_tokens = width, head.ring = ring;
              visit(head, a);
            }
          }
        }
      }
    }
  }
}

}  // namespace

SpaceSize count_space(const Experiment& base, const SpaceOptions& o) {
  SpaceSize n;
  for_each_group(base, o, [&](const Layout& head, const InnerAxes& a) {
    n.layouts += a.points();
    if (head.ring == RingKind::hierarchical && head.cp > 1) n.hierarchical += a.points();
  });
  return n;
}

Space enumerate_space(const Experiment& base, const SpaceOptions& o,
                      const std::function<void(int64_t, int64_t)>& progress) {
  const int64_t total = progress ? count_space(base, o).layouts : 0;
  Space out;
  Experiment scratch = base;  // one copy: the checks read fields, not the resolved JSON
  auto consider = [&](const Layout& l) {
    ++out.enumerated;
    // The parser's rules, then the generator's structure checks (hierarchical
    // groups, windows), both as returned reasons: most of a large space is
    // refused, and an exception per refusal dominated the enumeration.
    assign_layout(scratch, l);
    std::string why = parallel_refusal(scratch);
    if (why.empty()) why = generate::structure_refusal(scratch);
    if (why.empty()) {
      out.layouts.push_back(l);
    } else if (out.invalid++ == 0) {
      out.first_invalid = std::move(why);
    }
  };
  for_each_group(base, o, [&](Layout l, const InnerAxes& a) {
    for (int window : a.windows) {
      l.window = window;
      for (PlacementOrder pl : a.placements) {
        l.placement = pl;
        for (RingOrder order : a.orders) {
          l.ring_order = order;
          for (ShuffleMode sh : a.shuffles) {
            l.shuffle = sh;
            for (Checkpoint ck : a.checkpoints) {
              l.checkpoint = ck;
              for (int zero : a.zero_stages) {
                l.zero_stage = zero;
                consider(l);
              }
            }
          }
        }
      }
    }
    if (progress) progress(out.enumerated, total);
  });
  return out;
}

}  // namespace rm::search
