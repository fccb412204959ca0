// The grid of a sweep (sim/search/grid.hpp) and its rows (sweep_table.hpp):
// parsing against hand-written cases, the cross product against nested loops,
// every point equal to load_experiment of its overrides, bad values refused
// for the whole grid with the --grid and key named, and CSV that reads back
// to the cells it was written from.
#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/config_error_of.hpp"
#include "sim/config/config_store.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/search/grid.hpp"
#include "sim/search/sweep_table.hpp"

namespace rm::search {
namespace {

using ::testing::HasSubstr;

ConfigStore store() { return ConfigStore({std::string(RINGMASTER_SOURCE_DIR) + "/configs"}); }
// One 8-GPU node, small sequences: loading is all these tests do.
const std::vector<std::string> kSets{"cluster=h200-1x8", "workload.seq_len=16k", "parallel.cp=8",
                                     "scope=attention_fwd"};

using rm::test::config_error_of;

TEST(GridAxis, SplitsAtTopLevelCommasOnly) {
  const GridAxis a = parse_grid_axis("parallel.cp=2,4,8");
  EXPECT_EQ(a.key, "parallel.cp");
  EXPECT_EQ(a.values, (std::vector<std::string>{"2", "4", "8"}));
  EXPECT_EQ(a.spec, "parallel.cp=2,4,8");
  EXPECT_EQ(parse_grid_axis("k=[1,2],{\"a\":1,\"b\":[3,4]},\"x,y\"").values,
            (std::vector<std::string>{"[1,2]", "{\"a\":1,\"b\":[3,4]}", "\"x,y\""}));
  EXPECT_EQ(parse_grid_axis("k=\"a\\\",b\",c").values, (std::vector<std::string>{"\"a\\\",b\"", "c"}));
  EXPECT_EQ(parse_grid_axis("workload.seq_len=128k").values, (std::vector<std::string>{"128k"}));
  EXPECT_EQ(parse_grid_axis("k=a=b").values, (std::vector<std::string>{"a=b"}));  // only the first '=' splits
}

TEST(GridAxis, RefusesMalformedSpecsNamingThem) {
  EXPECT_THAT(config_error_of([] { parse_grid_axis("parallel.cp"); }), HasSubstr("--grid parallel.cp: expected KEY=V1,V2"));
  EXPECT_THAT(config_error_of([] { parse_grid_axis("=2,4"); }), HasSubstr("--grid =2,4: empty key"));
  EXPECT_THAT(config_error_of([] { parse_grid_axis("parallel.cp="); }), HasSubstr("--grid parallel.cp=: empty value"));
  EXPECT_THAT(config_error_of([] { parse_grid_axis("parallel.cp=2,,4"); }), HasSubstr("empty value"));
  EXPECT_THAT(config_error_of([] { parse_grid_axis("parallel.cp=2,4,"); }), HasSubstr("empty value"));
  EXPECT_THAT(config_error_of([] { parse_grid_axis("parallel.cp=2,4,2"); }),
              HasSubstr("--grid parallel.cp=2,4,2: value \"2\" is given twice"));
}

TEST(Grid, CrossProductIsRowMajorLikeNestedLoops) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<GridAxis> axes;
    const int n_axes = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < n_axes; ++k) {
      GridAxis a;
      a.key = std::string("k").append(std::to_string(k));
      const int n = 1 + static_cast<int>(rng() % 4);
      for (int v = 0; v < n; ++v) a.values.push_back(std::to_string(v));
      a.spec = std::string(a.key).append("=...");
      axes.push_back(a);
    }
    const Grid g(axes);
    // Oracle: an odometer, the last axis turning fastest.
    std::vector<int> odo(axes.size(), 0);
    int64_t count = 0;
    for (bool more = true; more; ++count) {
      ASSERT_EQ(g.value_indices(count), odo);
      std::vector<std::string> want;
      for (size_t k = 0; k < axes.size(); ++k) want.push_back(axes[k].key + "=" + axes[k].values[odo[k]]);
      ASSERT_EQ(g.assignments(count), want);
      more = false;
      for (size_t k = axes.size(); k-- > 0;) {
        if (++odo[k] < static_cast<int>(axes[k].values.size())) {
          more = true;
          break;
        }
        odo[k] = 0;
      }
    }
    EXPECT_EQ(g.size(), count);
  }
}

TEST(Grid, RefusesNoAxesARepeatedKeyAndTooManyPoints) {
  EXPECT_THAT(config_error_of([] { Grid g({}); }), HasSubstr("at least one --grid"));
  EXPECT_THAT(config_error_of([] { Grid g({parse_grid_axis("parallel.cp=2,4"), parse_grid_axis("parallel.cp=8")}); }),
              HasSubstr("--grid parallel.cp=8: key parallel.cp is on another --grid too"));
  std::string many = "=0";
  for (int v = 1; v < 1000; ++v) many.append(",").append(std::to_string(v));
  std::vector<GridAxis> big{parse_grid_axis(std::string("a").append(many)),
                            parse_grid_axis(std::string("b").append(many.substr(0, many.find(",100,"))))};
  ASSERT_EQ(big[1].values.size(), 100u);
  EXPECT_EQ(Grid(big).size(), kMaxGridPoints);  // 1000 x 100: the most allowed
  big.push_back(parse_grid_axis("c=1,2"));
  EXPECT_THAT(config_error_of([&] { Grid g(big); }), HasSubstr("more than 100000 points"));
}

TEST(LoadGrid, EveryPointIsItsOverridesLoadedAndInputsAreResolved) {
  const Grid g({parse_grid_axis("workload.seq_len=8k,16k"), parse_grid_axis("parallel.partition=zigzag,stripe"),
                parse_grid_axis("cluster.nic.bandwidth_Gbps=200,800")});
  const auto pts = load_grid(g, store(), "", kSets);
  ASSERT_EQ(pts.size(), 8u);
  for (const GridPoint& p : pts) {
    ASSERT_TRUE(p.experiment.has_value()) << p.error;
    std::vector<std::string> all = kSets;
    for (const auto& a : g.assignments(p.index)) all.push_back(a);
    const Experiment want = load_experiment(store(), "", all);
    EXPECT_EQ(p.experiment->resolved, want.resolved);
    EXPECT_EQ(summary_json(*p.experiment), summary_json(want));
  }
  // "8k" is the integer it resolves to; a cluster field is read from the inlined cluster.
  EXPECT_EQ(pts[0].inputs, (std::vector<nlohmann::json>{8192, "zigzag", 200}));
  EXPECT_EQ(pts[7].inputs, (std::vector<nlohmann::json>{16384, "stripe", 800}));
  EXPECT_DOUBLE_EQ(pts[7].experiment->cluster.nic.bandwidth_GBps, 100);  // 800 Gb/s
}

TEST(LoadGrid, APointThatFailsOnlyInItsCombinationKeepsItsError) {
  // hp = 2 with cp = 8 needs 16 GPUs of 8; each value alone fits some point.
  const Grid g({parse_grid_axis("parallel.cp=8,4"), parse_grid_axis("parallel.hp=1,2")});
  const auto pts = load_grid(g, store(), "", kSets);
  ASSERT_EQ(pts.size(), 4u);
  EXPECT_TRUE(pts[0].experiment && pts[2].experiment && pts[3].experiment);
  EXPECT_FALSE(pts[1].experiment.has_value());
  EXPECT_THAT(pts[1].error, HasSubstr("exceeds the 8 GPUs"));
  EXPECT_EQ(pts[1].inputs, (std::vector<nlohmann::json>{8, 2}));  // still typed like the other rows
}

TEST(LoadGrid, AValueNoPointCanUseIsBadInputNamingTheGridAndKey) {
  auto err = [&](std::vector<std::string> specs) {
    return config_error_of([&] {
      std::vector<GridAxis> axes;
      for (const auto& s : specs) axes.push_back(parse_grid_axis(s));
      load_grid(Grid(axes), store(), "", kSets);
    });
  };
  EXPECT_THAT(err({"parallel.nonsense=1,2"}), HasSubstr("$.parallel.nonsense: unknown key"));
  EXPECT_THAT(err({"parallel.nonsense=1,2"}), HasSubstr("parallel.nonsense=1"));
  EXPECT_THAT(err({"cluster.nic.speed=1"}), HasSubstr("$.nic.speed: unknown key"));
  EXPECT_THAT(err({"parallel.cp=2,abc"}),
              HasSubstr("--grid parallel.cp=2,abc: value \"abc\" fits no point of the grid (parallel.cp=abc)"));
  EXPECT_THAT(err({"parallel.cp=2,abc"}), HasSubstr("$.parallel.cp: expected an integer"));
  EXPECT_THAT(err({"parallel.partition=zigzag,stripe", "cluster.nic.bandwidth_Gbps=200,fast"}),
              HasSubstr("--grid cluster.nic.bandwidth_Gbps=200,fast: value \"fast\""));
  EXPECT_THAT(err({"parallel.partition=zigzag,stripe", "cluster.nic.bandwidth_Gbps=200,fast"}), HasSubstr("expected a number"));
  EXPECT_THAT(err({"parallel.cp=4,64"}), HasSubstr("--grid parallel.cp=4,64: value \"64\" fits no point"));
  EXPECT_THAT(err({"parallel.ring=ring,circle"}), HasSubstr("expected one of"));
  // Neither the experiment nor any point loads (cp = 32 of the default on 8 GPUs): the first point's error.
  EXPECT_THAT(config_error_of([] {
                load_grid(Grid({parse_grid_axis("parallel.partition=zigzag,stripe")}), store(), "",
                          {"cluster=h200-1x8"});
              }),
              HasSubstr("--grid: no point of the grid loads; the first (parallel.partition=zigzag): "));
}

TEST(SweepTable, ColumnsAreThePointTheGridKeysTheMetricsAndTheError) {
  const Grid g({parse_grid_axis("parallel.cp=4,8"), parse_grid_axis("parallel.ring=ring")});
  std::vector<std::string> want{"point", "parallel.cp", "parallel.ring"};
  for (const auto& m : sweep_metric_columns()) want.push_back(m);
  want.push_back("error");
  EXPECT_EQ(sweep_columns(g), want);
  for (const char* m : {"step_time_s", "tokens_per_s", "mfu", "hfu", "imbalance_worker", "imbalance_step",
                        "compute_s", "exposed_comm_s", "idle_s", "memory_peak_GB", "memory_oom", "bound_by", "ops"})
    EXPECT_NE(std::find(want.begin(), want.end(), m), want.end()) << m;
}

TEST(SweepTable, ARowCarriesTheOutcomeExactlyAndAFailedOneOnlyItsError) {
  const Grid g({parse_grid_axis("parallel.cp=4,8")});
  GridPoint p;
  p.index = 1;
  p.inputs = {8};
  Outcome o;
  o.ok = true;
  o.report.step_time_s = 0.1 + 0.2;  // not a round number in binary
  o.report.tokens_per_s = 1.0 / 3.0;
  o.report.mfu = 0.25;
  o.report.hfu = 0.5;
  o.report.imbalance.worker = 1.125;
  o.report.imbalance.step = 1.5;
  o.report.breakdown.mean = {-1, 0.2, 0.05, 0.05};
  o.report.gpus = 8;
  o.ops = 774;
  o.generator = "zigzag-ring";
  const auto row = sweep_row(g, p, &o);
  std::vector<std::string> keys;
  for (const auto& [k, v] : row.items()) keys.push_back(k);
  EXPECT_EQ(keys, sweep_columns(g));
  EXPECT_EQ(row["step_time_s"].get<double>(), 0.1 + 0.2);
  EXPECT_EQ(row["tokens_per_s"].get<double>(), 1.0 / 3.0);
  EXPECT_EQ(row["exposed_comm_s"].get<double>(), 0.05);
  EXPECT_EQ(row["ops"], 774);
  EXPECT_EQ(row["generator"], "zigzag-ring");
  EXPECT_TRUE(row["error"].is_null());
  // Written as simulate --json writes it: the shortest text that reads back.
  EXPECT_EQ(csv_cell_text(row["step_time_s"]), nlohmann::json(0.1 + 0.2).dump());

  Outcome failed;
  failed.error = "too big";
  const auto bad = sweep_row(g, p, &failed);
  EXPECT_EQ(bad["error"], "too big");
  EXPECT_TRUE(bad["step_time_s"].is_null());
  p.error = "does not load";
  EXPECT_EQ(sweep_row(g, p, nullptr)["error"], "does not load");
}

// A small RFC 4180 reader: the oracle for the writer.
std::vector<std::vector<std::string>> read_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1);
  std::string cell;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') cell += '"', ++i;
      else if (c == '"') quoted = false;
      else cell += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().push_back(cell), cell.clear();
    } else if (c == '\n') {
      rows.back().push_back(cell), cell.clear();
      rows.emplace_back();
    } else {
      cell += c;
    }
  }
  rows.pop_back();  // after the last line break
  return rows;
}

TEST(SweepTable, CsvReadsBackToTheCells) {
  const std::vector<std::string> cols{"point", "name", "x", "error"};
  std::vector<nlohmann::ordered_json> rows;
  const char* nasty[] = {"plain", "a,b", "say \"hi\"", "two\nlines", "", " spaced "};
  for (int i = 0; i < 6; ++i) {
    nlohmann::ordered_json r;
    r["point"] = i;
    r["name"] = nasty[i];
    r["x"] = i % 2 ? nlohmann::ordered_json(0.1 * i) : nlohmann::ordered_json();
    r["error"] = i == 3 ? nlohmann::ordered_json("file: $.a: expected \"x\", got 1,2") : nlohmann::ordered_json();
    rows.push_back(r);
  }
  const auto back = read_csv(sweep_csv(cols, rows));
  ASSERT_EQ(back.size(), rows.size() + 1);
  EXPECT_EQ(back[0], cols);
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t c = 0; c < cols.size(); ++c) EXPECT_EQ(back[i + 1][c], csv_cell_text(rows[i][cols[c]])) << i << c;
}

}  // namespace
}  // namespace rm::search
