#include "sim/schedule/schedule.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>

namespace rm::schedule {

namespace {

// One table per enum, in enum order: to_string indexes it, parse searches it.
template <class E>
struct Named {
  E value;
  std::string_view name;
};

constexpr std::array<Named<OpKind>, kOpKindCount> kOpKinds{{{OpKind::attn_fwd, "attn_fwd"},
                                                           {OpKind::attn_bwd, "attn_bwd"},
                                                           {OpKind::gemm, "gemm"},
                                                           {OpKind::elementwise, "elementwise"},
                                                           {OpKind::index_build, "index_build"},
                                                           {OpKind::send, "send"},
                                                           {OpKind::recv, "recv"},
                                                           {OpKind::all_reduce, "all_reduce"},
                                                           {OpKind::all_gather, "all_gather"},
                                                           {OpKind::reduce_scatter, "reduce_scatter"},
                                                           {OpKind::all_to_all, "all_to_all"},
                                                           {OpKind::broadcast, "broadcast"}}};
constexpr std::array<Named<Phase>, kPhaseCount> kPhases{{{Phase::forward, "forward"},
                                                        {Phase::backward, "backward"},
                                                        {Phase::recompute, "recompute"},
                                                        {Phase::optimizer, "optimizer"}}};
constexpr std::array<Named<StreamKind>, kStreamKindCount> kStreamKinds{
    {{StreamKind::compute, "compute"}, {StreamKind::comm_intra, "comm_intra"}, {StreamKind::comm_inter, "comm_inter"}}};
constexpr std::array<Named<DType>, kDTypeCount> kDTypes{
    {{DType::bf16, "bf16"}, {DType::fp32, "fp32"}, {DType::int32, "int32"}}};
constexpr std::array<Named<Instances>, kInstancesCount> kInstancesNames{
    {{Instances::one, "one"}, {Instances::per_layer, "per_layer"}, {Instances::per_pass, "per_pass"}}};
constexpr std::array<Named<BufferRole>, kBufferRoleCount> kBufferRoles{{{BufferRole::q, "q"},
                                                                       {BufferRole::kv, "kv"},
                                                                       {BufferRole::o, "o"},
                                                                       {BufferRole::lse, "lse"},
                                                                       {BufferRole::d_o, "do"},
                                                                       {BufferRole::dq, "dq"},
                                                                       {BufferRole::dkv, "dkv"},
                                                                       {BufferRole::kv_slot, "kv_slot"},
                                                                       {BufferRole::dkv_slot, "dkv_slot"},
                                                                       {BufferRole::exchange, "exchange"},
                                                                       {BufferRole::index, "index"},
                                                                       {BufferRole::index_work, "index_work"},
                                                                       {BufferRole::activation, "activation"},
                                                                       {BufferRole::weight, "weight"},
                                                                       {BufferRole::gradient, "gradient"}}};
constexpr std::array<Named<Mask>, kMaskCount> kMasks{
    {{Mask::full, "full"}, {Mask::causal, "causal"}, {Mask::empty, "empty"}}};
constexpr std::array<Named<IndexSource>, kIndexSourceCount> kIndexSources{
    {{IndexSource::none, "none"}, {IndexSource::pattern, "pattern"}, {IndexSource::built, "built"}}};

template <class E, size_t N>
constexpr bool in_enum_order(const std::array<Named<E>, N>& t) {
  for (size_t i = 0; i < N; ++i)
    if (static_cast<size_t>(t[i].value) != i) return false;
  return true;
}
static_assert(in_enum_order(kOpKinds) && in_enum_order(kPhases) && in_enum_order(kStreamKinds) &&
              in_enum_order(kDTypes) && in_enum_order(kInstancesNames) && in_enum_order(kBufferRoles) && in_enum_order(kMasks) &&
              in_enum_order(kIndexSources));

template <class E, size_t N>
std::string_view name_of(const std::array<Named<E>, N>& t, E e) {
  return t.at(static_cast<size_t>(e)).name;
}
template <class E, size_t N>
std::optional<E> parse_name(const std::array<Named<E>, N>& t, std::string_view s) {
  for (const auto& n : t)
    if (n.name == s) return n.value;
  return std::nullopt;
}
}  // namespace

std::string_view to_string(OpKind k) { return name_of(kOpKinds, k); }
std::string_view to_string(Phase p) { return name_of(kPhases, p); }
std::string_view to_string(StreamKind k) { return name_of(kStreamKinds, k); }
std::string_view to_string(DType t) { return name_of(kDTypes, t); }
std::string_view to_string(Instances i) { return name_of(kInstancesNames, i); }
std::string_view to_string(BufferRole r) { return name_of(kBufferRoles, r); }
std::string_view to_string(Mask m) { return name_of(kMasks, m); }
std::string_view to_string(IndexSource i) { return name_of(kIndexSources, i); }
std::optional<OpKind> parse_op_kind(std::string_view s) { return parse_name(kOpKinds, s); }
std::optional<Phase> parse_phase(std::string_view s) { return parse_name(kPhases, s); }
std::optional<StreamKind> parse_stream_kind(std::string_view s) { return parse_name(kStreamKinds, s); }
std::optional<DType> parse_dtype(std::string_view s) { return parse_name(kDTypes, s); }
std::optional<Instances> parse_instances(std::string_view s) { return parse_name(kInstancesNames, s); }
std::optional<BufferRole> parse_buffer_role(std::string_view s) { return parse_name(kBufferRoles, s); }
std::optional<Mask> parse_mask(std::string_view s) { return parse_name(kMasks, s); }
std::optional<IndexSource> parse_index_source(std::string_view s) { return parse_name(kIndexSources, s); }

int64_t dtype_bytes(DType t) { return t == DType::bf16 ? 2 : 4; }

int64_t Buffer::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t TokenSet::size() const {
  int64_t n = 0;
  for (const auto& r : runs) n += r.len * r.count;
  return n;
}

int64_t TokenSet::end() const {
  int64_t e = 0;
  for (const auto& r : runs)
    if (r.len > 0 && r.count > 0) e = std::max(e, r.begin + (r.count - 1) * r.stride + r.len);
  return e;
}

bool is_compute(OpKind k) { return k <= OpKind::index_build; }
bool is_p2p(OpKind k) { return k == OpKind::send || k == OpKind::recv; }
bool is_collective(OpKind k) { return k >= OpKind::all_reduce; }

const Stream* Schedule::find_stream(int rank, int stream) const {
  if (rank < 0 || rank >= static_cast<int>(ranks.size())) return nullptr;
  const auto& st = ranks[static_cast<size_t>(rank)].streams;
  if (stream < 0 || stream >= static_cast<int>(st.size())) return nullptr;
  return &st[static_cast<size_t>(stream)];
}

const Access* Schedule::access_of(const OpDesc& d) const {
  return d.access >= 0 && size_t(d.access) < accesses.size() ? &accesses[size_t(d.access)] : nullptr;
}
const Attention* Schedule::attention_of(OpKind kind, const OpDesc& d) const {
  const bool attn = kind == OpKind::attn_fwd || kind == OpKind::attn_bwd;
  return attn && d.detail >= 0 && size_t(d.detail) < attentions.size() ? &attentions[size_t(d.detail)] : nullptr;
}
const Gemm* Schedule::gemm_of(OpKind kind, const OpDesc& d) const {
  return kind == OpKind::gemm && d.detail >= 0 && size_t(d.detail) < gemms.size() ? &gemms[size_t(d.detail)] : nullptr;
}

bool Schedule::operator==(const Schedule& o) const {
  if (experiment != o.experiment || generator != o.generator || ranks != o.ranks || groups != o.groups ||
      buffers != o.buffers || token_sets != o.token_sets || accesses != o.accesses || attentions != o.attentions ||
      gemms != o.gemms || symmetry != o.symmetry || ops.size() != o.ops.size())
    return false;
  for (size_t i = 0; i < ops.size(); ++i) {
    Op a = ops[i], b = o.ops[i];
    if (desc(a) != o.desc(b)) return false;
    a.desc = b.desc = -1;
    if (a != b) return false;
  }
  return true;
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
