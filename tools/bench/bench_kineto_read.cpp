// How fast read_kineto streams a PyTorch profiler trace: MB/s of JSON text
// (after gunzip) and trace events/s, on the recorded ResNet trace of
// ../shared/data/kineto (gzip, 26 MB of text) and on a synthetic trace of a
// few hundred MB written to /tmp (plain JSON, deleted afterwards) shaped like
// a Kineto export: steps of CPU ops, launches, kernels with their usual args,
// ac2g flows, memcpys and NCCL kernels with collective metadata. Prints one
// table; wall and CPU seconds (the machine may be shared).
//   build/bin/bench_kineto_read [--mb 300] [--file TRACE ...]   (from the repository root)
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "traces/kineto.hpp"

namespace {

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Writes about `mb` MB of Kineto-shaped JSON to `path`.
void write_synthetic(const std::string& path, int64_t mb) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot write " + path);
  std::string buf = R"J({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "synthetic"}],)J"
                    R"J( "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8},)J"
                    "\n\"traceEvents\": [\n";
  const std::string kernel =
      "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
      "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)";
  int64_t written = 0, ts = 1700000000000000, corr = 1, ext = 1;
  const int64_t target = mb * 1000 * 1000;
  bool first = true;
  auto emit = [&](const std::string& e) {
    if (!first) buf += ",\n";
    first = false;
    buf += e;
    if (buf.size() > (1 << 20)) {
      written += int64_t(std::fwrite(buf.data(), 1, buf.size(), f));
      buf.clear();
    }
  };
  for (int step = 0; written + int64_t(buf.size()) < target; ++step) {
    const int64_t step_start = ts;
    emit(fmt::format(R"J({{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{}", "pid": 1000, "tid": 1000, "ts": {}, "dur": 5000000, "args": {{"External id": {}}}}})J",
                     step, ts, ext++));
    for (int op = 0; op < 2000; ++op) {
      ts += 7;
      emit(fmt::format(R"J({{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1000, "tid": 1000, "ts": {}, "dur": 20, "args": {{"External id": {}, "Sequence number": {}, "Fwd thread id": 0, "Record function id": 0, "Ev Idx": {}}}}})J",
                       ts, ext, ext, ext));
      const bool nccl = op % 100 == 99;
      const bool copy = op % 50 == 25;
      const std::string call = copy ? "cudaMemcpyAsync" : "cudaLaunchKernel";
      emit(fmt::format(R"J({{"ph": "X", "cat": "cuda_runtime", "name": "{}", "pid": 1000, "tid": 1000, "ts": {}, "dur": 5, "args": {{"External id": {}, "cbid": 211, "correlation": {}}}}})J",
                       call, ts + 2, ext, corr));
      emit(fmt::format(R"J({{"ph": "s", "id": {}, "pid": 1000, "tid": 1000, "ts": {}, "cat": "ac2g", "name": "ac2g"}})J", corr,
                       ts + 2));
      const int stream = nccl ? 20 : 7;
      if (copy) {
        emit(fmt::format(R"J({{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7, "ts": {}, "dur": 4, "args": {{"External id": {}, "device": 0, "context": 1, "stream": 7, "correlation": {}, "bytes": 1048576, "memory bandwidth (GB/s)": 262.144}}}})J",
                         ts + 9, ext, corr));
      } else if (nccl) {
        emit(fmt::format(R"J({{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": 20, "ts": {}, "dur": 60, "args": {{"External id": {}, "queued": 0, "device": 0, "context": 1, "stream": 20, "correlation": {}, "registers per thread": 96, "shared memory": 87568, "blocks per SM": 0.074074, "warps per SM": 1.259259, "grid": [8, 1, 1], "block": [544, 1, 1], "est. achieved occupancy %": 0, "Collective name": "allreduce", "In msg nelems": 6637568, "Out msg nelems": 6637568, "Group size": 8, "dtype": "BFloat16", "In split size": "[]", "Out split size": "[]", "Process Group Name": "0", "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]"}}}})J",
                         ts + 9, ext, corr));
      } else {
        emit(fmt::format(R"J({{"ph": "X", "cat": "kernel", "name": "{}", "pid": 0, "tid": 7, "ts": {}, "dur": 6, "args": {{"External id": {}, "queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": {}, "registers per thread": 16, "shared memory": 0, "blocks per SM": 1.185185, "warps per SM": 4.740741, "grid": [128, 1, 1], "block": [128, 1, 1], "est. achieved occupancy %": 7}}}})J",
                         kernel, ts + 9, ext, corr));
      }
      emit(fmt::format(R"J({{"ph": "f", "id": {}, "pid": 0, "tid": {}, "ts": {}, "cat": "ac2g", "name": "ac2g", "bp": "e"}})J", corr,
                       stream, ts + 9));
      ++corr;
      ++ext;
    }
    ts = step_start + 5000000;
  }
  buf += R"J(], "traceName": "synthetic", "baseTimeNanoseconds": 0})J";
  buf += "\n";
  written += int64_t(std::fwrite(buf.data(), 1, buf.size(), f));
  if (std::fclose(f) != 0) throw std::runtime_error("cannot write " + path);
}

void measure(const std::string& label, const std::string& path) {
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_seconds();
  const rm::traces::KinetoImport k = rm::traces::read_kineto({path});
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = cpu_seconds() - c0;
  const double mb = double(k.ranks[0].json_bytes) / 1e6;
  const double entries = double(k.ranks[0].trace_events);
  std::printf("%-34s %9.1f %11.0f %9zu %9zu %7.2f %7.2f %8.1f %12.0f %10.1f\n", label.c_str(), mb, entries,
              k.timeline.events.size(), k.timeline.edges.size(), wall, cpu, mb / wall, entries / wall, mb / cpu);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t mb = 300;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--mb") && i + 1 < argc) mb = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--file") && i + 1 < argc) files.push_back(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_kineto_read [--mb 300] [--file TRACE ...]\n");
      return 2;
    }
  }
  // The recorded trace, beside the repository: from the repository root, or from build/bin.
  namespace fs = std::filesystem;
  const fs::path rel = fs::path("shared") / "data" / "kineto" / "param__resnet_kineto.json.gz";
  std::error_code ec;
  fs::path data = fs::path("..") / rel;
  if (!fs::exists(data)) data = fs::read_symlink("/proc/self/exe", ec).parent_path() / ".." / ".." / ".." / rel;
  std::printf("%-34s %9s %11s %9s %9s %7s %7s %8s %12s %10s\n", "trace", "text MB", "entries", "events", "edges",
              "wall s", "cpu s", "MB/s", "entries/s", "MB/cpu-s");
  try {
    if (std::filesystem::exists(data)) measure("param__resnet_kineto.json.gz", data.string());
    else std::printf("(%s not found: skipped)\n", data.string().c_str());
    for (const std::string& f : files) measure(std::filesystem::path(f).filename().string(), f);
    if (mb > 0) {
      const std::string tmp = fmt::format("/tmp/bench_kineto_read_{}.json", ::getpid());
      write_synthetic(tmp, mb);
      try {
        measure(fmt::format("synthetic {} MB (plain JSON)", mb), tmp);
      } catch (...) {
        std::filesystem::remove(tmp);
        throw;
      }
      std::filesystem::remove(tmp);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_kineto_read: %s\n", e.what());
    return 2;
  }
  return 0;
}
