#include "sim/pipeline/pipeline.hpp"

#include <algorithm>
#include <exception>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <thread>

#include <pthread.h>

#include <fmt/format.h>

#include "sim/cost/cost_model.hpp"
#include "sim/engine/analytic.hpp"
#include "sim/engine/simgrid_engine.hpp"
#include "sim/generate/attention_kind.hpp"
#include "sim/generate/footprint.hpp"
#include "sim/engine/symmetry.hpp"
#include "sim/generate/generate.hpp"
#include "sim/pipeline/chunk_queue.hpp"
#include "sim/report/stream_report.hpp"
#include "sim/schedule/carried_experiment.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "sim/topology/topology.hpp"

namespace rm::pipeline {

namespace {
// Names the calling thread, so that `perf report --sort comm` and `top -H` tell
// the streamed run's generator, engine and report apart (at most 15 characters).
void name_this_thread(const char* name) { pthread_setname_np(pthread_self(), name); }
}  // namespace

void check_kernel_runs(const Experiment& e, const sparsity::SparsityModel& m) {
  if (e.kernel.sparse_index) return;
  for (int l = 0; l < m.layers(); ++l)
    for (int h = 0; h < m.heads(); ++h) {
      // FlashAttention runs causal, document (varlen) and sliding-window masks
      // natively; verticals, slashes, sinks and block lists need a sparse index.
      const sparsity::PatternKind k = m.head(l, h).kind();
      if (k == sparsity::PatternKind::vertical_slash || k == sparsity::PatternKind::block_sparse ||
          k == sparsity::PatternKind::a_shape)
        throw ConfigError(fmt::format("{}: $.kernel.attention: {} is a dense kernel (no sparse index) and pattern {} "
                                      "has {} heads: expected a kernel with a sparse index (e.g. block_sparse) or a "
                                      "dense pattern",
                                      e.source, e.kernel.name, m.name(), sparsity::to_string(k)));
    }
}

sparsity::SparsityModel build_patterns(const Experiment& e) {
  const sparsity::PatternContext ctx{e.model.layers, e.model.heads, e.model.kv_heads, e.workload.seq_len,
                                     e.workload.seed, e.workload.pattern_base_dir};
  sparsity::SparsityModel m = sparsity::build_sparsity(e.workload.pattern, e.workload.pattern_source, ctx);
  check_kernel_runs(e, m);
  return m;
}

void check_schedule_experiment(const schedule::Schedule& s, const Experiment& e, const std::string& path) {
  schedule::check_carried_experiment(s, e, path);
  (void)build_patterns(e);  // the pattern must be one this build can run (simulate on an experiment builds it too)
  // Our generator, for this experiment, emits exactly count_step_ops(e) ops; a
  // Schedule that says it came from it and holds another number was not made
  // from this experiment (or was edited without it).
  if (s.generator == generate::generator_name(e)) {
    const int64_t expected = generate::count_step_ops(e);
    if (expected != int64_t(s.ops.size()))
      throw ConfigError(fmt::format("{}: the Schedule has {} ops, but its experiment's generator ({}) emits {}: the "
                                    "carried experiment does not describe these ops",
                                    path, s.ops.size(), s.generator, expected));
  }
}

void check_report_plausible(const report::StepReport& r, const std::string& path) {
  if (r.mfu <= 1.0) return;
  throw ConfigError(fmt::format("{}: the carried experiment does not describe these ops: its model's {:.3g} FLOPs in "
                                "the simulated {:.3g} s on {} GPUs would be {:.3g}% of their peak (MFU above 100%)",
                                path, r.model_flops, r.step_time_s, r.gpus, 100 * r.mfu));
}

LoadedSchedule load_schedule_file(const std::string& path, const ConfigStore& store) {
  schedule::Schedule s = schedule::read_schedule(path, [&path](int64_t ops, int64_t ranks) {
    generate::check_fits(generate::estimate_schedule_footprint(ops, ranks), path + ": this Schedule");
  });
  Experiment e = parse_experiment(s.experiment, path + " (its experiment)", "", store);
  check_schedule_experiment(s, e, path);
  return {std::move(s), std::move(e)};
}

Simulation simulate_schedule(const Experiment& e, schedule::Schedule s, engine::EngineKind kind, WithTimeline timeline,
                             int threads) {
  return simulate_schedule(e, std::move(s), topology::Topology(e.cluster), kind, timeline, threads);
}

Simulation simulate_schedule(const Experiment& e, schedule::Schedule s, const topology::Topology& topo,
                             engine::EngineKind kind, WithTimeline timeline, int threads) {
  const schedule::RunPlan plan(s);
  const cost::CostModel cost = cost::CostModel::for_experiment(e);
  if (timeline == WithTimeline::no) {
    // The report's preparation reads the Schedule and the plan only, so it runs
    // beside the analytic engine, which keeps the calling thread. Not beside
    // SimGrid: it runs in a forked child, and a fork while this thread holds an
    // allocator lock leaves the child waiting on it for ever (seen under ASan).
    std::optional<report::ReportPrep> prep;
    std::exception_ptr prep_error;
    auto prepare = [&] {
      try {
        prep.emplace(e, s, plan, engine::timeline_edges(s, plan));
      } catch (...) {
        prep_error = std::current_exception();
      }
    };
    std::thread helper;
    if (threads > 1 && kind == engine::EngineKind::analytic) {
      try {
        helper = std::thread(prepare);
      } catch (const std::system_error&) {  // no thread to be had: prepare after the engine
      }
    }
    engine::OpTimes times;
    try {
      times = kind == engine::EngineKind::analytic ? engine::run_analytic(s, plan, topo, cost)
                                                   : engine::run_simgrid(s, plan, topo, cost);
    } catch (...) {
      if (helper.joinable()) helper.join();
      throw;
    }
    if (helper.joinable()) helper.join();
    else prepare();
    if (prep_error) std::rethrow_exception(prep_error);
    const report::OpSpans spans{std::move(times.start), std::move(times.end), {}};
    report::StepReport rep = report::fast_step_report(e, s, plan, *prep, spans, topo, cost);
    return {std::move(s), {}, std::move(rep)};
  }
  traces::Timeline tl = engine::simulate(s, plan, topo, cost, kind);
  tl.metadata["experiment"] = e.name;
  report::StepReport rep = report::make_step_report(e, s, tl);
  // Under the data-parallel shortcut bound_by counts every replica's transfers, planning a
  // group spanning replicas for all its members as the engine does (cost::plan_collective).
  rep.bound_by = report::bound_by(s, tl, topo, cost, rep.critical_path, rep.imbalance.step_measured, &plan.match);
  return {std::move(s), std::move(tl), std::move(rep)};
}

std::string schedule_key(const Experiment& e) {
  nlohmann::json j = e.resolved;
  if (auto c = j.find("cluster"); c != j.end() && c->is_object()) {
    nlohmann::json kept = nlohmann::json::object();
    for (const char* k : {"nodes", "gpus_per_node", "gpu"})
      if (auto f = c->find(k); f != c->end()) kept[k] = *f;
    *c = std::move(kept);
  }
  return fmt::format("{}\n{}\n{}\n{}\n{}", j.dump(), e.name, e.source, e.workload.pattern_source,
                     e.workload.pattern_base_dir);
}

PointResult Session::run_point(const Experiment& e, engine::EngineKind kind, bool with_bound_by) {
  std::string key = schedule_key(e);
  if (!last_ || last_->key != key) {
    last_.reset();  // one Schedule in memory at a time
    reuse_.clear();
    timed_ = {};
    schedule::Schedule s = schedule(e, generate::Accesses::none);
    schedule::RunPlan plan(s);
    report::ReportPrep prep(e, s, plan, engine::timeline_edges(s, plan));
    last_ = std::make_unique<const Prepared>(
        Prepared{std::move(key), std::move(s), std::move(plan), std::move(prep)});
    ++schedule_builds_;
  }
  const schedule::Schedule& s = last_->schedule;
  const topology::Topology& topo = topology(e);
  const cost::CostModel cost = cost::CostModel::for_experiment(e);
  // engine::simulate's two engines, without its Timeline.
  const int64_t reused = reuse_.reused();
  engine::OpTimes times = kind == engine::EngineKind::analytic ? engine::run_analytic(s, last_->plan, topo, cost, nullptr, &reuse_)
                                                                : engine::run_simgrid(s, last_->plan, topo, cost);
  // The run repeated the one timed_ was kept from only if the reuse was taken (and timed_ is from an analytic run).
  const bool same_times = kind == engine::EngineKind::analytic && reuse_.reused() > reused;
  if (kind != engine::EngineKind::analytic) timed_ = {};
  report::OpSpans spans{std::move(times.start), std::move(times.end), {}};
  report::StepReport rep =
      report::fast_step_report(e, s, last_->plan, last_->report, spans, topo, cost, with_bound_by, &timed_, same_times);
  return {std::move(rep), static_cast<int64_t>(s.ops.size()), s.generator};
}

const sparsity::SparsityModel& Session::patterns(const Experiment& e) {
  // Everything build_patterns reads: the spec, where it came from (names and
  // index files resolve against it), seq_len, seed and the model's shape.
  const std::string key =
      fmt::format("{}\n{}\n{}\n{} {} {} {} {}", e.workload.pattern.dump(), e.workload.pattern_source,
                  e.workload.pattern_base_dir, e.workload.seq_len, e.workload.seed, e.model.layers, e.model.heads,
                  e.model.kv_heads);
  auto it = patterns_.find(key);
  if (it == patterns_.end()) {
    ++pattern_builds_;
    it = patterns_.emplace(key, build_patterns(e)).first;
    it->second.set_threads(threads_);
  }
  check_kernel_runs(e, it->second);  // the cached patterns may have been built for another kernel
  return it->second;
}

void Session::set_threads(int threads) {
  threads_ = threads;
  work_.set_threads(threads);
  for (auto& [key, model] : patterns_) model.set_threads(threads);
}

const topology::Topology& Session::topology(const Experiment& e) {
  std::string key = topology::Topology::key(e.cluster);
  auto it = topologies_.find(key);
  if (it == topologies_.end()) it = topologies_.try_emplace(std::move(key), e.cluster).first;  // built in place: never moved
  return it->second;
}

schedule::Schedule Session::schedule(const Experiment& e, generate::Accesses accesses) {
  return generate::generate_step(e, patterns(e), topology(e), &work_, generate::Replicas::all, accesses);
}

std::optional<schedule::Schedule> Session::one_replica_schedule(const Experiment& e, std::string& why_not) {
  why_not = generate::replica_refusal(e, topology(e));
  if (!why_not.empty()) return std::nullopt;
  schedule::Schedule s = generate::generate_step(e, patterns(e), topology(e), &work_, generate::Replicas::one,
                                                   generate::Accesses::none);
  why_not = engine::symmetry_refusal(s, topology(e), cost::CostModel::for_experiment(e));
  if (!why_not.empty()) return std::nullopt;
  return s;
}

Simulation Session::simulate(const Experiment& e, engine::EngineKind kind) {
  const topology::Topology& topo = topology(e);
  return simulate_schedule(e, schedule(e, generate::Accesses::none), topo, kind);
}

StreamedSimulation Session::simulate_streamed(const Experiment& e, bool one_replica,
                                              const std::function<void(int64_t)>& progress) {
  const topology::Topology& topo = topology(e);
  const sparsity::SparsityModel& pat = patterns(e);
  const cost::CostModel cost = cost::CostModel::for_experiment(e);
  const auto replicas = one_replica ? generate::Replicas::one : generate::Replicas::all;
  // Ring-step chunks hold a few steps' ops instead of a layer's; should one arrive
  // late after all (StreamNotExact), the run is made again with layer chunks.
  auto attempt = [&](bool ring_steps) {
    StreamedSimulation out;
    std::optional<report::StreamReport> rep;
    // The report's side: each retired chunk, with the groups added since the one before.
    struct Retired {
      std::vector<schedule::Op> ops;
      std::vector<schedule::OpDesc> descs;
      std::vector<double> start, end;
      double safe_before = 0;
      std::vector<schedule::Group> new_groups;
    };
    std::vector<schedule::Group> groups;  // the report's copy of the Schedule's groups
    auto report = [&](Retired& r) {
      for (auto& g : r.new_groups) groups.push_back(std::move(g));
      rep->add(r.ops, r.descs, r.start, r.end, r.safe_before, groups);
    };
    // With a second thread the report runs on a thread of its own too, behind the
    // engine by a bounded queue: its bound-by costs the engine's thread about a
    // third more. It takes the same chunks in the same order, so the same report.
    ChunkQueue<Retired> retired;
    std::thread reporter;
    std::exception_ptr report_error;
    size_t groups_sent = 0;
    engine::StreamRun run(topo, cost, [&](engine::RetiredChunk&& c) {
      Retired r{std::move(c.ops), std::move(c.descs), std::move(c.start), std::move(c.end), c.safe_before,
                {c.groups.begin() + std::ptrdiff_t(groups_sent), c.groups.end()}};
      groups_sent = c.groups.size();
      if (reporter.joinable()) retired.push(std::move(r), false);
      else report(r);
    });
    int64_t ops = 0;
    auto take = [&](engine::ReadyChunk c, bool last) {
      ops += int64_t(c.ops.size());
      run.append(std::move(c), last);
      if (progress) progress(ops);
    };
    // The generator: each chunk made ready (its compute seconds counted) for `emit`.
    engine::ChunkPreparer preparer(cost);
    auto generate = [&](const std::function<void(engine::ReadyChunk, bool)>& emit) {
      generate::generate_step_chunks(
          e, pat, topo, &work_, replicas,
          [&](const schedule::Schedule& meta, schedule::OpChunk chunk, bool last) {
            if (!rep) {
              rep.emplace(e, meta, topo, cost);
              out.generator = meta.generator;
              out.ranks = int(meta.ranks.size());
            }
            emit(preparer.prepare(meta, std::move(chunk)), last);
          },
          ring_steps, generate::Accesses::none);  // the run reads no access
    };
    // With a second thread the generator runs on it, ahead of the engine by at
    // most a bounded queue: the same chunks in the same order, so the same run.
    std::thread generator;
    ChunkQueue<engine::ReadyChunk> queue;
    if (threads_ > 1) {
      try {
        generator = std::thread([&] {
          name_this_thread("rm-generate");
          try {
            bool sent_last = false;
            generate([&](engine::ReadyChunk c, bool last) { queue.push(std::move(c), last), sent_last = last; });
            if (!sent_last) throw std::logic_error("stream: the generator ended without its last chunk");
          } catch (const QueueCancelled&) {
          } catch (...) {
            queue.fail(std::current_exception());
          }
        });
        reporter = std::thread([&] {
          name_this_thread("rm-report");
          try {
            for (;;) {
              auto item = retired.pop();
              if (item.last) return;
              report(item.chunk);
            }
          } catch (const QueueCancelled&) {
          } catch (...) {
            report_error = std::current_exception();
            retired.cancel();  // the engine's next retired chunk stops it
          }
        });
      } catch (const std::system_error&) {  // no thread to be had: one after the other
      }
    }
    try {
      if (!generator.joinable()) {
        generate(take);
      } else {
        for (bool last = false; !last;) {
          auto item = queue.pop();
          last = item.last;
          take(std::move(item.chunk), last);
        }
        generator.join();
      }
      if (reporter.joinable()) {
        retired.push(Retired{}, true);
        reporter.join();
      }
    } catch (...) {
      if (generator.joinable()) queue.cancel(), generator.join();
      if (reporter.joinable()) retired.fail(std::make_exception_ptr(QueueCancelled{})), reporter.join();
      if (report_error) std::rethrow_exception(report_error);
      throw;
    }
    if (report_error) std::rethrow_exception(report_error);
    std::vector<schedule::PathTransfer> transfers;
    const auto chain = run.critical_chain(&transfers);
    out.report = rep->finish(chain, transfers);
    out.stats = run.stats();
    out.ring_step_chunks = ring_steps;
    return out;
  };
  if (generate::ring_step_cuts_apply(e, replicas)) {
    try {
      return attempt(true);
    } catch (const engine::StreamNotExact&) {
    }
  }
  return attempt(false);
}

report::ImbalanceReport Session::imbalance(const Experiment& e, const std::vector<Partition>& partitions,
                                           const report::Progress& progress) {
  return report::imbalance_report(e, patterns(e), topology(e), partitions, progress, &work_);
}

}  // namespace rm::pipeline
