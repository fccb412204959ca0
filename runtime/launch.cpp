#include "runtime/launch.hpp"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string_view>
#include <cstring>
#include <map>
#include <functional>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "runtime/buffer_instances.hpp"
#include "runtime/check.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/cpu_compute.hpp"
#include "runtime/dense_layer.hpp"
#include "runtime/dense_step.hpp"
#ifdef RINGMASTER_HAVE_CUDA_BACKEND
#include "runtime/cuda/cuda_backend.hpp"
#endif
#include "runtime/index_reference.hpp"
#include "runtime/inputs.hpp"
#include "runtime/layouts.hpp"
#include "runtime/measured_timeline.hpp"
#include "runtime/run_summary.hpp"
#include "runtime/pattern_index.hpp"
#include "runtime/tensor_store.hpp"
#include "runtime/world.hpp"
#include "sim/config/config_store.hpp"
#include "sim/config/experiment.hpp"
#include "sim/schedule/carried_experiment.hpp"
#include "sim/schedule/run_driver.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "sim/schedule/schedule_footprint.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/text_write.hpp"

namespace rm::runtime {

namespace {

// Memory this process may use: what the machine has available, shared by the ranks on it.
int64_t available_bytes(int local_ranks) {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024 / std::max(1, local_ranks);
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return int64_t(pages) * int64_t(page) / std::max(1, local_ranks);
}

double gb(int64_t bytes) { return double(bytes) / 1e9; }

// Everything a rank builds before it runs; any throw here is bad input.
struct Prepared {
  schedule::Schedule s;
  Experiment e;
  std::unique_ptr<schedule::RunPlan> plan;
  std::unique_ptr<BufferInstances> instances;
  std::unique_ptr<Layouts> layouts;
  std::unique_ptr<TensorStore> store;
  std::unique_ptr<CpuCompute> compute;
  std::unique_ptr<IndexBuilding> index;  // dynamic sparse patterns: the index_build ops
  std::unique_ptr<DenseLayer> dense;
  std::unique_ptr<DenseStep> step;  // the step scope's embedding, loss and optimizer (tp = 1)
  std::optional<CheckProblem> check;  // with --check
  struct Fault {
    int rank = 0;
    schedule::OpId op = 0;
    CpuBackend::Fault kind = CpuBackend::Fault::fail;
  };
  std::optional<Fault> fault;
#ifdef RINGMASTER_HAVE_CUDA_BACKEND
  std::unique_ptr<CudaBackend> cuda;  // --backend cuda: in place of store and compute
#endif
};

Prepared::Fault parse_fault(const std::string& text, const schedule::Schedule& s) {
  Prepared::Fault f;
  char kind[8] = {0};
  long long op = -1;
  if (std::sscanf(text.c_str(), "%d:%lld:%7s", &f.rank, &op, kind) != 3 ||
      (std::string(kind) != "fail" && std::string(kind) != "hang" && std::string(kind) != "skip"))
    throw ConfigError("--inject-fault " + text + ": expected RANK:OP:fail, RANK:OP:hang or RANK:OP:skip");
  const bool skip = std::string(kind) == "skip";
  if (op < 0 || size_t(op) >= s.ops.size() || s.ops[size_t(op)].rank != f.rank ||
      !(schedule::is_compute(s.ops[size_t(op)].kind) || (skip && schedule::is_collective(s.ops[size_t(op)].kind))))
    throw ConfigError("--inject-fault " + text + ": op " + std::to_string(op) + " is not a compute op of rank " +
                      std::to_string(f.rank) + (skip ? " (nor a collective: skip drops a collective's result)" : ""));
  f.op = op;
  f.kind = std::string(kind) == "hang"   ? CpuBackend::Fault::hang
           : std::string(kind) == "skip" ? CpuBackend::Fault::skip
                                         : CpuBackend::Fault::fail;
  return f;
}

// What --check compares: the attention of the Schedule's one layer, on the same seed.
CheckProblem step_check_problem(const LaunchOptions& o, const Prepared& p);

CheckProblem check_problem(const LaunchOptions& o, const Prepared& p) {
  if (p.e.scope == Scope::step) return step_check_problem(o, p);
  if (p.e.scope == Scope::layer && p.e.parallel.tp != 1)
    throw ConfigError(fmt::format("{}: --check of the layer scope needs tp = 1 (with tp > 1 the dense layer runs for "
                                  "timing only); this Schedule has tp = {}", o.schedule, p.e.parallel.tp));
  if (p.e.scope == Scope::layer && o.backend == "cuda")
    throw ConfigError(o.schedule + ": --check of the layer scope runs on the cpu backend (the cuda backend runs the dense "
                                   "layer for timing only); check attention scopes on cuda");
  CheckProblem c;
  c.layer = p.e.scope == Scope::layer;
  c.hidden = p.e.model.hidden, c.intermediate = p.e.model.intermediate;
  c.batch = p.e.workload.batch, c.seq_len = p.e.workload.seq_len;
  c.heads = p.e.model.heads, c.kv_heads = p.e.model.kv_heads, c.head_dim = p.e.model.head_dim;
  c.causal = pattern_causal(p.e);
  c.seed = o.seed;
  c.backward = false;
  int layer = -1;
  bool pattern = false, built = false;
  for (const auto& op : p.s.ops) {
    c.backward |= op.kind == schedule::OpKind::attn_bwd;
    if (const schedule::Attention* a = p.s.attention_of(op)) {
      pattern |= a->index == schedule::IndexSource::pattern;
      built |= a->index == schedule::IndexSource::built;
      if (layer >= 0 && op.layer != layer)
        throw ConfigError(o.schedule + ": --check compares one layer's attention; this Schedule has several");
      layer = op.layer;
    }
  }
  if (pattern) c.index = pattern_index(p.e, layer);
  if (built && c.layer && c.batch > 1)
    throw ConfigError(fmt::format("{}: --check of the layer scope with an index built at run time needs batch 1 (the "
                                  "reference layer takes one index for every batch element); this Schedule has batch {}: "
                                  "check the attention scopes with batch > 1", o.schedule, c.batch));
  c.built = built;  // the reference index and the run's picks are compared after the run (run_check)
  if (!c.layer) {
    // LSE and (with fp32 dK|dV everywhere) dV never pass through bf16 in attention scopes.
    c.tight_lse = true;
    c.tight_dv = true;
    for (const auto& b : p.s.buffers) {
      const Layout* l = p.layouts->of(b.id);
      const bool dkv = b.role == schedule::BufferRole::dkv || b.role == schedule::BufferRole::dkv_slot ||
                       (l && l->content == schedule::BufferRole::dkv);
      if (dkv && b.dtype != schedule::DType::fp32) c.tight_dv = false;
    }
  }
  c.layer_index = std::max(layer, 0);
  return c;
}

// The step scope: the loss, the reduced gradients and the updated parameters (check_step).
CheckProblem step_check_problem(const LaunchOptions& o, const Prepared& p) {
  if (p.e.parallel.tp != 1)
    throw ConfigError(fmt::format("{}: --check of the step scope needs tp = 1 (with tp > 1 the dense parts run for "
                                  "timing only); this Schedule has tp = {}", o.schedule, p.e.parallel.tp));
  if (o.backend != "cpu")
    throw ConfigError(o.schedule + ": --check of the step scope runs on the cpu backend (the cuda backend runs the dense "
                                   "parts for timing only)");
  if (!p.step || !p.step->active())
    throw ConfigError(o.schedule + ": --check of the step scope found none of the step's embedding, loss and optimizer ops");
  CheckProblem c;
  StepProblem sp;
  LayerProblem& lp = sp.layer;
  lp.batch = int64_t(p.e.parallel.dp) * p.e.workload.batch, lp.seq_len = int32_t(p.e.workload.seq_len);
  lp.hidden = p.e.model.hidden, lp.intermediate = p.e.model.intermediate;
  lp.heads = p.e.model.heads, lp.kv_heads = p.e.model.kv_heads, lp.head_dim = p.e.model.head_dim;
  lp.causal = pattern_causal(p.e), lp.seed = o.seed;
  sp.layers = p.e.model.layers, sp.vocab = p.e.model.vocab, sp.tied = p.e.model.tied_embeddings;
  bool pattern = false;
  for (const auto& op : p.s.ops)
    if (const schedule::Attention* a = p.s.attention_of(op)) {
      pattern |= a->index == schedule::IndexSource::pattern;
      if (a->index == schedule::IndexSource::built)
        throw ConfigError(o.schedule + ": --check of the step scope with an index built at run time is not supported "
                                       "(as for the layer scope); the step runs for timing");
    }
  if (pattern)
    for (int l = 0; l < sp.layers; ++l) sp.index_by_layer.push_back(pattern_index(p.e, l));
  c.step = std::move(sp);
  c.seed = o.seed;
  return c;
}

void prepare(const LaunchOptions& o, const World& world, Prepared& p) {
#ifndef RINGMASTER_HAVE_CUDA_BACKEND
  if (o.backend == "cuda")
    throw ConfigError("--backend cuda: this ringmaster-run was built without the cuda backend (CUDA and NCCL not found at build time)");
#endif
  if (!o.trace.empty())
    if (const std::string problem = traces::output_path_problem(o.trace); !problem.empty())
      throw ConfigError("--trace " + problem);
  if (o.emulate_ranks > 0 && o.backend != "cuda") throw ConfigError("--emulate-ranks needs --backend cuda");
  const int64_t have = o.max_memory_GB > 0 ? int64_t(o.max_memory_GB * 1e9) : available_bytes(world.local_size());
  const std::string allowed = o.max_memory_GB > 0 ? "--max-memory allows"
                                                  : fmt::format("this machine has available per rank ({} ranks on it):",
                                                                world.local_size());
  // Every rank holds the whole Schedule: the file's op count is checked against
  // what one may use before its ops are allocated (as `simulate --schedule` does).
  p.s = schedule::read_schedule(o.schedule, [&](int64_t ops, int64_t ranks) {
    const schedule::Footprint f = schedule::estimate_schedule_footprint(ops, ranks);
    if (f.bytes > have)
      throw ConfigError(fmt::format("{}: this Schedule needs ~{:.2f} GB on every rank to hold its {} ops; {} {:.2f} GB",
                                    o.schedule, gb(f.bytes), ops, allowed, gb(have)));
  });
  if (o.emulate_ranks == 0 && int(p.s.ranks.size()) != world.size())
    throw ConfigError(fmt::format("{}: the Schedule has {} ranks but {} processes were started (mpirun -np {})", o.schedule,
                                  p.s.ranks.size(), world.size(), p.s.ranks.size()));
  p.e = parse_experiment(p.s.experiment, o.schedule + " (its experiment)", "", ConfigStore{});
  // Every size below is read from the carried experiment: it must describe these
  // ops (as `simulate --schedule` checks) before anything is sized by it.
  schedule::check_carried_experiment(p.s, p.e, o.schedule);
  (void)pattern_model(p.e);  // the pattern builds (simulate --schedule builds it too)
  p.plan = std::make_unique<schedule::RunPlan>(p.s);
  p.instances = std::make_unique<BufferInstances>(p.s);
  p.layouts = std::make_unique<Layouts>(p.s, p.plan->match, p.e.workload.batch, p.e.model.head_dim);
#ifdef RINGMASTER_HAVE_CUDA_BACKEND
  if (o.backend == "cuda") {
    p.cuda = std::make_unique<CudaBackend>(CudaInputs{p.s, p.e, *p.plan, *p.instances, *p.layouts}, world, o);
    return;
  }
#endif
  const int64_t need = memory_needed(p.s, world.rank(), p.instances->layers());
  if (need > have)
    throw ConfigError(fmt::format("{}: rank {} needs {:.2f} GB for its buffers; {} {:.2f} GB", o.schedule, world.rank(),
                                  gb(need), allowed, gb(have)));
  p.store = std::make_unique<TensorStore>(p.s, world.rank(), p.instances->layers());
  p.compute = std::make_unique<CpuCompute>(p.s, p.e, *p.instances, *p.store);
  p.index = std::make_unique<IndexBuilding>(p.s, p.e, *p.layouts, p.plan->match, *p.instances, *p.store);
  if (p.index->any()) p.compute->use_index(p.index.get());
  p.compute->prepare();
  p.dense = std::make_unique<DenseLayer>(p.s, p.e, *p.layouts, *p.instances, world.rank());
  p.compute->use_dense(p.dense.get());
  p.step = std::make_unique<DenseStep>(p.s, p.e, *p.dense, world.rank());
  p.compute->use_step(p.step.get());
  if (o.check) p.check = check_problem(o, p);
  if (!o.inject_fault.empty()) p.fault = parse_fault(o.inject_fault, p.s);
}

// The --check pass (untimed): every rank's outputs to rank 0, compared there.
// `passed` is the same on every rank; the report is rank 0's.
struct CheckOutcome {
  bool passed = false;
  std::optional<CheckReport> report;
};

// What the run loop needs of a backend (cpu, or cuda with one or every rank in this process).
struct Runner {
  std::function<std::vector<OpSample>()> run_once;        // this process's ops, once
  std::function<std::vector<OutputSlice>()> outputs;       // its ranks' attention outputs, after a run
  std::function<std::string()> dense_outputs;              // packed DenseOutputs ("" when none)
  std::function<std::string()> step_outputs = [] { return std::string(); };  // packed StepOutputs
  std::function<std::string()> built_index = [] { return std::string(); };  // packed forward index ("" when none)
  std::function<void()> before_iteration = [] {};
  traces::Source source = traces::Source::runtime_cpu;
};

void print_check(const LaunchOptions& o, const CheckReport& r) {
  if (o.json) return;
  const bool updates = std::any_of(r.tensors.begin(), r.tensors.end(), [](const TensorCheck& t) { return t.name.back() == '\''; });
  std::printf("check against the single-process reference (seed %llu; error = max |got-ref| / max |ref|%s):\n",
              static_cast<unsigned long long>(o.seed), updates ? "; X': after AdamW, against AdamW on the reduced gradient, error / max update" : "");
  std::printf("  %-7s %12s %12s %12s %9s  %s\n", "", "elements", "max |ref|", "max rel err", "bound", "");
  for (const auto& t : r.tensors)
    std::printf("  %-7s %12lld %12.4g %12.3e %9.0e  %s%s%s\n", t.name.c_str(), static_cast<long long>(t.elements),
                t.max_ref, t.max_rel_error, t.bound, t.passed() ? "ok" : "ABOVE THE BOUND", t.note.empty() ? "" : "  ",
                t.note.c_str());
  std::fflush(stdout);
}

CheckOutcome run_check(const LaunchOptions& o, const Prepared& p, Runner& runner, const World& world) {
  runner.run_once();
  if (p.check->step) {
    const auto all = world.gather(runner.step_outputs());
    CheckOutcome out;
    std::string verdict;
    if (world.rank() == 0) {
      std::vector<StepOutputs> ranks;
      for (const auto& bytes : all) ranks.push_back(unpack_step(bytes));
      out.report = check_step(*p.check->step, ranks, o.check_bound);
      print_check(o, *out.report);
      verdict = out.report->passed() ? "pass" : "fail";
    }
    out.passed = world.broadcast(verdict) == "pass";
    return out;
  }
  const auto all = world.gather(pack(runner.outputs()));
  const auto dense = world.gather(p.check->layer ? runner.dense_outputs() : std::string());
  const auto built = world.gather(p.check->built ? runner.built_index() : std::string());
  CheckOutcome out;
  std::string verdict;
  if (world.rank() == 0) {
    std::vector<OutputSlice> slices;
    for (const auto& bytes : all)
      for (auto& x : unpack_outputs(bytes)) slices.push_back(std::move(x));
    std::vector<DenseOutputs> layer;
    for (const auto& bytes : p.check->layer ? dense : std::vector<std::string>{}) layer.push_back(unpack_dense(bytes));
    // A built index: its picks against the reference's, and the attention against the
    // reference run on the run's own picks (index_reference.hpp).
    CheckProblem c = *p.check;
    std::optional<TensorCheck> index_check;
    if (c.built) {
      BuiltIndex got = unpack_built_index(built, c.batch, c.heads);
      const QKSource qk = c.layer ? layer_qk(layer_problem(c)) : seeded_qk(c.seed);
      index_check = check_built_index(reference_index(p.s, p.e, *p.layouts, p.plan->match, qk, c.layer_index), got);
      c.per_batch = std::move(got.per_batch);
      c.index = c.per_batch.at(0);
    }
    out.report = c.layer ? check_layer(c, slices, layer, o.check_bound) : check_attention(c, slices, o.check_bound);
    if (index_check) out.report->tensors.push_back(*index_check);
    print_check(o, *out.report);
    verdict = out.report->passed() ? "pass" : "fail";
  }
  out.passed = world.broadcast(verdict) == "pass";
  return out;
}

// Rank 0: every rank's samples to one measured Timeline, written when asked; the summary printed.
// A process's samples split by the Schedule rank of their op (several when emulating),
// each as pack(RankSamples) behind its length.
std::string pack_ranks(const schedule::Schedule& s, const std::vector<OpSample>& mine) {
  std::map<int, RankSamples> by_rank;
  for (const OpSample& x : mine) {
    RankSamples& r = by_rank[s.ops.at(size_t(x.op)).rank];
    r.rank = s.ops[size_t(x.op)].rank;
    r.samples.push_back(x);
  }
  std::string out;
  for (const auto& [rank, r] : by_rank) {
    const std::string one = pack(r);
    const uint64_t n = one.size();
    out.append(reinterpret_cast<const char*>(&n), sizeof n);
    out += one;
  }
  return out;
}

std::vector<RankSamples> unpack_ranks(std::string_view bytes) {
  std::vector<RankSamples> out;
  while (!bytes.empty()) {
    uint64_t n = 0;
    if (bytes.size() < sizeof n) throw std::runtime_error("samples: truncated message");
    std::memcpy(&n, bytes.data(), sizeof n);
    bytes.remove_prefix(sizeof n);
    if (n > bytes.size()) throw std::runtime_error("samples: truncated message");
    out.push_back(unpack(bytes.substr(0, size_t(n))));
    bytes.remove_prefix(size_t(n));
  }
  return out;
}

void report(const LaunchOptions& o, const Prepared& p, const World& world, const std::vector<ClockOffset>& clocks,
            const std::vector<OpSample>& mine, const std::optional<CheckReport>& check, traces::Source source) {
  const auto all = world.gather(pack_ranks(p.s, mine));
  if (world.rank() != 0) return;
  std::vector<RankSamples> ranks;
  for (const auto& bytes : all)
    for (RankSamples& r : unpack_ranks(bytes)) {
      // One rank per process: its offset; ranks emulated in this process share its clock.
      r.clock = size_t(r.rank) < clocks.size() && world.size() > 1 ? clocks[size_t(r.rank)] : ClockOffset{};
      ranks.push_back(std::move(r));
    }
  const nlohmann::json meta = {{"schedule_hash", schedule::schedule_hash(p.s)}, {"warmup", o.warmup},
                               {"schedule", o.schedule}, {"backend", o.backend}, {"seed", o.seed}};
  const traces::Timeline t = measured_timeline(p.s, ranks, source, meta);
  if (!o.trace.empty()) traces::write_chrome_trace(t, o.trace);
  const nlohmann::json j = summary_json(t, check, int(p.s.ranks.size()), o.trace);
  if (o.json) std::printf("%s\n", j.dump(2).c_str());
  else std::fputs(summary_table(j).c_str(), stdout);
  std::fflush(stdout);
}

// Rank 0 prints the first rank's error (every rank returns 2); collective.
int refuse_together(const World& world, const std::string& error) {
  const auto all = world.gather(error);
  if (world.rank() == 0)
    for (size_t r = 0; r < all.size(); ++r)
      if (!all[r].empty()) {
        std::fprintf(stderr, "ringmaster-run: error: %s%s\n", all[r].c_str(),
                     r == 0 ? "" : fmt::format(" (rank {})", r).c_str());
        break;
      }
  return 2;
}

}  // namespace

int launch(const LaunchOptions& o, int* argc, char*** argv) {
  World world(argc, argv);
  // The ranks on this machine share its cores: OpenBLAS would otherwise start a thread per core in each.
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  openblas_set_num_threads(int(std::max(1L, cores / std::max(1, world.local_size()))));
  Prepared p;
  std::string error;
  try {
    prepare(o, world, p);
  } catch (const std::bad_alloc&) {
    error = fmt::format("{}: rank {}: out of memory while allocating its buffers", o.schedule, world.rank());
  } catch (const std::exception& x) {
    error = x.what();
  }
  if (!world.all(error.empty())) return refuse_together(world, error);
  try {
    std::unique_ptr<CpuBackend> cpu;
    Runner runner;
#ifdef RINGMASTER_HAVE_CUDA_BACKEND
    if (p.cuda) {
      CudaBackend& g = *p.cuda;
      g.connect(world);
      g.seed(o.seed);
      runner.run_once = [&g] { return g.run_once(); };
      runner.outputs = [&g, &p] {
        g.download();
        std::vector<OutputSlice> all;
        for (int r : g.ranks())
          for (auto& x : read_outputs(p.s, *p.layouts, *p.instances, g.host(r))) all.push_back(std::move(x));
        return all;
      };
      runner.dense_outputs = [] { return std::string(); };
      runner.built_index = [&g, &p] { return p.check && p.check->built ? g.built_index(p.check->layer_index) : std::string(); };
      runner.source = traces::Source::runtime_cuda;
    }
#endif
    if (!runner.run_once) {
      world.make_group_comms(p.s);
      seed_inputs(p.s, *p.layouts, *p.store, o.seed);
      p.dense->seed(*p.store, o.seed);
      p.step->seed(*p.store, o.seed);
      cpu = std::make_unique<CpuBackend>(p.s, *p.plan, *p.layouts, *p.instances, *p.store, *p.compute, world,
                                         o.stall_timeout_s);
      if (p.fault && p.fault->rank == world.rank()) cpu->inject_fault(p.fault->op, p.fault->kind);
      runner.run_once = [&cpu] { return cpu->run_once(); };
      runner.outputs = [&p] { return read_outputs(p.s, *p.layouts, *p.instances, *p.store); };
      runner.dense_outputs = [&p] { return pack(p.dense->read_outputs(*p.store)); };
      runner.step_outputs = [&p] { return pack(p.step->read_outputs(*p.store)); };
      runner.built_index = [&p] {
        std::string out;
        if (p.check && p.check->built) p.index->pack_forward(p.check->layer_index, out);
        return out;
      };
      runner.before_iteration = [&p, &o] { p.dense->reseed_gradient(*p.store, o.seed); };
    }
    const std::vector<ClockOffset> clocks = world.clock_offsets(kPingRounds);
    world.barrier();
    CheckOutcome check;
    if (o.check) {
      check = run_check(o, p, runner, world);
      if (!check.passed) {
        if (world.rank() == 0) std::fprintf(stderr, "ringmaster-run: --check: an error is above the bound\n");
        return 1;
      }
    }
    // On a terminal, rank 0 shows which iteration runs (long Schedules take minutes).
    const bool progress = world.rank() == 0 && isatty(STDERR_FILENO) && !o.json;
    auto show = [&](const char* what, int i, int n, double started) {
      if (progress)
        std::fprintf(stderr, "\r%s iteration %d/%d (%.1f s)   ", what, i + 1, n, steady_now_s() - started);
    };
    for (int i = 0; i < o.warmup; ++i) {
      show("warm-up", i, o.warmup, steady_now_s());
      runner.before_iteration();
      runner.run_once();
      world.barrier();
    }
    std::vector<OpSample> samples;
    const double timed_start = steady_now_s();
    for (int i = 0; i < o.iters; ++i) {
      show("timed", i, o.iters, timed_start);
      runner.before_iteration();
      for (OpSample& x : runner.run_once()) {
        x.iteration = i;
        samples.push_back(x);
      }
      world.barrier();
    }
    if (progress) std::fprintf(stderr, "\r%60s\r", "");
    report(o, p, world, clocks, samples, check.report, runner.source);
  } catch (const std::exception& x) {
    std::fprintf(stderr, "ringmaster-run: rank %d: %s\n", world.rank(), x.what());
    std::fflush(stderr);
    world.abort(3);
  }
  return 0;
}

}  // namespace rm::runtime
