#include "sim/schedule/schedule.hpp"

#include <array>

#include <fmt/format.h>

namespace rm::schedule {

namespace {
constexpr std::array<std::string_view, kOpKindCount> kOpKindNames = {
    "attn_fwd", "attn_bwd",   "gemm",       "elementwise",    "index_build", "send",
    "recv",     "all_reduce", "all_gather", "reduce_scatter", "all_to_all",  "broadcast"};
constexpr std::array<std::string_view, kPhaseCount> kPhaseNames = {"forward", "backward", "recompute", "optimizer"};
constexpr std::array<std::string_view, kStreamKindCount> kStreamKindNames = {"compute", "comm_intra", "comm_inter"};

template <class E, size_t N>
std::optional<E> parse_name(const std::array<std::string_view, N>& names, std::string_view s) {
  for (size_t i = 0; i < N; ++i)
    if (names[i] == s) return static_cast<E>(i);
  return std::nullopt;
}
}  // namespace

std::string_view to_string(OpKind k) { return kOpKindNames.at(static_cast<size_t>(k)); }
std::string_view to_string(Phase p) { return kPhaseNames.at(static_cast<size_t>(p)); }
std::string_view to_string(StreamKind k) { return kStreamKindNames.at(static_cast<size_t>(k)); }
std::optional<OpKind> parse_op_kind(std::string_view s) { return parse_name<OpKind>(kOpKindNames, s); }
std::optional<Phase> parse_phase(std::string_view s) { return parse_name<Phase>(kPhaseNames, s); }
std::optional<StreamKind> parse_stream_kind(std::string_view s) { return parse_name<StreamKind>(kStreamKindNames, s); }

bool is_compute(OpKind k) { return k <= OpKind::index_build; }
bool is_p2p(OpKind k) { return k == OpKind::send || k == OpKind::recv; }
bool is_collective(OpKind k) { return k >= OpKind::all_reduce; }

const Stream* Schedule::find_stream(int rank, int stream) const {
  if (rank < 0 || rank >= static_cast<int>(ranks.size())) return nullptr;
  const auto& st = ranks[static_cast<size_t>(rank)].streams;
  if (stream < 0 || stream >= static_cast<int>(st.size())) return nullptr;
  return &st[static_cast<size_t>(stream)];
}

std::string describe(const Schedule& s, OpId id) {
  if (id < 0 || id >= static_cast<OpId>(s.ops.size())) return fmt::format("op {}", id);
  const Op& op = s.ops[static_cast<size_t>(id)];
  const Stream* st = s.find_stream(op.rank, op.stream);
  std::string out = st ? fmt::format("op {} (rank {} stream '{}', {} {}", op.id, op.rank, st->name, to_string(op.kind),
                                     to_string(op.phase))
                       : fmt::format("op {} (rank {} stream {}, {} {}", op.id, op.rank, op.stream, to_string(op.kind),
                                     to_string(op.phase));
  if (op.layer >= 0) out += fmt::format(" layer {}", op.layer);
  if (op.step >= 0) out += fmt::format(" step {}", op.step);
  return out + ")";
}

}  // namespace rm::schedule
