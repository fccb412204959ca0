#include "sim/frameworks/framework.hpp"

#include <fmt/format.h>

#include "sim/config/enum_names.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/frameworks/emitters.hpp"

namespace rm::frameworks {

namespace {

const EnumName<Framework> kFrameworks[] = {{Framework::experiment, "experiment"}, {Framework::megatron, "megatron"},
                                           {Framework::te, "te"},                 {Framework::internevo, "internevo"},
                                           {Framework::yunchang, "yunchang"},     {Framework::mtraining, "mtraining"}};

}  // namespace

const char* to_string(Framework f) { return name_of(kFrameworks, f); }
std::optional<Framework> framework_from_string(std::string_view s) { return value_of(kFrameworks, s); }

std::string framework_names() {
  std::string s;
  for (const auto& f : kFrameworks) s += (s.empty() ? "" : ", ") + std::string(f.name);
  return s;
}

Experiment with_parallel(const Experiment& e, const Parallel& p) {
  Experiment out = e;
  out.parallel = p;
  // Every key as an experiment file spells it, over the resolved parallel block.
  const nlohmann::json keys = summary_json(out)["parallel"];
  for (auto it = keys.begin(); it != keys.end(); ++it) out.resolved["parallel"][it.key()] = *it;
  check_parallel(out);
  return out;
}

std::string layout_line(const Parallel& p) {
  std::string s = fmt::format("dp{} tp{} hp{} cp{}", p.dp, p.tp, p.hp, p.cp);
  if (p.cp > 1) {
    s += fmt::format(" {}", to_string(p.partition));
    if (p.partition == Partition::stripe || p.partition == Partition::balanced) s += fmt::format("/{}", p.stripe_tokens);
    s += fmt::format(" {}", to_string(p.ring));
    if (p.ring == RingKind::double_ring) s += fmt::format("/w{}", p.window);
    if (p.ring_order != RingOrder::rank) s += fmt::format(" {}", to_string(p.ring_order));
    s += fmt::format(" shuffle={}", to_string(p.shuffle));
  }
  if (p.hp > 1 && p.cp > 1) s += fmt::format(" {}", to_string(p.placement));
  s += fmt::format(" ckpt={} zero{}", to_string(p.checkpoint), p.zero_stage);
  return s;
}

void Nearest::refuse(const std::string& why) const {
  throw ConfigError(fmt::format("--emit {}: {} cannot run this layout ({}): {}", framework_, framework_,
                                layout_line(p), why));
}

std::string Nearest::describe(const char* key, const std::string& from, const std::string& to, const std::string& why) {
  return fmt::format("parallel.{} {} (was {}): {}", key, to, from, why);
}

std::string comment_header(const std::string& prefix, const std::string& title, const Experiment& runs,
                           const std::vector<std::string>& changes) {
  std::string s = fmt::format("{} {}\n", prefix, title);
  s += fmt::format("{} layout: {} on {} GPUs of {}; model {}, {} tokens x {} per step per replica\n", prefix,
                   layout_line(runs.parallel), runs.parallel.world(), runs.cluster.name, runs.model.name,
                   runs.workload.seq_len, runs.workload.batch);
  if (changes.empty()) {
    s += fmt::format("{} exactly the layout ringmaster predicted\n", prefix);
  } else {
    s += fmt::format("{} the nearest layout it runs, not the one asked for:\n", prefix);
    for (const auto& c : changes) s += fmt::format("{}   {}\n", prefix, c);
  }
  return s;
}

Emission emit(Framework f, const Experiment& e, const ConfigStore& store) {
  switch (f) {
    case Framework::experiment: return emit_experiment(e, store);
    case Framework::megatron: return emit_megatron(e);
    case Framework::te: return emit_te(e);
    case Framework::internevo: return emit_internevo(e);
    case Framework::yunchang: return emit_yunchang(e);
    case Framework::mtraining: return emit_mtraining(e);
  }
  throw ConfigError("--emit: unknown framework");
}

}  // namespace rm::frameworks
