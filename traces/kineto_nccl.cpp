// What an NCCL kernel of a Kineto trace is: its collective kind (from
// PyTorch's "Collective name", or implied by the kernel's name in traces that
// record no metadata) and its size in bytes as our Schedules count them.
#include <algorithm>
#include <array>
#include <cctype>
#include <limits>
#include <utility>

#include "traces/kineto.hpp"

namespace rm::traces {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return out;
}

}  // namespace

std::string nccl_kind_from_kernel_name(std::string_view kernel) {
  if (kernel.size() < 4 || lower(kernel.substr(0, 4)) != "nccl") return "";
  std::string_view s = kernel.substr(4);
  for (std::string_view prefix : {"Kernel_", "DevKernel_", "_"})
    if (s.substr(0, prefix.size()) == prefix) {
      s.remove_prefix(prefix.size());
      break;
    }
  // Longest names first: "ReduceScatter" before "Reduce", "SendRecv" before "Send".
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 9> kNames{{
      {"AllReduce", "allreduce"},
      {"AllGather", "allgather"},
      {"ReduceScatter", "reduce_scatter"},
      {"AllToAll", "alltoall"},
      {"Broadcast", "broadcast"},
      {"SendRecv", "sendrecv"},
      {"Reduce", "reduce"},
      {"Send", "send"},
      {"Recv", "recv"},
  }};
  for (const auto& [name, kind] : kNames)
    if (s.substr(0, name.size()) == name) return std::string(kind);
  return "unknown";
}

std::string nccl_kind_from_collective_name(std::string_view name) {
  std::string n = lower(name);
  while (!n.empty() && n.front() == '_') n.erase(n.begin());
  // PyTorch's spellings across versions (ProcessGroupNCCL's record_param_comms).
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 22> kNames{{
      {"allreduce", "allreduce"},
      {"allreduce_coalesced", "allreduce"},
      {"all_reduce", "allreduce"},
      {"barrier", "allreduce"},  // NCCL runs a barrier as a one-element allreduce
      {"allgather", "allgather"},
      {"all_gather", "allgather"},
      {"allgather_base", "allgather"},
      {"allgather_coalesced", "allgather"},
      {"allgather_into_tensor_coalesced", "allgather"},
      {"all_gather_into_tensor", "allgather"},
      {"reduce_scatter", "reduce_scatter"},
      {"reduce_scatter_base", "reduce_scatter"},
      {"reduce_scatter_tensor_coalesced", "reduce_scatter"},
      {"all_to_all", "alltoall"},
      {"all_to_allv", "alltoall"},
      {"alltoall", "alltoall"},
      {"alltoall_base", "alltoall"},
      {"broadcast", "broadcast"},
      {"broadcast_oop", "broadcast"},
      {"reduce", "reduce"},
      {"send", "send"},
      {"recv", "recv"},
  }};
  for (const auto& [pytorch, kind] : kNames)
    if (n == pytorch) return std::string(kind);
  if (n == "recvanysource" || n == "recv_any_source") return "recv";
  if (n == "sendrecv") return "sendrecv";
  return "unknown";
}

int dtype_bytes(std::string_view dtype) {
  const std::string d = lower(dtype);
  static constexpr std::array<std::pair<std::string_view, int>, 22> kSizes{{
      {"float", 4},        {"float32", 4},      {"double", 8},       {"float64", 8},     {"half", 2},
      {"float16", 2},      {"bfloat16", 2},     {"int", 4},          {"int32", 4},       {"long", 8},
      {"int64", 8},        {"short", 2},        {"int16", 2},        {"char", 1},        {"int8", 1},
      {"byte", 1},         {"uint8", 1},        {"bool", 1},         {"unsigned char", 1},
      {"complexfloat", 8}, {"complexdouble", 16}, {"complexhalf", 4},
  }};
  for (const auto& [name, size] : kSizes)
    if (d == name) return size;
  if (d.rfind("float8", 0) == 0) return 1;  // Float8_e4m3fn, Float8_e5m2, ...
  return 0;
}

int64_t collective_bytes(const KinetoCollective& c) {
  const int64_t size = dtype_bytes(c.dtype);
  if (size == 0) return 0;
  int64_t nelems = -1;
  if (c.kind == "allgather") {  // the gathered output
    nelems = c.out_nelems;
    if (nelems < 0 && c.in_nelems >= 0 && c.group_size > 0) nelems = c.in_nelems * c.group_size;
  } else if (c.kind == "recv") {
    nelems = c.out_nelems >= 0 ? c.out_nelems : c.in_nelems;
  } else if (c.kind == "sendrecv") {
    nelems = std::max(c.in_nelems, c.out_nelems);
  } else {  // allreduce, broadcast, reduce: the buffer; reduce_scatter: the input; alltoall: all sent; send
    nelems = c.in_nelems;
  }
  if (nelems < 0 || nelems > std::numeric_limits<int64_t>::max() / size) return 0;
  return nelems * size;
}

}  // namespace rm::traces
