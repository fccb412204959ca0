// Wall time of `ringmaster plan`'s search (sim/search/plan.hpp) on an
// experiment: how many layouts it enumerated, refused, pruned and simulated,
// and the winner — one run, figures measured in it (the machine is shared:
// compare figures of one run, not across runs). --count: the space and its
// memory screen only (e.g. the 4,096-GPU 4M case: --set cluster=a100-80g-8x8-hdr
// --set cluster.nodes=512 --set workload.seq_len=4M on loongtrain-llama2-7b-1m).
// --case-4096: the scale case, the experiment on 512 nodes (4,096 GPUs)
// at 4M tokens (`--set cluster.nodes=512 --set workload.seq_len=4m`; minutes).
// --no-symmetry, --no-extrapolate: as `plan --symmetry off`, `--extrapolate off`;
// without --screen-budget, the budget is `plan --screen-budget auto`'s.
// Prints the wall time of each stage of the search, wall and CPU time and the
// peak resident memory of the process.
//   build/bin/bench_plan [EXPERIMENT] [--set path=value ...] [--fix key ...] [--gpus N]
//                        [--top K] [--no-simgrid] [--exhaustive] [--no-screen] [--jobs N] [--count]
//                        [--case-4096] [--no-symmetry] [--no-extrapolate] [--screen-budget N]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "sim/config/experiment.hpp"
#include "sim/search/plan.hpp"
#include "tools/cli/allocator_tuning.hpp"

int main(int argc, char** argv) {
  rm::cli::back_heap_with_huge_pages(argv);  // as the ringmaster executable runs
  rm::cli::keep_freed_memory();  // as `ringmaster plan` runs
  std::vector<std::string> sets;
  rm::search::PlanOptions o;
  o.top_k = 5;
  std::string file;
  bool count_only = false;  // enumerate the space only
  bool budget_given = false;  // else the screen budget is `plan --screen-budget auto`'s
  for (int i = 1; i < argc; ++i) {
    const bool more = i + 1 < argc;
    if (!std::strcmp(argv[i], "--set") && more) sets.push_back(argv[++i]);
    else if (!std::strcmp(argv[i], "--fix") && more) o.space.fixed.insert(argv[++i]);
    else if (!std::strcmp(argv[i], "--gpus") && more) o.space.gpus = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--top") && more) o.top_k = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--jobs") && more) o.jobs = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-simgrid")) o.confirm_simgrid = false;
    else if (!std::strcmp(argv[i], "--exhaustive")) o.prune = false;
    else if (!std::strcmp(argv[i], "--no-screen")) o.screen = false;
    else if (!std::strcmp(argv[i], "--count")) count_only = true;
    else if (!std::strcmp(argv[i], "--case-4096")) sets.insert(sets.end(), {"cluster.nodes=512", "workload.seq_len=4m"});
    else if (!std::strcmp(argv[i], "--no-symmetry")) o.symmetry_above_ops = -1;
    else if (!std::strcmp(argv[i], "--screen-budget") && more) o.screen_budget = std::atoll(argv[++i]), budget_given = true;
    else if (!std::strcmp(argv[i], "--no-extrapolate")) o.extrapolate_above_ops = -1;
    else if (argv[i][0] != '-' && file.empty()) file = argv[i];
    else {
      std::fprintf(stderr,
                   "usage: bench_plan [EXPERIMENT] [--set path=value ...] [--fix key ...] [--gpus N] [--top K] "
                   "[--no-simgrid] [--exhaustive] [--no-screen] [--jobs N] [--count] [--case-4096] "
                   "[--no-symmetry] [--no-extrapolate] [--screen-budget N]\n");
      return 2;
    }
  }
  for (const std::string& s : sets) {
    const std::string k = s.substr(0, s.find('='));
    for (const std::string& key : rm::search::searched_keys())
      if (k == key) o.space.fixed.insert(k);
  }
  using clock = std::chrono::steady_clock;
  try {
    const rm::ConfigStore store;
    const rm::Experiment e = rm::load_experiment(store, file, sets);
    if (!budget_given) o.screen_budget = rm::search::auto_screen_budget(o.space.gpus > 0 ? o.space.gpus : e.cluster.gpus());
    if (count_only) {
      // The space and the memory screen only: what the planner does before it simulates anything.
      const auto t0c = clock::now();
      const rm::search::SpaceSize n = rm::search::count_space(e, o.space);
      std::printf("counted %lld layouts, %lld hierarchical (%.3f s); estimated enumeration %.1f s\n",
                  (long long)n.layouts, (long long)n.hierarchical,
                  std::chrono::duration<double>(clock::now() - t0c).count(),
                  rm::search::enumeration_seconds(n, o.space.gpus > 0 ? o.space.gpus : e.cluster.gpus()));
      const auto t = clock::now();
      const rm::search::Space s = rm::search::enumerate_space(e, o.space);
      const double t_enum = std::chrono::duration<double>(clock::now() - t).count();
      std::printf("layouts enumerated %lld, valid %zu, invalid %lld (%.2f s)\n", (long long)s.enumerated,
                  s.layouts.size(), (long long)s.invalid, t_enum);
      const auto t1 = clock::now();
      rm::Experiment scratch = e;
      int64_t fit = 0;
      for (const rm::search::Layout& l : s.layouts) {
        rm::search::set_layout(scratch, l);
        fit += rm::search::memory_fit(scratch).oom ? 0 : 1;
      }
      std::printf("fit in GPU memory %lld of %zu (%.2f s)\n", (long long)fit, s.layouts.size(),
                  std::chrono::duration<double>(clock::now() - t1).count());
      return 0;
    }
    double t_analytic_done = 0;
    const auto t0 = clock::now();
    std::vector<std::pair<std::string, double>> stages;  // each stage's first report, seconds since t0
    o.progress = [&](const std::string& stage, int64_t, int64_t) {
      const double now = std::chrono::duration<double>(clock::now() - t0).count();
      if (stage.find("SimGrid") != std::string::npos && t_analytic_done == 0) t_analytic_done = now;
      if (stages.empty() || stages.back().first != stage) stages.emplace_back(stage, now);
    };
    const rm::search::PlanResult r = rm::search::plan(e, store, o);
    const double total = std::chrono::duration<double>(clock::now() - t0).count();
    if (t_analytic_done == 0) t_analytic_done = total;
    const auto& st = r.stats;
    // A stage runs from its first progress report to the next stage's: the seed's
    // stage holds the screen's set-up (its floors) too.
    std::printf("stage (wall s, from its first progress report to the next stage's)\n");
    for (size_t i = 0; i < stages.size(); ++i)
      std::printf("  %-52s %8.1f\n", stages[i].first.c_str(),
                  (i + 1 < stages.size() ? stages[i + 1].second : total) - stages[i].second);
    std::printf("experiment %s, %d GPUs, scope %s\n", e.name.c_str(), st.gpus, rm::to_string(e.scope));
    std::printf("layouts enumerated     %lld\n", (long long)st.enumerated);
    std::printf("  invalid              %lld\n", (long long)st.invalid);
    std::printf("  out of memory        %lld\n", (long long)st.oom);
    std::printf("  screen: %lld layer simulations of %lld distinct layers (%lld skipped by the layer floor), %lld "
                "layouts not kept\n",
                (long long)st.screened, (long long)st.screen_points, (long long)st.screen_pruned,
                (long long)st.screened_out);
    std::printf("  screen: %lld layers too large to screen; budget %s\n", (long long)st.screen_too_large,
                st.screen_budget_hit ? "reached" : "not reached");
    std::printf("  pruned by the floor  %lld (%lld of them and %lld screen layers by the ring-transfer floor alone)\n",
                (long long)st.pruned_bound, (long long)st.pruned_comm, (long long)st.screen_pruned_comm);
    std::printf("  one replica for all  %lld simulations; estimated from steps of 1 and up to 4 layers: %lld full steps\n",
                (long long)st.one_replica, (long long)st.estimated);
    std::printf("  simulated (analytic) %lld (%lld could not run)\n", (long long)st.simulated, (long long)st.failed);
    std::printf("  confirmed (SimGrid)  %lld\n", (long long)st.confirmed);
    std::printf("search + analytic ranking  %.1f s\n", t_analytic_done);
    std::printf("total with SimGrid         %.1f s\n", total);
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    std::printf("CPU time %.1f s (user %.1f + sys %.1f), peak resident %.2f GB\n",
                double(ru.ru_utime.tv_sec) + ru.ru_utime.tv_usec * 1e-6 + double(ru.ru_stime.tv_sec) +
                    ru.ru_stime.tv_usec * 1e-6,
                double(ru.ru_utime.tv_sec) + ru.ru_utime.tv_usec * 1e-6,
                double(ru.ru_stime.tv_sec) + ru.ru_stime.tv_usec * 1e-6, double(ru.ru_maxrss) / (1024.0 * 1024.0));
    const auto& w = r.ranked.front();
    std::printf("winner %s: %.3f s (%s), analytic %.3f s%s%s\n", rm::search::layout_label(w.layout).c_str(),
                w.step_time_s(), w.confirmed && w.simgrid.ok ? "simgrid" : "analytic", w.analytic.report.step_time_s,
                w.analytic.estimated.empty() ? "" : " (estimated)", w.analytic.one_replica ? " (one replica)" : "");
    if (!w.simgrid_skipped.empty()) std::printf("       %s\n", w.simgrid_skipped.c_str());
    if (st.oom > 0)
      std::printf("smallest memory shortfall %.2f GB (%s)\n", st.smallest_shortfall_GB,
                  st.smallest_shortfall_layout.c_str());
    if (r.seed.analytic.ok)
      std::printf("seed   %s: %.3f s (%s), analytic %.3f s\n", rm::search::layout_label(r.seed.layout).c_str(),
                  r.seed.step_time_s(), r.seed.confirmed && r.seed.simgrid.ok ? "simgrid" : "analytic",
                  r.seed.analytic.report.step_time_s);
    for (size_t i = 1; i < r.ranked.size(); ++i)
      std::printf("#%zu     %s: %.3f s, %s\n", i + 1, rm::search::layout_label(r.ranked[i].layout).c_str(),
                  r.ranked[i].step_time_s(), r.ranked[i].reason.c_str());
  } catch (const std::exception& err) {
    std::fprintf(stderr, "bench_plan: %s\n", err.what());
    return 1;
  }
  return 0;
}
