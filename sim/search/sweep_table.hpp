// The rows of a sweep: one per grid point, its inputs (each grid key) and what
// the point predicts, as CSV and JSON from one list of columns, so the two
// never disagree. Numbers are written as `simulate --json` writes them (the
// shortest text that reads back to the same double), so a row can be compared
// with the simulate output of its point to the digit. docs/sweep.md lists
// the columns.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/search/evaluate.hpp"
#include "sim/search/grid.hpp"

namespace rm::search {

// Every column of a sweep over `grid`, in order: point, the grid keys, then
// sweep_metric_columns(), then error.
std::vector<std::string> sweep_columns(const Grid& grid);
// The columns a point's outcome fills (empty in a row whose point could not run).
const std::vector<std::string>& sweep_metric_columns();

// One row, keyed by the columns in their order. `outcome` is null when the
// point's experiment did not load (p.error says why).
nlohmann::ordered_json sweep_row(const Grid& grid, const GridPoint& p, const Outcome* outcome);

// RFC 4180 CSV: a header line of the columns, then one line per row; null
// cells are empty; a cell with a comma, quote or line break is quoted.
std::string sweep_csv(const std::vector<std::string>& columns, const std::vector<nlohmann::ordered_json>& rows);

// One cell's CSV text (no quoting).
std::string csv_cell_text(const nlohmann::ordered_json& v);

}  // namespace rm::search
