// Issue 9's scale targets, every figure printed in one run: `ringmaster
// simulate` end to end (a child process: wall, CPU and peak memory as the user
// sees them) on the default step, at 4M tokens, on a 512-GPU attention layer
// and on 4,096-GPU steps; the analytic engine's ops/s and bytes per op on
// synthetic rings of 100K, 1M and 10M ops; a 32 x 1,000 point-to-point ring
// read from a Schedule file. The machine is shared: compare rows of one run.
//   build/bin/bench_scale [--quick] [--full] [--ring-only] [--write-ring PATH] [--bin PATH/ringmaster]
// --quick skips the runs that take minutes; --full adds the SimGrid 4,096-GPU step (--symmetry dp);
// --ring-only prints only the ring-file rows; --write-ring writes its file and exits.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/config/config_store.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/engine/analytic.hpp"
#include "sim/engine/engine.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "sim/schedule/schedule_sax.hpp"
#include "sim/schedule/validate.hpp"
#include "sim/topology/topology.hpp"
#include "tests/support/synthetic_schedules.hpp"
#include "traces/json_text.hpp"
#include "traces/text_file.hpp"
#include "tools/cli/allocator_tuning.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

struct ChildRun {
  bool ok = false;  // exited 0 within its limit
  std::string status;  // "ok", "timeout", "exit N", "signal N"
  double wall_s = 0, cpu_s = 0, peak_GB = 0;
  std::string out;
  std::string err_line;  // the first line the child wrote to stderr
};

// Runs `bin args` with stdout to a file, a wall limit, and the child's rusage.
ChildRun run_child(const std::string& bin, const std::vector<std::string>& args, double limit_s) {
  const std::string out_path = (std::filesystem::temp_directory_path() / fmt::format("bench_scale_{}.out", getpid())).string();
  std::fflush(stdout);  // else the child's copy of the buffer is written again
  const auto t0 = clock_type::now();
  const pid_t pid = fork();
  if (pid == 0) {
    if (!std::freopen(out_path.c_str(), "w", stdout)) _exit(127);
    if (!std::freopen((out_path + ".err").c_str(), "w", stderr)) _exit(127);
    std::vector<char*> argv{const_cast<char*>(bin.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  ChildRun r;
  int status = 0;
  rusage ru{};
  bool timed_out = false;
  for (;;) {
    const pid_t w = wait4(pid, &status, WNOHANG, &ru);
    if (w == pid) break;
    if (std::chrono::duration<double>(clock_type::now() - t0).count() > limit_s && !timed_out) {
      kill(pid, SIGKILL);
      timed_out = true;
    }
    usleep(2000);
  }
  r.wall_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  r.cpu_s = double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  r.peak_GB = double(ru.ru_maxrss) * 1024.0 / 1e9;
  if (timed_out) r.status = fmt::format("timeout {:.0f}s", limit_s);
  else if (WIFSIGNALED(status)) r.status = fmt::format("signal {}", WTERMSIG(status));
  else if (WEXITSTATUS(status) != 0) r.status = fmt::format("exit {}", WEXITSTATUS(status));
  else r.status = "ok", r.ok = true;
  std::ifstream in(out_path);
  std::stringstream ss;
  ss << in.rdbuf();
  r.out = ss.str();
  std::ifstream err(out_path + ".err");
  std::getline(err, r.err_line);
  std::filesystem::remove(out_path);
  std::filesystem::remove(out_path + ".err");
  return r;
}

struct Row {
  std::string what, target, figure, extra;
  bool met = false;
  bool is_target = true;  // false: a figure shown beside the targets, not one of them
};
std::vector<Row> rows;

void print_row(const Row& r) {
  std::printf("%-66s %-14s %-18s %-6s %s\n", r.what.c_str(), r.target.c_str(), r.figure.c_str(),
              !r.is_target ? "" : r.met ? "met" : "MISSED", r.extra.c_str());
  std::fflush(stdout);
}

void add(Row r) {
  print_row(r);
  rows.push_back(std::move(r));
}

// One `ringmaster simulate --json` case against a wall-time (and memory) target.
// target_s <= 0: a figure shown beside the targets (a streamed run of a case above).
void simulate_case(const std::string& bin, const std::string& what, std::vector<std::string> sets, double target_s,
                   double limit_s, double target_GB = 0) {
  std::vector<std::string> args{"simulate", "--json"};
  for (auto& s : sets) args.push_back(std::move(s));
  const ChildRun r = run_child(bin, args, limit_s);
  std::string extra = fmt::format("cpu {:.2f} s, peak {:.2f} GB", r.cpu_s, r.peak_GB);
  if (r.ok) {
    try {
      const auto j = nlohmann::json::parse(r.out);
      extra += fmt::format(", {} ops, step {:.4f} s", j.at("ops").get<int64_t>(), j.at("step_time_s").get<double>());
      if (const auto st = j.find("streamed"); st != j.end() && st->value("chunks", 0) > 0)
        extra += fmt::format(", streamed: {} chunks, at most {} ops held", st->at("chunks").get<int64_t>(),
                             st->at("peak_ops_held").get<int64_t>());
    } catch (const std::exception&) {
      extra += ", unreadable output";
    }
  } else {
    extra += ", " + r.status;
    if (!r.err_line.empty()) extra += ": " + r.err_line;
  }
  const bool fast = r.ok && r.wall_s < target_s;
  const bool small = target_GB <= 0 || r.peak_GB < target_GB;
  if (target_s <= 0) {
    add({what, "", fmt::format("{:.3f} s wall", r.wall_s), extra, r.ok, false});
    return;
  }
  add({what, target_GB > 0 ? fmt::format("<{:.0f} s, <{:.0f} GB", target_s, target_GB) : fmt::format("<{:g} s", target_s),
       fmt::format("{:.3f} s wall", r.wall_s), extra, fast && small});
}

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// Bytes the Schedule's op records take, per op, including dependency storage
// (the Op struct with its in-place dependencies, and any that spill to the
// heap) and the table of costs and data descriptors the ops share.
double schedule_bytes_per_op(const rm::schedule::Schedule& s) {
  size_t bytes = s.ops.capacity() * sizeof(rm::schedule::Op) + s.descs.capacity() * sizeof(rm::schedule::OpDesc);
  for (const auto& op : s.ops) bytes += op.deps.heap_bytes();
  return double(bytes) / double(s.ops.size());
}

void engine_rows() {
  using namespace rm;
  const auto cfg = ConfigStore().load("clusters", "a100-40g-4x8-hdr", "bench");
  const Cluster cluster = parse_cluster(JsonReader(cfg.json, cfg.source));
  const topology::Topology topo(cluster);
  const cost::CostModel model(cluster, load_attention_kernel(ConfigStore(), "block_sparse", cluster.gpu));
  for (const int steps : {1042, 10417, 104167}) {  // 32 ranks x 3 ops a step: ~100K, 1M, 10M ops
    const auto s = engine::ring_schedule({32, 0, steps, 1e11, 16 << 20});
    const auto t0 = clock_type::now();
    const auto times = engine::run_analytic(s, topo, model);
    const double t = seconds_since(t0);
    const double rate = double(s.ops.size()) / t;
    add({fmt::format("analytic engine, op times, {:.1f}M-op ring", double(s.ops.size()) / 1e6), ">=5M ops/s",
         fmt::format("{:.2f}M ops/s", rate / 1e6), fmt::format("{:.3f} s", t), rate >= 5e6 && times.end.size() == s.ops.size()});
    const auto t1 = clock_type::now();
    const auto tl = engine::simulate(s, topo, model, engine::EngineKind::analytic);
    const double tt = seconds_since(t1);
    add({fmt::format("  (analytic engine + Timeline, {:.1f}M-op ring)", double(s.ops.size()) / 1e6), "",
         fmt::format("{:.2f}M ops/s", double(s.ops.size()) / tt / 1e6), fmt::format("{} events", tl.events.size()),
         true, false});
    if (steps == 104167) {
      // Judged at the printed tenth of a byte: the shared entries add a few bytes per table, not per op.
      const double b = schedule_bytes_per_op(s);
      const double table = double(s.descs.capacity() * sizeof(schedule::OpDesc)) / double(s.ops.size());
      add({"Schedule bytes per op (ops + their dependencies), 10M-op ring", "<=48 B", fmt::format("{:.1f} B", b),
           fmt::format("{} B records, {:.5f} B entries", sizeof(schedule::Op), table), std::round(b * 10) <= 480});
    }
  }
}

// The synthetic 32 x 1,000 point-to-point ring, as a Schedule file carrying
// the default experiment. 1e12 FLOPs a step: with 1e11 the step is so short
// that the experiment's model FLOPs would exceed the GPUs' peak, and
// `simulate --schedule` refuses the file (pipeline.hpp: MFU above 100%).
rm::schedule::Schedule ring_file_schedule() {
  using namespace rm;
  auto s = engine::ring_schedule({32, 0, 1000, 1e12, 16 << 20});
  s.experiment = ConfigStore().load("experiments", "mtraining-qwen2.5-3b-512k", "bench").json;
  return s;
}

// That ring simulated end to end by the CLI: the median CPU time of 5 runs (a
// run is ~0.1 s, so one run on shared cores is mostly noise).
void ring_file_row(const std::string& bin) {
  using namespace rm;
  const auto s = ring_file_schedule();
  const std::string path = (std::filesystem::temp_directory_path() / fmt::format("bench_scale_ring_{}.json.gz", getpid())).string();
  schedule::write_schedule(s, path);
  std::vector<ChildRun> runs;
  for (int i = 0; i < 5; ++i) runs.push_back(run_child(bin, {"simulate", "--json", "--schedule", path}, 60));
  std::filesystem::remove(path);
  std::sort(runs.begin(), runs.end(), [](const ChildRun& a, const ChildRun& b) { return a.cpu_s < b.cpu_s; });
  const ChildRun& r = runs[runs.size() / 2];
  const bool ok = std::all_of(runs.begin(), runs.end(), [](const ChildRun& x) { return x.ok; });
  add({fmt::format("32 x 1,000 p2p ring from a Schedule file ({} ops), end to end", s.ops.size()), "<0.1 s CPU",
       fmt::format("{:.3f} s CPU", r.cpu_s),
       fmt::format("median of 5 (min {:.3f}), wall {:.3f} s, peak {:.0f} MB, {}", runs.front().cpu_s, r.wall_s,
                   r.peak_GB * 1e3, ok ? "ok" : runs.back().status),
       ok && r.cpu_s < 0.1});
}

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// The default step's Schedule file (`ringmaster schedule -o`) read in this
// process, CPU time of each part: the one-pass reader parse_schedule_text
// takes, against the DOM reader it falls back to (both before validate()).
void schedule_read_row(const std::string& bin) {
  using namespace rm;
  const std::string path = (std::filesystem::temp_directory_path() / fmt::format("bench_scale_default_{}.json.gz", getpid())).string();
  const ChildRun w = run_child(bin, {"schedule", "-o", path}, 300);
  if (!w.ok) {
    add({"default step's Schedule file, read", "", "", w.status + ": " + w.err_line, false, false});
    return;
  }
  double t0 = cpu_seconds();
  const std::string text = traces::read_text_file(path);
  const double gunzip = cpu_seconds() - t0;
  std::filesystem::remove(path);
  t0 = cpu_seconds();
  const auto one = schedule::read_schedule_one_pass(text);
  const double one_pass = cpu_seconds() - t0;
  t0 = cpu_seconds();
  const auto dom = schedule::from_schedule_json(traces::parse_json_checked(text, path), path);
  const double dom_s = cpu_seconds() - t0;
  t0 = cpu_seconds();
  schedule::validate(dom, path);
  const double validate_s = cpu_seconds() - t0;
  const bool same = one && *one == dom;
  add({fmt::format("  (default step's Schedule file read: {} ops, {:.1f} MB of JSON)", dom.ops.size(), double(text.size()) / 1e6),
       "", fmt::format("{:.3f} s CPU", one_pass),
       fmt::format("one-pass; DOM {:.3f} s, gunzip {:.3f} s, validate {:.3f} s; {}", dom_s, gunzip, validate_s,
                   same ? "same Schedule" : "DIFFERENT SCHEDULES"),
       same, false});
}

}  // namespace

int main(int argc, char** argv) {
  rm::cli::back_heap_with_huge_pages(argv);  // as the ringmaster executable runs
  rm::cli::keep_freed_memory();              // as `ringmaster simulate` runs (the engine rows run in process)
  bool quick = false, full = false, ring_only = false, engine_only = false;
  std::string bin = (std::filesystem::path(argv[0]).parent_path() / "ringmaster").string();
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--full")) full = true;
    else if (!std::strcmp(argv[i], "--bin") && i + 1 < argc) bin = argv[++i];
    else if (!std::strcmp(argv[i], "--ring-only")) ring_only = true;
    else if (!std::strcmp(argv[i], "--engine-only")) engine_only = true;  // to profile the engine rows alone
    else if (!std::strcmp(argv[i], "--write-ring") && i + 1 < argc) {
      rm::schedule::write_schedule(ring_file_schedule(), argv[++i]);  // to profile the row's child by hand
      return 0;
    } else {
      std::fprintf(stderr, "usage: bench_scale [--quick] [--full] [--ring-only] [--engine-only] [--write-ring PATH] [--bin PATH/ringmaster]\n");
      return 2;
    }
  }
  std::printf("%-66s %-14s %-18s %-6s %s\n", "case", "target", "figure", "", "detail");
  if (ring_only) {
    ring_file_row(bin);
    schedule_read_row(bin);
    return 0;
  }
  if (engine_only) {
    engine_rows();
    return 0;
  }
  // `ringmaster simulate` as a user runs it: analytic, streamed where it can (--stream auto);
  // the whole run beside it (--stream off: the Schedule built, as --trace and SimGrid need).
  simulate_case(bin, "default step, analytic (ringmaster simulate)", {}, 1.0, 120);
  simulate_case(bin, "  the same, whole (--stream off)", {"--stream", "off"}, 0, 120);
  simulate_case(bin, "  the same, streamed on one thread (--threads 1)", {"--threads", "1"}, 0, 120);
  simulate_case(bin, "default step, simgrid", {"--engine", "simgrid"}, 3.0, 300);
  simulate_case(bin, "default at 4M tokens, analytic", {"--set", "workload.seq_len=4m"}, 2.0, 300);
  simulate_case(bin, "  the same, whole (--stream off)", {"--set", "workload.seq_len=4m", "--stream", "off"}, 0, 300);
  const std::vector<std::string> cp512{"--set", "cluster.nodes=64", "--set", "parallel.cp=512", "--set",
                                       "scope=attention_fwd"};
  simulate_case(bin, "fwd attention layer, stripe, cp=512 on 64 nodes, analytic", cp512, 2.0, 300);
  auto cp512_whole = cp512;
  cp512_whole.insert(cp512_whole.end(), {"--stream", "off"});
  simulate_case(bin, "  the same, whole (--stream off)", cp512_whole, 0, 300);
  if (!quick) {
    auto sg = cp512;
    sg.insert(sg.end(), {"--engine", "simgrid"});
    simulate_case(bin, "fwd attention layer, stripe, cp=512 on 64 nodes, simgrid", sg, 60, 600);
    const std::vector<std::string> big{"--set", "cluster.nodes=512", "--set", "workload.seq_len=4m"};
    auto a = big;
    a.insert(a.end(), {"--set", "parallel.dp=32", "--set", "parallel.cp=128"});
    // The data-parallel shortcut (docs/engines.md, "Replica symmetry"): one replica for all, exactly.
    auto a1 = a, b1 = big;
    a1.insert(a1.end(), {"--symmetry", "dp"});
    simulate_case(bin, "4,096 GPUs, 4M, dp=32 x cp=128 step, analytic, --symmetry dp", a1, 60, 600, 8);
    auto a2 = a1;
    a2.insert(a2.end(), {"--stream", "off"});
    simulate_case(bin, "  the same, whole (--stream off)", a2, 0, 600);
    auto a3 = a1;
    a3.insert(a3.end(), {"--threads", "1"});
    simulate_case(bin, "  the same, streamed on one thread (--threads 1)", a3, 0, 600);
    // Streamed (--stream auto): the whole step would need ~474 GB (docs/engines.md, "Streaming").
    b1.insert(b1.end(), {"--set", "parallel.dp=4", "--set", "parallel.cp=1024", "--symmetry", "dp"});
    simulate_case(bin, "4,096 GPUs, 4M, dp=4 x cp=1024 step, analytic, --symmetry dp", b1, 60, 3600, 8);
    if (full) {  // SimGrid runs the shortcut too (docs/simgrid.md); the full step's 279M ops do not fit
      a1.insert(a1.end(), {"--engine", "simgrid"});
      simulate_case(bin, "4,096 GPUs, 4M, dp=32 x cp=128 step, simgrid, --symmetry dp", a1, 600, 1800);
    }
  }
  // The ring file's child before the engine rows grow this process: a child's
  // peak RSS counts its parent's at the fork (Linux carries it over the exec).
  ring_file_row(bin);
  engine_rows();
  schedule_read_row(bin);
  int targets = 0, met = 0;
  for (const auto& r : rows) targets += r.is_target, met += r.is_target && r.met;
  std::printf("%d of %d targets met\n", met, targets);
  return 0;
}
