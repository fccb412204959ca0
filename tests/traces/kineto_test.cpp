// The Kineto reader on small synthetic traces whose events and edges are
// known exactly (inline JSON through parse_kineto), and on the recorded
// traces of ../shared/data/kineto (counts checked against an independent
// Python reading of the same files).
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "traces/chrome_trace.hpp"
#include "traces/kineto.hpp"
#include "traces/kineto_raw.hpp"
#include "traces/text_file.hpp"
#include "traces/trace_error.hpp"

namespace rm::traces {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

// A trace with `events` (comma-separated JSON objects) and a distributedInfo.
std::string trace(const std::string& events, const std::string& dist = R"({"rank": 0})",
                  const std::string& extra = "") {
  return fmt::format(R"({{"schemaVersion": 1, "distributedInfo": {}, {} "traceEvents": [{}]}})", dist, extra, events);
}

std::string cpu(const std::string& cat, const std::string& name, int64_t ts, int64_t dur, int64_t corr = -1,
                int tid = 100) {
  const std::string args = corr >= 0 ? fmt::format(R"("correlation": {})", corr) : "";
  return fmt::format(R"({{"ph": "X", "cat": "{}", "name": "{}", "pid": 100, "tid": {}, "ts": {}, "dur": {}, "args": {{{}}}}})",
                     cat, name, tid, ts, dur, args);
}

std::string gpu(const std::string& cat, const std::string& name, int stream, int64_t ts, int64_t dur, int64_t corr,
                const std::string& more = "") {
  return fmt::format(
      R"({{"ph": "X", "cat": "{}", "name": "{}", "pid": 0, "tid": {}, "ts": {}, "dur": {}, "args": {{"stream": {}, "correlation": {}{}}}}})",
      cat, name, stream, ts, dur, stream, corr, more);
}

std::string sync_event(const std::string& kind, int64_t corr, int stream, int wait_stream = -1, int64_t record = -1) {
  return fmt::format(
      R"({{"ph": "X", "cat": "cuda_sync", "name": "{}", "pid": 0, "tid": {}, "ts": 1, "dur": 1, "args": {{"cuda_sync_kind": "{}", "stream": {}, "correlation": {}, "wait_on_stream": {}, "wait_on_cuda_event_record_corr_id": {}}}}})",
      kind, stream, kind, stream, corr, wait_stream, record);
}

KinetoImport parse_one(const std::string& text) { return parse_kineto({{"t.json", text}}); }

std::string error_of(const std::vector<std::pair<std::string, std::string>>& files) {
  try {
    parse_kineto(files);
  } catch (const TraceError& e) {
    return e.what();
  }
  return "";
}
std::string error_of(const std::string& text) { return error_of({{"t.json", text}}); }

std::vector<Edge> edges_of(const KinetoImport& k, EdgeKind kind) {
  std::vector<Edge> out;
  for (const Edge& e : k.timeline.edges)
    if (e.kind == kind) out.push_back(e);
  return out;
}

Edge E(int64_t from, int64_t to, EdgeKind k) { return {from, to, k}; }

// Found by fuzz_kineto: a JSON scalar as the whole text took the back of an empty stack.
TEST(Kineto, AScalarAsTheWholeTraceIsRefused) {
  for (const char* text : {"5", "\"x\"", "null", "true"}) EXPECT_THROW(parse_one(text), TraceError) << text;
}

TEST(Kineto, SmallTraceGivesExactEventsAndEdges) {
  // ops: 0 step, 1 aten::mm, 2 launch(c10), 3 memcpy call(c11), 4 launch(c12) on stream 9,
  // 5 cudaStreamSynchronize(c13), then GPU: 6 kernel s7, 7 memcpy s7, 8 kernel s9.
  const std::string events = cpu("user_annotation", "ProfilerStep#3", 1000, 100) + "," +
                             cpu("cpu_op", "aten::mm", 1001, 20) + "," +
                             cpu("cuda_runtime", "cudaLaunchKernel", 1002, 5, 10) + "," +
                             cpu("cuda_runtime", "cudaMemcpyAsync", 1010, 5, 11) + "," +
                             cpu("cuda_runtime", "cudaLaunchKernel", 1016, 2, 12) + "," +
                             cpu("cuda_runtime", "cudaStreamSynchronize", 1020, 30, 13) + "," +
                             gpu("kernel", "gemm", 7, 1005, 10, 10) + "," +
                             gpu("gpu_memcpy", "Memcpy HtoD", 7, 1015, 20, 11, R"(, "bytes": 4096)") + "," +
                             gpu("kernel", "relu", 9, 1020, 3, 12) + "," + sync_event("Stream Sync", 13, 7) + "," +
                             R"({"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7 "}},)"
                             R"({"ph": "i", "name": "marker", "pid": 100, "tid": 100, "ts": 1000})";
  const KinetoImport k = parse_one(trace(events));
  const auto& ev = k.timeline.events;
  ASSERT_EQ(ev.size(), 9u);
  for (size_t i = 0; i < ev.size(); ++i) EXPECT_EQ(ev[i].op, int64_t(i));
  EXPECT_EQ(k.timeline.source, Source::kineto);
  EXPECT_EQ(ev[0].stream, kKinetoCpuStreamBase);
  EXPECT_EQ(ev[6].stream, 7);
  EXPECT_EQ(ev[8].stream, 9);
  EXPECT_EQ(ev[7].bytes, 4096);
  EXPECT_EQ(ev[7].category, "gpu_memcpy");
  EXPECT_EQ(ev[6].name, "gemm");
  EXPECT_DOUBLE_EQ(ev[0].start_s, 0.0);
  EXPECT_DOUBLE_EQ(ev[6].start_s, 5e-6);
  EXPECT_DOUBLE_EQ(ev[7].end_s, 35e-6);
  EXPECT_EQ(k.gpu_streams, (std::set<StreamKey>{{0, 7}, {0, 9}}));
  EXPECT_EQ(k.timeline.stream_name(0, 7), "stream 7");
  EXPECT_EQ(k.timeline.stream_name(0, 9), "stream 9");
  EXPECT_EQ(k.timeline.stream_name(0, kKinetoCpuStreamBase), "thread 100");
  ASSERT_EQ(k.steps.size(), 1u);
  EXPECT_EQ(k.steps[0], (KinetoStep{"ProfilerStep#3", 3, 0, 0.0, 100e-6}));
  EXPECT_EQ(k.skipped, (std::map<std::string, int64_t>{{"ph i", 1}}));
  EXPECT_EQ(k.timeline.edges,
            (std::vector<Edge>{E(6, 7, EdgeKind::stream), E(2, 6, EdgeKind::launch), E(3, 7, EdgeKind::launch),
                               E(4, 8, EdgeKind::launch), E(7, 5, EdgeKind::sync)}));
  ASSERT_EQ(k.ranks.size(), 1u);
  EXPECT_EQ(k.ranks[0].rank, 0);
  EXPECT_EQ(k.ranks[0].world_size, 0);
}

TEST(Kineto, StreamWaitEventAndEventSyncFollowTheRecordedEvent) {
  // Kernel A (c1) on stream 20, cudaEventRecord (c2) on 20, cudaStreamWaitEvent (c3) makes
  // stream 24 wait: its next op B (c4) depends on A. Then an event sync (c5) and a query
  // (c6) on record c2, and a query (c8) on a kernel C (c7) still running when it returned.
  const std::string events =
      cpu("cuda_runtime", "cudaLaunchKernel", 0, 2, 1) + "," + cpu("cuda_runtime", "cudaEventRecord", 3, 1, 2) + "," +
      cpu("cuda_runtime", "cudaStreamWaitEvent", 5, 1, 3) + "," + cpu("cuda_runtime", "cudaLaunchKernel", 7, 1, 4) +
      "," + cpu("cuda_runtime", "cudaEventSynchronize", 9, 40, 5) + "," +
      cpu("cuda_runtime", "cudaEventQuery", 60, 1, 6) + "," + cpu("cuda_runtime", "cudaLaunchKernel", 62, 1, 7) + "," +
      cpu("cuda_runtime", "cudaEventRecord", 64, 1, 9) + "," + cpu("cuda_runtime", "cudaEventQuery", 66, 1, 8) + "," +
      gpu("kernel", "A", 20, 2, 40, 1) + "," + gpu("kernel", "B", 24, 42, 5, 4) + "," +
      gpu("kernel", "C", 20, 63, 100, 7) + "," + sync_event("Stream Wait Event", 3, 24, 20, 2) + "," +
      sync_event("Event Sync", 5, -1, 20, 2) + "," + sync_event("Event Sync", 6, -1, 20, 2) + "," +
      sync_event("Event Sync", 8, -1, 20, 9) + "," + sync_event("Mystery Sync", 8, -1);
  const KinetoImport k = parse_one(trace(events));
  // ops 0..8 the calls, 9 A, 10 B, 11 C
  EXPECT_EQ(edges_of(k, EdgeKind::sync),
            (std::vector<Edge>{E(9, 10, EdgeKind::sync), E(9, 4, EdgeKind::sync), E(9, 5, EdgeKind::sync)}));
  EXPECT_EQ(k.skipped.at("cuda_sync Mystery Sync"), 1);
}

TEST(Kineto, ContextSyncWaitsForEveryStream) {
  const std::string events = cpu("cuda_runtime", "cudaLaunchKernel", 0, 1, 1) + "," +
                             cpu("cuda_runtime", "cudaLaunchKernel", 2, 1, 2) + "," +
                             cpu("cuda_runtime", "cudaDeviceSynchronize", 4, 50, 3) + "," +
                             gpu("kernel", "a", 7, 2, 10, 1) + "," + gpu("kernel", "b", 8, 3, 20, 2);
  // With the cuda_sync event, and without it (from the runtime call's name): the same edges.
  const KinetoImport with = parse_one(trace(events + "," + sync_event("Context Sync", 3, -1)));
  const KinetoImport without = parse_one(trace(events));
  const std::vector<Edge> expected{E(3, 2, EdgeKind::sync), E(4, 2, EdgeKind::sync)};
  EXPECT_EQ(edges_of(with, EdgeKind::sync), expected);
  EXPECT_EQ(edges_of(without, EdgeKind::sync), expected);
}

TEST(Kineto, StreamSynchronizeWithoutCudaSyncTakesTheOpThatEndedLastBeforeItReturned) {
  // Kernel a (s7) ends at 12, b (s8) at 23, c (s9) at 200, after the call returned at 30.
  const std::string events =
      cpu("cuda_runtime", "cudaLaunchKernel", 0, 1, 1) + "," + cpu("cuda_runtime", "cudaLaunchKernel", 1, 1, 2) + "," +
      cpu("cuda_runtime", "cudaLaunchKernel", 2, 1, 3) + "," +
      cpu("cuda_runtime", "cudaStreamSynchronize", 4, 26, 4) + "," + gpu("kernel", "a", 7, 2, 10, 1) + "," +
      gpu("kernel", "b", 8, 3, 20, 2) + "," + gpu("kernel", "c", 9, 4, 196, 3);
  EXPECT_EQ(edges_of(parse_one(trace(events)), EdgeKind::sync), (std::vector<Edge>{E(5, 3, EdgeKind::sync)}));
}

TEST(Kineto, StreamWaitEventWithoutCudaSyncFollowsTheThreadsLaunches) {
  // launch a (s7), record, wait, launch b (s9): b waits for a. Then the same on one
  // stream (no edge: stream order says it), and a waiter that started before the
  // awaited op ended (no edge: the recorded times contradict the guess).
  auto calls = [](int64_t c0, int64_t t) {
    return cpu("cuda_runtime", "cudaLaunchKernel", t, 1, c0) + "," + cpu("cuda_runtime", "cudaEventRecord", t + 1, 1, c0 + 1) +
           "," + cpu("cuda_runtime", "cudaStreamWaitEvent", t + 2, 1, c0 + 2) + "," +
           cpu("cuda_runtime", "cudaLaunchKernel", t + 3, 1, c0 + 3);
  };
  const std::string events = calls(1, 0) + "," + calls(5, 100) + "," + calls(9, 200) + "," +
                             gpu("kernel", "a", 7, 1, 10, 1) + "," + gpu("kernel", "b", 9, 11, 10, 4) + "," +
                             gpu("kernel", "c", 7, 101, 10, 5) + "," + gpu("kernel", "d", 7, 111, 10, 8) + "," +
                             gpu("kernel", "e", 7, 201, 10, 9) + "," + gpu("kernel", "f", 9, 205, 10, 12);
  // ops 0..11 the calls, 12 a, 13 b, 14 c, 15 d, 16 e, 17 f
  EXPECT_EQ(edges_of(parse_one(trace(events)), EdgeKind::sync), (std::vector<Edge>{E(12, 13, EdgeKind::sync)}));
  // Without the cudaEventRecord calls (older traces) the last launch before the wait stands for it.
  const std::string no_record = cpu("cuda_runtime", "cudaLaunchKernel", 0, 1, 1) + "," +
                                cpu("cuda_runtime", "cudaStreamWaitEvent", 2, 1, 3) + "," +
                                cpu("cuda_runtime", "cudaLaunchKernel", 3, 1, 4) + "," + gpu("kernel", "a", 7, 1, 10, 1) +
                                "," + gpu("kernel", "b", 9, 11, 10, 4);
  EXPECT_EQ(edges_of(parse_one(trace(no_record)), EdgeKind::sync), (std::vector<Edge>{E(3, 4, EdgeKind::sync)}));
}

TEST(Kineto, LaunchFallsBackOnAc2gFlows) {
  // No correlation on either side: the flow's ends sit at the call's and the kernel's start.
  const std::string events =
      R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100, "ts": 10, "dur": 3, "args": {}},)"
      R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20, "dur": 3, "args": {"stream": 7}},)"
      R"({"ph": "s", "id": 5, "pid": 100, "tid": 100, "ts": 10, "cat": "ac2g", "name": "ac2g"},)"
      R"({"ph": "f", "id": 5, "pid": 0, "tid": 7, "ts": 20, "cat": "ac2g", "name": "ac2g", "bp": "e"})";
  EXPECT_EQ(edges_of(parse_one(trace(events)), EdgeKind::launch), (std::vector<Edge>{E(0, 1, EdgeKind::launch)}));
}

TEST(Kineto, OlderSpellingsAndStreamInTid) {
  // PyTorch 1.8 wrote "Kernel" / "Runtime" and no args.stream; the tid is the stream.
  const std::string events =
      R"({"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 0, "dur": 3, "args": {"correlation": 4}},)"
      R"({"ph": "X", "cat": "Kernel", "name": "k", "pid": 0, "tid": "stream 7", "ts": 5, "dur": 3, "args": {"correlation": 4}})";
  const KinetoImport k = parse_one(trace(events));
  ASSERT_EQ(k.timeline.events.size(), 2u);
  EXPECT_EQ(k.timeline.events[0].category, "cuda_runtime");
  EXPECT_EQ(k.timeline.events[1].category, "kernel");
  EXPECT_EQ(k.timeline.events[1].stream, 7);
  EXPECT_EQ(edges_of(k, EdgeKind::launch), (std::vector<Edge>{E(0, 1, EdgeKind::launch)}));
}

std::string nccl_kernel(int stream, int64_t ts, int64_t corr, const std::string& kind, int64_t in, int64_t out,
                        const std::string& pg = "0") {
  return gpu("kernel", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", stream, ts,
             10, corr,
             fmt::format(R"(, "Collective name": "{}", "In msg nelems": {}, "Out msg nelems": {}, "Group size": 2, "dtype": "BFloat16", "Process Group Name": "{}", "Process Group Ranks": "[0, 1]")",
                         kind, in, out, pg));
}

TEST(Kineto, NcclMetadataAndSequence) {
  const std::string events = nccl_kernel(40, 100, 1, "allreduce", 1000, 1000) + "," +
                             nccl_kernel(40, 50, 2, "_allgather_base", 10, 20) + "," +
                             nccl_kernel(41, 70, 3, "reduce_scatter_tensor_coalesced", 20, 10, "1");
  const KinetoImport k = parse_one(trace(events));
  ASSERT_EQ(k.collectives.size(), 3u);
  const KinetoCollective& ar = k.collectives.at(0);
  EXPECT_EQ(ar.kind, "allreduce");
  EXPECT_FALSE(ar.inferred);
  EXPECT_EQ(ar.bytes, 2000);
  EXPECT_EQ(ar.seq, 1);  // starts after the allgather on the same group
  EXPECT_EQ(ar.group_ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(ar.group_size, 2);
  EXPECT_EQ(ar.dtype, "BFloat16");
  EXPECT_EQ(k.collectives.at(1).kind, "allgather");
  EXPECT_EQ(k.collectives.at(1).bytes, 40);  // the gathered output
  EXPECT_EQ(k.collectives.at(1).seq, 0);
  EXPECT_EQ(k.collectives.at(2).kind, "reduce_scatter");
  EXPECT_EQ(k.collectives.at(2).bytes, 40);  // the full input
  EXPECT_EQ(k.collectives.at(2).seq, 0);     // its own group
  EXPECT_EQ(k.timeline.events[0].bytes, 2000);
}

TEST(Kineto, NcclKindFromKernelName) {
  const std::map<std::string, std::string> cases{
      {"ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "allreduce"},
      {"ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "allgather"},
      {"ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "reduce_scatter"},
      {"ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "sendrecv"},
      {"ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "sendrecv"},
      {"ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "broadcast"},
      {"ncclKernel_Reduce_RING_LL_Sum_half(ncclWorkElem)", "reduce"},
      {"ncclAllReduceRingLLKernel_sum_f32(ncclColl)", "allreduce"},
      {"ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", "unknown"},
      {"void at::native::vectorized_elementwise_kernel<4>", ""},
  };
  for (const auto& [name, kind] : cases) EXPECT_EQ(nccl_kind_from_kernel_name(name), kind) << name;
  EXPECT_EQ(nccl_kind_from_collective_name("all_to_allv"), "alltoall");
  EXPECT_EQ(nccl_kind_from_collective_name("barrier"), "allreduce");
  EXPECT_EQ(nccl_kind_from_collective_name("gather"), "unknown");
  EXPECT_EQ(dtype_bytes("Float"), 4);
  EXPECT_EQ(dtype_bytes("Float8_e4m3fn"), 1);
  EXPECT_EQ(dtype_bytes("quaternion"), 0);
}

TEST(Kineto, InferredNcclKernelHasKindButNoSize) {
  const KinetoImport k =
      parse_one(trace(gpu("kernel", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 14, 0, 5, 1)));
  ASSERT_EQ(k.collectives.size(), 1u);
  const KinetoCollective& c = k.collectives.at(0);
  EXPECT_EQ(c.kind, "allreduce");
  EXPECT_TRUE(c.inferred);
  EXPECT_EQ(c.bytes, 0);
  EXPECT_EQ(c.in_nelems, -1);
  EXPECT_EQ(c.process_group, "");
}

TEST(Kineto, InferredCollectiveTakesTheJobsOnlyProcessGroup) {
  const std::string dist =
      R"({"rank": 0, "world_size": 2, "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": 2, "ranks": [0, 1]}]})";
  const std::string events = gpu("kernel", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 14, 0, 5, 1) + "," +
                             gpu("kernel", "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", 15, 0, 5, 2);
  const KinetoImport k = parse_one(trace(events, dist));
  EXPECT_EQ(k.collectives.at(0).process_group, "0");
  EXPECT_EQ(k.collectives.at(0).group_ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(k.collectives.at(0).group_size, 2);
  EXPECT_EQ(k.collectives.at(1).process_group, "");  // point-to-point: any pair
}

TEST(Kineto, CollectivesMatchAcrossRanksByGroupAndSequence) {
  const std::string dist0 = R"({"rank": 0, "world_size": 2, "backend": "nccl"})";
  const std::string dist1 = R"({"rank": 1, "world_size": 2, "backend": "nccl"})";
  // Given rank 1 first: files are ordered by rank. Rank 1's calls start in the other order of
  // correlation ids, but sequence numbers follow start times.
  const std::string r1 = trace(nccl_kernel(40, 200, 9, "allreduce", 8, 8) + "," + nccl_kernel(40, 100, 8, "allreduce", 4, 4),
                               dist1);
  const std::string r0 = trace(nccl_kernel(40, 110, 1, "allreduce", 4, 4) + "," + nccl_kernel(40, 210, 2, "allreduce", 8, 8),
                               dist0);
  const KinetoImport k = parse_kineto({{"r1.json", r1}, {"r0.json", r0}});
  ASSERT_EQ(k.ranks.size(), 2u);
  EXPECT_EQ(k.ranks[0].file, "r0.json");
  EXPECT_EQ(k.ranks[1].backend, "nccl");
  // ops: rank 0 -> 0, 1; rank 1 -> 2 (start 200, seq 1), 3 (start 100, seq 0)
  EXPECT_EQ(k.collectives.at(3).seq, 0);
  EXPECT_EQ(edges_of(k, EdgeKind::collective),
            (std::vector<Edge>{E(0, 3, EdgeKind::collective), E(1, 2, EdgeKind::collective)}));
  EXPECT_DOUBLE_EQ(k.timeline.events[3].start_s, 0.0);  // the earliest event of all files
  EXPECT_EQ(k.timeline.events[3].rank, 1);
}

TEST(Kineto, GuessedCallsMustOverlapInTime) {
  const std::string k = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)";
  const std::string r0 = trace(gpu("kernel", k, 84, 0, 10, 1) + "," + gpu("kernel", k, 84, 100, 10, 2),
                               R"({"rank": 0, "world_size": 2})");
  const std::string r1 = trace(gpu("kernel", k, 84, 5, 10, 1) + "," + gpu("kernel", k, 84, 200, 10, 2),
                               R"({"rank": 1, "world_size": 2})");
  const KinetoImport imp = parse_kineto({{"r0", r0}, {"r1", r1}});
  EXPECT_EQ(edges_of(imp, EdgeKind::collective), (std::vector<Edge>{E(0, 2, EdgeKind::collective)}));
  EXPECT_EQ(imp.skipped.at("collective call guessed from kernel names whose kernels do not overlap"), 1);
}

TEST(Kineto, FractionalMicrosecondsAndBaseTimeAreExact) {
  // Rank 1's clock base is 1 s later; its ts are relative to its own base.
  const std::string r0 = trace(gpu("kernel", "a", 7, 0, 1, 1) + "," +
                                   R"({"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 4458676522690.655, "dur": 156.777, "args": {"stream": 7}})",
                               R"({"rank": 0, "world_size": 2})", R"("baseTimeNanoseconds": 1000000000000000000,)");
  const std::string r1 = trace(R"({"ph": "X", "cat": "kernel", "name": "c", "pid": 0, "tid": 7, "ts": 4458675522690.656, "dur": 1, "args": {"stream": 7}})",
                               R"({"rank": 1, "world_size": 2})", R"("baseTimeNanoseconds": 1000000001000000000,)");
  const KinetoImport k = parse_kineto({{"r0", r0}, {"r1", r1}});
  const auto& ev = k.timeline.events;
  EXPECT_EQ(ev[1].start_s, 4458676522690655 * 1e-9);
  EXPECT_EQ(ev[1].end_s, (4458676522690655 + 156777) * 1e-9);
  EXPECT_EQ(ev[2].start_s, 4458676522690656 * 1e-9);
}

TEST(Kineto, DecimalMicrosecondsToNanoseconds) {
  using kineto_raw::decimal_us_to_ns;
  EXPECT_EQ(decimal_us_to_ns("1.5"), 1500);
  EXPECT_EQ(decimal_us_to_ns("4458676522690.655"), 4458676522690655);
  EXPECT_EQ(decimal_us_to_ns("0.0004"), 0);
  EXPECT_EQ(decimal_us_to_ns("0.0005"), 1);  // half up
  EXPECT_EQ(decimal_us_to_ns("2.0015"), 2002);
  EXPECT_EQ(decimal_us_to_ns("68.0"), 68000);
  EXPECT_EQ(decimal_us_to_ns("-3.25"), -3250);
  EXPECT_EQ(decimal_us_to_ns("1e3"), 1000000);
  EXPECT_EQ(decimal_us_to_ns("1.5E-3"), 2);
  EXPECT_EQ(decimal_us_to_ns("000012.5"), 12500);
  EXPECT_EQ(decimal_us_to_ns("1e20"), std::nullopt);
  EXPECT_EQ(decimal_us_to_ns("9223372036854775.807"), 9223372036854775807);
  EXPECT_EQ(decimal_us_to_ns("9223372036854775.808"), std::nullopt);
  EXPECT_EQ(decimal_us_to_ns("x"), std::nullopt);
}

TEST(Kineto, RoundTripThroughOurChromeTrace) {
  const std::string events = cpu("cuda_runtime", "cudaLaunchKernel", 0, 1, 1) + "," +
                             cpu("cuda_runtime", "cudaDeviceSynchronize", 4, 50, 3) + "," +
                             gpu("kernel", "a", 7, 2, 10, 1);
  const KinetoImport k = parse_one(trace(events));
  ASSERT_EQ(k.timeline.edges.size(), 2u);
  const Timeline back = from_chrome_json(to_chrome_json(k.timeline), "back.json");
  EXPECT_EQ(back.edges, k.timeline.edges);
  EXPECT_EQ(back.metadata, k.timeline.metadata);
  EXPECT_EQ(back.stream_names, k.timeline.stream_names);
  EXPECT_EQ(back.rank_names, k.timeline.rank_names);
  EXPECT_EQ(back.events.size(), k.timeline.events.size());
  EXPECT_TRUE(approx_equal(back, k.timeline));
}

TEST(Kineto, LooksLikeKineto) {
  EXPECT_TRUE(looks_like_kineto(trace("")));
  EXPECT_FALSE(looks_like_kineto(R"({"traceEvents": []})"));
  EXPECT_FALSE(looks_like_kineto(to_chrome_json(Timeline{})));
  EXPECT_FALSE(looks_like_kineto(R"({"schemaVersion": 1})"));
}

// --- bad input: one line naming the file, the event and what was expected ---

TEST(KinetoBadInput, MalformedEventsNameFileIndexAndField) {
  const std::string ok = gpu("kernel", "k", 7, 0, 1, 1) + ",";
  struct Case {
    std::string event, expected;
  };
  const std::vector<Case> cases{
      {R"({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "dur": 3, "args": {}})",
       "t.json: traceEvents[1] (\"gemm\"): missing \"ts\""},
      {R"({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 3, "args": {}})",
       "t.json: traceEvents[1] (\"gemm\"): missing \"dur\""},
      {R"({"ph": "X", "cat": "cpu_op", "name": "mm", "pid": 0, "tid": 7, "ts": 3, "dur": -2})",
       "t.json: traceEvents[1] (\"mm\"): dur: expected >= 0, got -2"},
      {R"({"ph": "X", "cat": "cpu_op", "name": "mm", "pid": 0, "tid": 7, "ts": "3", "dur": 2})",
       "traceEvents[1] (\"mm\"): ts: expected a number (microseconds), got a string"},
      {R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 3, "dur": 2, "args": {"stream": "seven"}})",
       "traceEvents[1] (\"k\"): args.stream: expected an integer, got a string"},
      {R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 3, "dur": 2, "args": {"stream": 4294967296}})",
       "args.stream: 4294967296 is out of range [0, 1048575]"},
      {R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 3, "dur": 2, "args": {"stream": 7, "correlation": 1.5}})",
       "args.correlation: expected an integer, got 1.5"},
      {R"({"ph": "X", "cat": "gpu_memcpy", "name": "m", "pid": 0, "tid": 7, "ts": 3, "dur": 2, "args": {"stream": 7, "bytes": 99999999999999999999}})",
       "args.bytes: 99999999999999999999 is out of range"},
      {R"({"ph": "X", "cat": "kernel", "name": "nccl_x", "pid": 0, "tid": 7, "ts": 3, "dur": 2, "args": {"stream": 7, "Collective name": "allreduce", "In msg nelems": "many"}})",
       "args.\"In msg nelems\": expected an integer, got a string"},
      {R"({"ph": "X", "cat": "kernel", "name": "nccl_x", "pid": 0, "tid": 7, "ts": 3, "dur": 2, "args": {"stream": 7, "Collective name": "allreduce", "Process Group Ranks": "[0, x]"}})",
       "args.\"Process Group Ranks\": expected a list of ranks like \"[0, 1]\", got \"[0, x]\""},
      {R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "ts": 3, "dur": 2, "args": {"stream": 7}})",
       "traceEvents[1] (\"k\"): missing \"tid\""},
      {R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 3, "ts": 4, "dur": 2})",
       "t.json: traceEvents[1]: key \"ts\" appears twice in one object"},
      {R"({"ph": "X", "cat": "kernel", "pid": 0, "tid": 7, "ts": 3, "dur": 2, "args": {"stream": 7}})",
       "traceEvents[1] (\"\"): missing \"name\""},
      {R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1e999, "dur": 2})",
       "t.json: not valid JSON at byte 265 (number overflow parsing '1e999')"},
  };
  for (const Case& c : cases) EXPECT_THAT(error_of(trace(ok + c.event)), HasSubstr(c.expected)) << c.event;
}

TEST(KinetoBadInput, UnknownKindsAreCountedNotFatal) {
  const std::string events = gpu("kernel", "k", 7, 0, 1, 1) +
                             R"(,{"ph": "X", "cat": "mtia_ccp_events", "name": "z", "ts": "bad"},)"
                             R"({"ph": "C", "name": "counter"}, {"name": "no ph"}, 42, [1, 2])";
  const KinetoImport k = parse_one(trace(events));
  EXPECT_EQ(k.skipped, (std::map<std::string, int64_t>{{"ph X cat mtia_ccp_events", 1}, {"ph C", 1}, {"no ph", 1}}));
}

TEST(KinetoBadInput, FilesAndJobs) {
  const std::string k = gpu("kernel", "k", 7, 0, 1, 1);
  EXPECT_THAT(error_of(trace(cpu("cpu_op", "mm", 0, 1))),
              HasSubstr("t.json: no GPU event (kernel, gpu_memcpy or gpu_memset)"));
  EXPECT_THAT(error_of(R"({"traceEvents": [)" + k), HasSubstr("t.json: not valid JSON at byte"));
  EXPECT_THAT(error_of("{\"schemaVersion\": 1}"), HasSubstr("t.json: no \"traceEvents\" array"));
  EXPECT_THAT(error_of(""), HasSubstr("t.json: not valid JSON"));
  EXPECT_THAT(error_of({{"a.json", trace(k, R"({"rank": 1, "world_size": 2})")},
                        {"b.json", trace(k, R"({"rank": 1, "world_size": 2})")}}),
              HasSubstr("a.json and b.json: both are rank 1 (expected one file per rank of one job)"));
  EXPECT_THAT(error_of({{"a.json", trace(k, R"({"rank": 0, "world_size": 2})")},
                        {"b.json", trace(k, R"({"rank": 1, "world_size": 4})")}}),
              HasSubstr("a.json and b.json: ranks of different jobs: distributedInfo.world_size 2 vs 4"));
  const std::string pg0 = R"({"rank": 0, "world_size": 2, "pg_config": [{"pg_name": "0", "pg_size": 2, "ranks": [0, 1]}]})";
  const std::string pg1 = R"({"rank": 1, "world_size": 2, "pg_config": [{"pg_name": "0", "pg_size": 2, "ranks": [1, 0]}]})";
  EXPECT_THAT(error_of({{"a.json", trace(k, pg0)}, {"b.json", trace(k, pg1)}}),
              HasSubstr("a.json and b.json: ranks of different jobs: distributedInfo.pg_config differs"));
  EXPECT_THAT(error_of({{"a.json", trace(gpu("kernel", "k", 7, 0, 10, 1), R"({"rank": 0, "world_size": 2})")},
                        {"b.json", trace(gpu("kernel", "k", 7, 2000010, 10, 1), R"({"rank": 1, "world_size": 2})")}}),
              HasSubstr("a.json and b.json: ranks of different jobs: their recorded times do not overlap (2.000000 s apart)"));
  EXPECT_THAT(error_of(trace(k, R"({"rank": 2, "world_size": 2})")),
              HasSubstr("t.json: distributedInfo.rank: 2 is not below world_size 2"));
  EXPECT_THAT(error_of(trace(k, R"({"rank": -1})")), HasSubstr("distributedInfo.rank: -1 is out of range"));
  EXPECT_THAT(error_of(std::vector<std::pair<std::string, std::string>>{}), HasSubstr("no Kineto trace given"));
  const std::string deep = std::string(300, '[') + std::string(300, ']');
  EXPECT_THAT(error_of(trace(k + R"(, {"ph": "X", "args": {"grid": )" + deep + "}}")),
              HasSubstr("t.json: nested deeper than 256 levels"));
  EXPECT_THAT(error_of(trace(k + ", {\"ph\": \"X\", \"name\": \"\xc3\x28\"}")), HasSubstr("t.json: not valid JSON"));
  EXPECT_THAT(error_of(R"({"traceEvents": [], "traceEvents": []})"), HasSubstr("t.json: key \"traceEvents\" appears twice"));
}

TEST(KinetoBadInput, GzipFilesTruncatedOrCorrupt) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("kineto_test_{}", ::getpid());
  fs::create_directories(dir);
  const std::string text = trace(gpu("kernel", "k", 7, 0, 1, 1));
  const std::string good = (dir / "good.json.gz").string();
  write_text_file_atomic(good, text);
  EXPECT_EQ(read_kineto({good}).timeline.events.size(), 1u);
  std::ifstream in(good, std::ios::binary);
  const std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto write = [&](const std::string& name, const std::string& bytes) {
    const std::string p = (dir / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  };
  const std::string cut = write("cut.json.gz", gz.substr(0, gz.size() / 2));
  std::string flipped = gz;
  flipped[gz.size() / 2] = char(flipped[gz.size() / 2] ^ 0x55);
  const std::string bad = write("bad.json.gz", flipped);
  const std::string extra = write("extra.json.gz", gz + "junk");
  const std::string plain = write("plain.json", text);
  auto err = [](const std::string& p) {
    try {
      read_kineto({p});
    } catch (const TraceError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_THAT(err(cut), HasSubstr(cut + ": truncated gzip data"));
  EXPECT_THAT(err(bad), HasSubstr(bad + ": "));
  EXPECT_THAT(err(extra), HasSubstr(extra + ": bytes after the end of the gzip stream"));
  EXPECT_THAT(err((dir / "missing.json").string()), HasSubstr("missing.json: cannot open file"));
  EXPECT_THAT(err(dir.string()), HasSubstr(": is a directory"));
  EXPECT_EQ(read_kineto({plain}).timeline.events.size(), 1u);
  fs::remove_all(dir);
}

TEST(KinetoBadInput, CutOrDamagedTextIsATraceErrorNeverACrash) {
  // Every prefix of a small valid trace, and random byte changes: either it reads or it is
  // one TraceError naming the file; nothing else escapes.
  const std::string text =
      trace(cpu("cuda_runtime", "cudaLaunchKernel", 0, 2, 1) + "," + gpu("kernel", "k", 7, 2, 5, 1) + "," +
                nccl_kernel(40, 10, 2, "allreduce", 4, 4) + "," + sync_event("Stream Sync", 1, 7),
            R"({"rank": 0, "world_size": 2, "pg_config": [{"pg_name": "0", "pg_size": 2, "ranks": [0, 1]}]})",
            R"("baseTimeNanoseconds": 1000,)");
  ASSERT_EQ(parse_one(text).timeline.events.size(), 3u);
  auto check = [](const std::string& t) {
    try {
      parse_kineto({{"t.json", t}});
    } catch (const TraceError& e) {
      EXPECT_THAT(std::string(e.what()), HasSubstr("t.json")) << t;
    }
  };
  for (size_t n = 0; n < text.size(); ++n) check(text.substr(0, n));
  std::mt19937 rng(7);
  const std::string junk = "{}[]\":,0-.e9x \\\xff";
  for (int i = 0; i < 2000; ++i) {
    std::string t = text;
    for (int k = 0; k < 3; ++k) t[rng() % t.size()] = junk[rng() % junk.size()];
    check(t);
  }
}

// --- the recorded traces of ../shared/data/kineto ---

fs::path data_dir() { return fs::path(RINGMASTER_SOURCE_DIR) / ".." / "shared" / "data" / "kineto"; }

#define REQUIRE_DATA(file)                                                                                      \
  if (!fs::exists(data_dir() / file))                                                                           \
  GTEST_SKIP() << "recorded Kineto traces not found in " << data_dir().string() << " (" << file << " missing)"

std::map<std::string, int64_t> categories(const KinetoImport& k) {
  std::map<std::string, int64_t> out;
  for (const Event& e : k.timeline.events) ++out[e.category];
  return out;
}
std::map<EdgeKind, int64_t> edge_kinds(const KinetoImport& k) {
  std::map<EdgeKind, int64_t> out;
  for (const Edge& e : k.timeline.edges) ++out[e.kind];
  return out;
}

TEST(KinetoRecorded, NcclParserConfig) {
  REQUIRE_DATA("nccl_parser_config__nccl_data.json.gz");
  const KinetoImport k = read_kineto({(data_dir() / "nccl_parser_config__nccl_data.json.gz").string()});
  EXPECT_EQ(categories(k), (std::map<std::string, int64_t>{{"cpu_op", 14346}, {"cuda_runtime", 8740},
                                                           {"gpu_memcpy", 960}, {"gpu_memset", 114},
                                                           {"kernel", 2700}, {"user_annotation", 42}}));
  ASSERT_EQ(k.ranks.size(), 1u);
  EXPECT_EQ(k.ranks[0].world_size, 2);
  EXPECT_EQ(k.ranks[0].backend, "nccl");
  ASSERT_EQ(k.steps.size(), 3u);
  EXPECT_EQ(k.steps[0].name, "ProfilerStep#4");
  EXPECT_NEAR(k.steps[0].end_s - k.steps[0].start_s, 222442.191e-6, 1e-12);
  ASSERT_EQ(k.collectives.size(), 21u);
  int allreduce = 0;
  for (const auto& [op, c] : k.collectives) {
    EXPECT_FALSE(c.inferred);
    EXPECT_EQ(c.process_group, "0");
    EXPECT_EQ(c.group_ranks, (std::vector<int>{0, 1}));
    EXPECT_GT(c.bytes, 0);
    allreduce += c.kind == "allreduce";
  }
  EXPECT_EQ(allreduce, 15);
  // Every GPU event has its launch; the streams are 7 and 40.
  EXPECT_EQ(edge_kinds(k).at(EdgeKind::launch), 2700 + 960 + 114);
  EXPECT_EQ(edge_kinds(k).at(EdgeKind::stream), 2700 + 960 + 114 - 2);
  EXPECT_EQ(k.gpu_streams, (std::set<StreamKey>{{0, 7}, {0, 40}}));
  EXPECT_EQ(k.timeline.stream_name(0, 40), "stream 40");
  EXPECT_EQ(k.skipped.at("ph X cat gpu_user_annotation"), 30);
  // Our Chrome-trace format holds the import, edges of every kind included.
  EXPECT_TRUE(approx_equal(from_chrome_json(to_chrome_json(k.timeline), "back.json"), k.timeline));
}

TEST(KinetoRecorded, EventSyncTraces) {
  REQUIRE_DATA("critical_path__cuda_event_sync__event_sync_trace.json.gz");
  const KinetoImport k = read_kineto({(data_dir() / "critical_path__cuda_event_sync__event_sync_trace.json.gz").string()});
  // Stream Sync after the DtoH copy, two Event Syncs and a Context Sync on the spin kernel
  // (hand-checked against the file's cuda_sync events).
  std::vector<std::pair<std::string, std::string>> sync;
  for (const Edge& e : edges_of(k, EdgeKind::sync))
    sync.push_back({k.timeline.events[size_t(e.from)].name.substr(0, 20), k.timeline.events[size_t(e.to)].name});
  EXPECT_EQ(sync, (std::vector<std::pair<std::string, std::string>>{
                      {"Memcpy DtoH (Device ", "cudaStreamSynchronize"},
                      {"at::cuda::(anonymous", "cudaEventSynchronize"},
                      {"at::cuda::(anonymous", "cudaEventQuery"},
                      {"at::cuda::(anonymous", "cudaDeviceSynchronize"}}));
  REQUIRE_DATA("critical_path__cuda_event_sync_multi_stream__event_sync_trace.json.gz");
  const KinetoImport m =
      read_kineto({(data_dir() / "critical_path__cuda_event_sync_multi_stream__event_sync_trace.json.gz").string()});
  // One cross-stream wait (stream 20's gemm -> stream 24's memset), two event queries, and a
  // context sync on the last op of each of the three streams.
  std::vector<std::pair<int, std::string>> msync;
  for (const Edge& e : edges_of(m, EdgeKind::sync))
    msync.push_back({m.timeline.events[size_t(e.from)].stream, m.timeline.events[size_t(e.to)].name});
  EXPECT_EQ(msync, (std::vector<std::pair<int, std::string>>{{20, "cudaEventQuery"},
                                                              {20, "Memset (Device)"},
                                                              {28, "cudaEventQuery"},
                                                              {20, "cudaDeviceSynchronize"},
                                                              {24, "cudaDeviceSynchronize"},
                                                              {28, "cudaDeviceSynchronize"}}));
}

TEST(KinetoRecorded, TwoRanksOfTheSampledJob) {
  REQUIRE_DATA("trace_filter__sampled_rank-0.json.gz");
  REQUIRE_DATA("trace_filter__sampled_rank-1.json.gz");
  const KinetoImport k = read_kineto({(data_dir() / "trace_filter__sampled_rank-1.json.gz").string(),
                                      (data_dir() / "trace_filter__sampled_rank-0.json.gz").string()});
  ASSERT_EQ(k.ranks.size(), 2u);
  EXPECT_EQ(k.ranks[0].rank, 0);
  EXPECT_EQ(k.ranks[1].world_size, 128);
  EXPECT_EQ(k.steps.size(), 4u);
  EXPECT_EQ(k.collectives.size(), 20u);
  for (const auto& [op, c] : k.collectives) {
    EXPECT_TRUE(c.inferred);
    EXPECT_EQ(c.kind, "sendrecv");
  }
  const auto kinds = edge_kinds(k);
  // 10 SendRecv kernels on each rank, 8 on stream 84 and 2 on stream 203, matched by
  // stream and order: both of stream 203 overlap their partner (within 0.3 ms of each
  // other's end), only 2 of stream 84 do: this sampled 128-rank job's point-to-point
  // kernels mostly pair with ranks that were not recorded.
  EXPECT_EQ(kinds.at(EdgeKind::collective), 4);
  EXPECT_EQ(k.skipped.at("collective call guessed from kernel names whose kernels do not overlap"), 6);
  EXPECT_EQ(kinds.at(EdgeKind::launch), (1154 + 40 + 10) + (1104 + 40 + 10));
  EXPECT_EQ(kinds.count(EdgeKind::sync), 0u);
  // Both files' events on one clock: rank 1's first step starts 0.192 ms after rank 0's.
  EXPECT_NEAR(k.steps[2].start_s - k.steps[0].start_s, (1682725898079484 - 1682725898079292) * 1e-6, 1e-12);
}

TEST(KinetoRecorded, DdpRankWithoutCollectiveMetadata) {
  REQUIRE_DATA("df_index_resolver__df_index_resolver.json.gz");
  const KinetoImport k = read_kineto({(data_dir() / "df_index_resolver__df_index_resolver.json.gz").string()});
  EXPECT_EQ(categories(k), (std::map<std::string, int64_t>{{"cpu_op", 56680}, {"cuda_runtime", 42373},
                                                           {"gpu_memcpy", 2040}, {"gpu_memset", 880},
                                                           {"kernel", 19370}, {"user_annotation", 2035}}));
  ASSERT_EQ(k.ranks.size(), 1u);
  EXPECT_EQ(k.ranks[0].rank, 1);
  EXPECT_EQ(k.ranks[0].trace_events, 216092);  // every entry, kept or not
  EXPECT_EQ(k.steps.size(), 5u);
  EXPECT_EQ(k.collectives.size(), 2020u);
  std::set<int64_t> seqs;
  for (const auto& [op, c] : k.collectives) {
    ASSERT_TRUE(c.inferred);
    ASSERT_EQ(c.kind, "allreduce");
    seqs.insert(c.seq);
  }
  EXPECT_EQ(seqs.size(), 2020u);  // 0..2019 on the NCCL stream
  EXPECT_EQ(*seqs.rbegin(), 2019);
  const auto kinds = edge_kinds(k);
  EXPECT_EQ(kinds.at(EdgeKind::launch), 19370 + 2040 + 880);
  EXPECT_EQ(kinds.at(EdgeKind::stream), 19370 + 2040 + 880 - 2);
  EXPECT_EQ(kinds.count(EdgeKind::collective), 0u);  // one rank: nothing to match
  // No cuda_sync events: cudaDeviceSynchronize (once, on both streams) and the
  // record/wait pattern of DDP's 6,060 cudaStreamWaitEvent calls.
  EXPECT_GT(kinds.at(EdgeKind::sync), 2020);
  EXPECT_EQ(k.skipped.at("ph i cat cpu_instant_event"), 28010);
}

TEST(KinetoRecorded, SingleGpuTraces) {
  const std::map<std::string, std::map<std::string, int64_t>> expected{
      {"critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
       {{"cpu_op", 359}, {"cuda_runtime", 361}, {"gpu_memcpy", 16}, {"gpu_memset", 3}, {"kernel", 79},
        {"user_annotation", 8}}},
      {"param__resnet_kineto.json.gz",
       {{"cpu_op", 39416}, {"cuda_runtime", 25928}, {"gpu_memcpy", 123}, {"gpu_memset", 362}, {"kernel", 9628},
        {"user_annotation", 90}}},
  };
  for (const auto& [file, cats] : expected) {
    if (!fs::exists(data_dir() / file)) GTEST_SKIP() << "recorded Kineto traces not found in " << data_dir().string();
    const KinetoImport k = read_kineto({(data_dir() / file).string()});
    EXPECT_EQ(categories(k), cats) << file;
    EXPECT_TRUE(k.steps.empty()) << file;
    EXPECT_TRUE(k.collectives.empty()) << file;
    int64_t gpu_events = 0;
    for (const auto& [cat, n] : cats) gpu_events += cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset" ? n : 0;
    EXPECT_EQ(edge_kinds(k).at(EdgeKind::launch), gpu_events) << file;
    EXPECT_GT(edge_kinds(k).at(EdgeKind::sync), 0) << file;
  }
}

}  // namespace
}  // namespace rm::traces
