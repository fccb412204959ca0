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

void set_layout(Experiment& e, const Layout& l) {
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

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
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

}  // namespace

Space enumerate_space(const Experiment& base, const SpaceOptions& o) {
  const Layout b = layout_of(base);
  const int gpus = o.gpus > 0 ? o.gpus : base.cluster.gpus();
  auto is_fixed = [&](const char* k) { return o.fixed.count(k) > 0; };
  Space out;
  Experiment scratch = base;  // one copy: the checks read fields, not the resolved JSON
  auto consider = [&](const Layout& l) {
    ++out.enumerated;
    try {
      set_layout(scratch, l);
      generate::count_step_ops(scratch);  // the generator's structure checks (hierarchical groups, windows)
      out.layouts.push_back(l);
    } catch (const ConfigError& err) {
      if (out.invalid++ == 0) out.first_invalid = err.what();
    }
  };

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
              for (int window : pick(o, "parallel.window", b.window, dr, divisors(cp), 1)) {
                std::vector<PlacementOrder> placements = {PlacementOrder::head_first};
                if (hp > 1 && cp > 1) placements.push_back(PlacementOrder::context_first);
                if (dr) placements.push_back(PlacementOrder::interleaved);
                for (PlacementOrder pl : pick(o, "parallel.placement", b.placement, true, placements,
                                              PlacementOrder::head_first)) {
                  std::vector<RingOrder> orders = {RingOrder::rank, RingOrder::topology};
                  if (cp % 2 == 0) orders.insert(orders.begin() + 1, RingOrder::zigzag_pairs);
                  for (RingOrder order : pick(o, "parallel.ring_order", b.ring_order,
                                              ring_applies && ring == RingKind::ring, orders, RingOrder::rank)) {
                    for (ShuffleMode sh : pick(o, "parallel.shuffle", b.shuffle,
                                               ring_applies && part != Partition::contiguous,
                                               {ShuffleMode::per_call, ShuffleMode::once}, ShuffleMode::per_call)) {
                      for (Checkpoint ck : pick(o, "parallel.checkpoint", b.checkpoint, true,
                                                {Checkpoint::none, Checkpoint::full, Checkpoint::selective},
                                                Checkpoint::full)) {
                        for (int zero : pick(o, "parallel.zero_stage", b.zero_stage, dp > 1, {0, 1, 2, 3},
                                             b.zero_stage)) {
                          consider(Layout{dp, tp, hp, cp, part, width, ring, window, pl, order, sh, ck, zero});
                        }
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace rm::search
