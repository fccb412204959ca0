// What ringmaster-run prints at the end, from the measured Timeline: the step
// (each timed iteration's aligned length: median, min, max), the clock
// alignment's uncertainty, and per op kind how many ops ran and how long they
// took (median per op, summed, per rank on average) — a table by default,
// JSON with --json (with the --check figures when there are any).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/check.hpp"
#include "traces/timeline.hpp"

namespace rm::runtime {

nlohmann::json summary_json(const traces::Timeline& t, const std::optional<CheckReport>& check, int ranks,
                            const std::string& trace_path);
std::string summary_table(const nlohmann::json& summary);

}  // namespace rm::runtime
