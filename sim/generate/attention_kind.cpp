#include "sim/generate/attention_kind.hpp"

#include <fmt/format.h>

namespace rm::generate {

std::string generator_name(const Experiment& e) {
  const Parallel& p = e.parallel;
  const std::string tp = p.tp > 1 ? fmt::format("tp{}-", p.tp) : "";
  if (p.cp == 1) return tp + (p.hp == 1 ? "single_gpu" : "ulysses");
  return fmt::format("{}{}{}-{}", tp, p.hp > 1 ? "2d-" : "", to_string(p.partition), placement::attention_kind_name(e));
}

}  // namespace rm::generate
