// read_kineto: the files of one job, each read in one streaming pass
// (traces/kineto_read.cpp), checked against each other, then joined into one
// measured Timeline: op ids, names, ProfilerSteps, NCCL calls with their
// per-group sequence numbers, and the edges (per file: kineto_edges.cpp;
// collectives across files here). docs/kineto.md documents every rule.
#include "traces/kineto.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "traces/kineto_raw.hpp"
#include "traces/trace_error.hpp"

namespace rm::traces {

namespace {

using namespace kineto_raw;

bool has_gpu_event(const RawFile& f) {
  return std::any_of(f.events.begin(), f.events.end(), [](const RawEvent& e) { return e.kind != Kind::cpu; });
}

std::string pg_text(const std::vector<PgConfig>& pgs) {
  std::vector<std::string> parts;
  for (const PgConfig& p : pgs) parts.push_back(fmt::format("\"{}\" {}", p.name, p.ranks));
  return fmt::format("{}", fmt::join(parts, ", "));
}

// One job: one file per rank, the same world size and process groups.
void check_one_job(const std::vector<RawFile>& files) {
  for (const RawFile& f : files)
    if (!has_gpu_event(f))
      throw TraceError(fmt::format("{}: no GPU event (kernel, gpu_memcpy or gpu_memset): expected a PyTorch profiler "
                                   "trace recorded with CUDA activities",
                                   f.name));
  for (size_t i = 1; i < files.size(); ++i) {
    const RawFile& a = files[i - 1];
    const RawFile& b = files[i];
    if (a.rank == b.rank)
      throw TraceError(fmt::format("{} and {}: both are rank {} (expected one file per rank of one job)", a.name, b.name,
                                   a.rank));
  }
  const RawFile& first = files.front();
  for (size_t i = 1; i < files.size(); ++i) {
    const RawFile& b = files[i];
    if (b.world_size != first.world_size)
      throw TraceError(fmt::format("{} and {}: ranks of different jobs: distributedInfo.world_size {} vs {}", first.name,
                                   b.name, first.world_size == 0 ? "absent" : std::to_string(first.world_size),
                                   b.world_size == 0 ? "absent" : std::to_string(b.world_size)));
    if (!first.pg_config.empty() && !b.pg_config.empty() && first.pg_config != b.pg_config)
      throw TraceError(fmt::format("{} and {}: ranks of different jobs: distributedInfo.pg_config differs ({} vs {})",
                                   first.name, b.name, pg_text(first.pg_config), pg_text(b.pg_config)));
  }
  // The ranks of one job are profiled over the same steps, so their recorded
  // spans overlap; disjoint spans mean runs recorded at different times.
  std::vector<std::pair<int64_t, int64_t>> span;
  for (const RawFile& f : files) {
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
    for (const RawEvent& e : f.events) {
      lo = std::min(lo, e.start_ns);
      hi = std::max(hi, e.start_ns + e.dur_ns);
    }
    span.push_back({lo, hi});
  }
  for (size_t i = 0; i < files.size(); ++i)
    for (size_t j = i + 1; j < files.size(); ++j)
      if (span[i].second < span[j].first || span[j].second < span[i].first)
        throw TraceError(fmt::format(
            "{} and {}: ranks of different jobs: their recorded times do not overlap ({:.6f} s apart)", files[i].name,
            files[j].name,
            double(std::max(span[i].first, span[j].first) - std::min(span[i].second, span[j].second)) * 1e-9));
}

// "ProfilerStep#12" -> 12; nullopt for any other name.
std::optional<int> step_number(std::string_view name) {
  constexpr std::string_view kPrefix = "ProfilerStep#";
  if (name.substr(0, kPrefix.size()) != kPrefix || name.size() == kPrefix.size()) return std::nullopt;
  int n = 0;
  const char* end = name.data() + name.size();
  const auto [p, ec] = std::from_chars(name.data() + kPrefix.size(), end, n);
  if (ec != std::errc() || p != end || n < 0) return std::nullopt;
  return n;
}

// NCCL calls of one process group on one rank are numbered in start order. A
// kernel without a recorded group counts on its CUDA stream instead (one
// communicator per stream is how PyTorch issues them).
std::string group_key(const KinetoCollective& c, int stream) {
  return c.process_group.empty() ? fmt::format("stream {}", stream) : "pg " + c.process_group;
}

KinetoImport assemble(std::vector<RawFile> files) {
  if (files.empty()) throw TraceError("no Kineto trace given (expected one file per rank)");
  std::stable_sort(files.begin(), files.end(), [](const RawFile& a, const RawFile& b) { return a.rank < b.rank; });
  check_one_job(files);

  int64_t t0 = std::numeric_limits<int64_t>::max();
  for (const RawFile& f : files)
    for (const RawEvent& e : f.events) t0 = std::min(t0, e.start_ns);

  KinetoImport out;
  Timeline& t = out.timeline;
  t.source = Source::kineto;
  std::vector<std::string> names;
  std::vector<Edge> stream_edges, launch_edges, sync_edges;
  // (group key, seq) -> each member, ranks ascending.
  struct Member {
    int64_t op;
    std::string kind;
    bool inferred;
    int64_t start_ns, end_ns;
  };
  std::map<std::pair<std::string, int64_t>, std::vector<Member>> calls;
  int64_t next_op = 0;
  for (RawFile& f : files) {
    names.push_back(f.name);
    out.ranks.push_back({f.rank, f.world_size, f.name, f.backend, f.json_bytes, f.trace_events});
    t.rank_names[f.rank] = fmt::format("rank {} ({})", f.rank, std::filesystem::path(f.name).filename().string());
    for (const auto& [kind, n] : f.skipped) out.skipped[kind] += n;

    std::vector<int64_t> ops(f.events.size());
    for (int64_t& op : ops) op = next_op++;
    // Edges first: building the events below moves names out of f.events.
    FileEdges fe = infer_file_edges(f, ops);
    stream_edges.insert(stream_edges.end(), fe.stream.begin(), fe.stream.end());
    launch_edges.insert(launch_edges.end(), fe.launch.begin(), fe.launch.end());
    sync_edges.insert(sync_edges.end(), fe.sync.begin(), fe.sync.end());
    for (const auto& [kind, n] : fe.skipped) out.skipped[kind] += n;

    std::map<std::string, int> cpu_stream;  // "pid/tid" -> stream, in order of first appearance
    std::vector<std::pair<size_t, int64_t>> nccl;  // (event index, op)
    const size_t first_step = out.steps.size();
    for (size_t i = 0; i < f.events.size(); ++i) {
      RawEvent& e = f.events[i];
      Event ev;
      ev.op = ops[i];
      ev.rank = f.rank;
      const auto name_it = f.thread_names.find(e.thread);
      if (e.kind == Kind::cpu) {
        const auto [it, added] = cpu_stream.try_emplace(e.thread, kKinetoCpuStreamBase + int(cpu_stream.size()));
        ev.stream = it->second;
        if (added)
          t.stream_names[{f.rank, ev.stream}] =
              name_it != f.thread_names.end() ? name_it->second : fmt::format("thread {}", e.tid);
      } else {
        ev.stream = e.stream;
        // Named only when the trace says more than the default "stream N".
        if (out.gpu_streams.insert({f.rank, e.stream}).second && name_it != f.thread_names.end() &&
            !name_it->second.empty() && name_it->second != fmt::format("stream {}", e.stream))
          t.stream_names[{f.rank, e.stream}] = name_it->second;
      }
      ev.start_s = double(e.start_ns - t0) * 1e-9;
      ev.end_s = double(e.start_ns + e.dur_ns - t0) * 1e-9;
      ev.bytes = e.bytes;
      ev.category = std::move(e.category);
      if (e.kind == Kind::cpu)
        if (const auto n = step_number(e.name)) out.steps.push_back({e.name, *n, f.rank, ev.start_s, ev.end_s});
      if (e.nccl) nccl.push_back({i, ev.op});
      ev.name = std::move(e.name);
      t.events.push_back(std::move(ev));
    }
    std::stable_sort(out.steps.begin() + std::ptrdiff_t(first_step), out.steps.end(),
                     [](const KinetoStep& a, const KinetoStep& b) { return a.start_s < b.start_s; });

    std::stable_sort(nccl.begin(), nccl.end(), [&](const auto& a, const auto& b) {
      return f.events[a.first].start_ns < f.events[b.first].start_ns;
    });
    std::map<std::string, int64_t> seq;
    for (const auto& [i, op] : nccl) {
      KinetoCollective c = std::move(*f.events[i].nccl);
      // A collective without metadata in a job of one process group ran on it
      // (point-to-point kernels may run on any pair: left alone).
      if (c.process_group.empty() && f.pg_config.size() == 1 && c.kind != "send" && c.kind != "recv" &&
          c.kind != "sendrecv") {
        const PgConfig& pg = f.pg_config.front();
        c.process_group = pg.name;
        for (int64_t r : pg.ranks) c.group_ranks.push_back(int(r));
        c.group_size = int(pg.size > 0 ? pg.size : int64_t(pg.ranks.size()));
      }
      const std::string key = group_key(c, f.events[i].stream);
      c.seq = seq[key]++;
      const RawEvent& e = f.events[i];
      calls[{key, c.seq}].push_back({op, c.kind, c.inferred, e.start_ns, e.start_ns + e.dur_ns});
      out.collectives.emplace(op, std::move(c));
    }

    f.events = {};  // moved out; release what is left
  }

  t.edges = std::move(stream_edges);
  t.edges.insert(t.edges.end(), launch_edges.begin(), launch_edges.end());
  t.edges.insert(t.edges.end(), sync_edges.begin(), sync_edges.end());
  // One call's kernels across the recorded ranks: first member -> each other,
  // when they agree on the kind (else the guess of the call failed) and, for a
  // call guessed from kernel names, when the kernels overlap in time (every
  // member of an NCCL call runs until all have joined; point-to-point kernels
  // on one stream may pair with ranks that were not recorded).
  if (files.size() >= 2)
    for (const auto& [key, members] : calls) {
      if (members.size() < 2) continue;
      const Member& first = members.front();
      bool guessed = false;
      int64_t last_start = first.start_ns, first_end = first.end_ns;
      for (const Member& m : members) {
        guessed = guessed || m.inferred;
        last_start = std::max(last_start, m.start_ns);
        first_end = std::min(first_end, m.end_ns);
      }
      if (!std::all_of(members.begin(), members.end(), [&](const Member& m) { return m.kind == first.kind; })) {
        ++out.skipped["collective call whose ranks disagree on the kind"];
        continue;
      }
      if (guessed && last_start > first_end) {
        ++out.skipped["collective call guessed from kernel names whose kernels do not overlap"];
        continue;
      }
      for (size_t k = 1; k < members.size(); ++k) t.edges.push_back({first.op, members[k].op, EdgeKind::collective});
    }

  t.metadata["files"] = names;
  t.metadata["world_size"] = files.front().world_size;
  t.metadata["clock_zero_ns"] = t0;  // baseTimeNanoseconds + ts (in ns) at time 0
  return out;
}

}  // namespace

KinetoImport read_kineto(const std::vector<std::string>& paths) {
  std::vector<RawFile> files;
  for (const std::string& p : paths) files.push_back(read_raw_file(p));
  return assemble(std::move(files));
}

KinetoImport parse_kineto(const std::vector<std::pair<std::string, std::string>>& name_and_text) {
  std::vector<RawFile> files;
  for (const auto& [name, text] : name_and_text) files.push_back(read_raw_text(text, name));
  return assemble(std::move(files));
}

bool looks_like_kineto(std::string_view text) {
  if (text.find("\"traceEvents\"") == std::string_view::npos) return false;
  if (text.find("\"ringmaster.timeline\"") != std::string_view::npos) return false;
  for (std::string_view marker : {"\"schemaVersion\"", "\"deviceProperties\"", "\"distributedInfo\""})
    if (text.find(marker) != std::string_view::npos) return true;
  return false;
}

}  // namespace rm::traces
