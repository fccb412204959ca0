#include "sim/schedule/builder.hpp"

#include <algorithm>
#include <bit>
#include <stdexcept>

#include <fmt/format.h>

#include "sim/schedule/validate.hpp"

namespace rm::schedule {

namespace {
[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("ScheduleBuilder: " + what); }

// Op holds layers in 16 bits and tags in 32 (schedule.hpp).
void check_narrow(const Where& w, int64_t tag) {
  if (w.layer < -1 || w.layer > kMaxLayer) bad(fmt::format("layer {} outside [-1, {}]", w.layer, kMaxLayer));
  if (tag < kMinTag || tag > kMaxTag) bad(fmt::format("tag {} outside [{}, {}]", tag, kMinTag, kMaxTag));
}
// A stream id as Op holds it: one no rank can have is refused, never wrapped onto another.
int16_t narrow_stream(int stream) {
  if (stream < 0 || stream >= kMaxStreams) bad(fmt::format("no stream {} (a rank has at most {})", stream, kMaxStreams));
  return static_cast<int16_t>(stream);
}
}  // namespace

ScheduleBuilder::ScheduleBuilder(nlohmann::json experiment, std::string generator) {
  s_.experiment = std::move(experiment);
  s_.generator = std::move(generator);
}

int ScheduleBuilder::add_rank(int gpu) {
  int id = static_cast<int>(s_.ranks.size());
  s_.ranks.push_back(Rank{id, gpu, {}});
  return id;
}

int ScheduleBuilder::add_stream(int rank, StreamKind kind, std::string name) {
  if (rank < 0 || rank >= static_cast<int>(s_.ranks.size())) bad(fmt::format("add_stream: no rank {}", rank));
  auto& streams = s_.ranks[static_cast<size_t>(rank)].streams;
  if (name.empty()) name = std::string(to_string(kind));
  for (const auto& st : streams)
    if (st.name == name) bad(fmt::format("add_stream: rank {} already has a stream '{}'", rank, name));
  if (static_cast<int64_t>(streams.size()) >= kMaxStreams) bad(fmt::format("add_stream: rank {} has {} streams already", rank, kMaxStreams));
  int id = static_cast<int>(streams.size());
  streams.push_back(Stream{id, kind, std::move(name)});
  return id;
}

int ScheduleBuilder::stream(int rank, StreamKind kind) const {
  if (rank < 0 || rank >= static_cast<int>(s_.ranks.size())) bad(fmt::format("stream: no rank {}", rank));
  for (const auto& st : s_.ranks[static_cast<size_t>(rank)].streams)
    if (st.kind == kind) return st.id;
  bad(fmt::format("stream: rank {} has no {} stream", rank, to_string(kind)));
}

int ScheduleBuilder::add_group(std::vector<int> ranks, std::string name) {
  for (int r : ranks)
    if (r < 0 || r >= static_cast<int>(s_.ranks.size())) bad(fmt::format("add_group: no rank {}", r));
  auto sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) bad("add_group: a rank appears twice");
  int id = static_cast<int>(s_.groups.size());
  s_.groups.push_back(Group{id, std::move(ranks), std::move(name)});
  return id;
}

OpId ScheduleBuilder::add_op(Op op, const OpDesc& desc) {
  if (!s_.find_stream(op.rank, op.stream)) bad(fmt::format("add_op: no stream {} on rank {}", op.stream, op.rank));
  if (next_op_id() >= kMaxOps) bad(fmt::format("add_op: a Schedule holds at most {} ops", kMaxOps));
  op.id = static_cast<int32_t>(next_op_id());
  for (OpId d : op.deps) check_op(d);
  op.desc = intern_desc(desc);
  s_.ops.push_back(std::move(op));
  return s_.ops.back().id;
}

OpId ScheduleBuilder::compute(int rank, int stream_id, OpKind kind, Where where, ComputeCost cost,
                              DepList deps) {
  if (!is_compute(kind)) bad(fmt::format("compute: {} is not a compute kind", to_string(kind)));
  check_narrow(where, 0);
  Op op;
  op.rank = rank;
  op.stream = narrow_stream(stream_id);
  op.kind = kind;
  op.phase = where.phase;
  op.layer = where.layer;
  op.step = where.step;
  op.deps = std::move(deps);
  return add_op(std::move(op), OpDesc{cost.flops, cost.blocks, cost.tokens, cost.bytes});
}

void ScheduleBuilder::check_op(OpId op) const {
  if (op < 0 || op >= next_op_id()) bad(fmt::format("no op {}", op));
}

Op& ScheduleBuilder::held(OpId op) {
  check_op(op);
  if (op < op_base_) bad(fmt::format("op {} was already handed out (take_ops)", op));
  return s_.ops[static_cast<size_t>(op - op_base_)];
}

OpChunk ScheduleBuilder::take_ops() {
  op_base_ = next_op_id();
  std::vector<Op> taken;
  taken.swap(s_.ops);
  // The chunk keeps the entries its ops name; the builder starts afresh, so that
  // its table holds no more than the ops it holds.
  OpChunk out = own_descs(std::move(taken), s_.descs);
  s_.descs.clear();
  desc_ids_ = TableIndex();
  // As build() does: the caller holds several chunks at once.
  if (out.ops.capacity() > out.ops.size() + out.ops.size() / 4) out.ops.shrink_to_fit();
  s_.ops.reserve(out.ops.size());  // the next chunk is usually like this one
  return out;
}

void ScheduleBuilder::add_dep(OpId op, OpId dep) {
  check_op(dep);
  held(op).deps.push_back(dep);
}

void ScheduleBuilder::add_deps(OpId op, std::span<const OpId> deps) {
  for (OpId d : deps) add_dep(op, d);
}

P2PIds ScheduleBuilder::p2p(const P2PSpec& spec) {
  if (spec.send_rank == spec.recv_rank) bad(fmt::format("p2p: rank {} sends to itself", spec.send_rank));
  check_narrow(spec.where, spec.tag);
  Op send;
  send.rank = spec.send_rank;
  send.stream = narrow_stream(spec.send_stream);
  send.kind = OpKind::send;
  send.phase = spec.where.phase;
  send.layer = spec.where.layer;
  send.step = spec.where.step;
  send.peer = spec.recv_rank;
  send.tag = spec.tag;
  Op recv = send;
  recv.rank = spec.recv_rank;
  recv.stream = narrow_stream(spec.recv_stream);
  recv.kind = OpKind::recv;
  recv.peer = spec.send_rank;
  P2PIds ids;
  const OpDesc d{0.0, 0, 0, spec.bytes};
  ids.send = add_op(std::move(send), d);
  ids.recv = add_op(std::move(recv), d);
  return ids;
}

void ScheduleBuilder::launch_together(std::span<const OpId> ops) {
  if (ops.empty()) return;
  for (OpId o : ops) held(o);
  OpId first = *std::min_element(ops.begin(), ops.end());
  const Op& f = held(first);
  for (OpId o : ops) {
    Op& op = held(o);
    if (!is_p2p(op.kind) || op.rank != f.rank || op.stream != f.stream)
      bad(fmt::format("launch_together: op {} is not a send/recv on rank {} stream {}", o, f.rank, f.stream));
    if (o != first) op.joined = true;
  }
}

std::vector<OpId> ScheduleBuilder::collective(int group, OpKind kind, int64_t bytes, Where where,
                                              StreamKind stream_kind, int64_t tag, int root) {
  return collective(
      group, kind, bytes, where, [&](int r) { return stream(r, stream_kind); },
      [](int) { return std::vector<OpId>{}; }, tag, root);
}

std::vector<OpId> ScheduleBuilder::collective(int group, OpKind kind, int64_t bytes, Where where,
                                              const std::function<int(int rank)>& stream_of,
                                              const std::function<std::vector<OpId>(int rank)>& deps_of, int64_t tag,
                                              int root) {
  if (!is_collective(kind)) bad(fmt::format("collective: {} is not a collective", to_string(kind)));
  check_narrow(where, tag);
  if (group < 0 || group >= static_cast<int>(s_.groups.size())) bad(fmt::format("collective: no group {}", group));
  const auto members = s_.groups[static_cast<size_t>(group)].ranks;
  if (kind == OpKind::broadcast && std::find(members.begin(), members.end(), root) == members.end())
    bad(fmt::format("collective: broadcast root {} is not in group {}", root, group));
  std::vector<OpId> ids;
  for (int r : members) {
    Op op;
    op.rank = r;
    op.stream = narrow_stream(stream_of(r));
    op.kind = kind;
    op.phase = where.phase;
    op.layer = where.layer;
    op.step = where.step;
    op.group = group;
    op.tag = tag;
    op.peer = kind == OpKind::broadcast ? root : -1;
    op.deps = deps_of(r);
    ids.push_back(add_op(std::move(op), OpDesc{0.0, 0, 0, bytes}));
  }
  return ids;
}

int ScheduleBuilder::add_buffer(int rank, std::string name, BufferRole role, DType dtype, std::vector<int64_t> shape,
                                Instances instances) {
  if (rank < 0 || rank >= static_cast<int>(s_.ranks.size())) bad(fmt::format("add_buffer: no rank {}", rank));
  for (int64_t d : shape)
    if (d < 1) bad(fmt::format("add_buffer: '{}' on rank {} has a dimension {} < 1", name, rank, d));
  const int id = static_cast<int>(s_.buffers.size());
  s_.buffers.push_back(Buffer{id, rank, std::move(name), role, dtype, std::move(shape), instances});
  return id;
}

void TableIndex::grow() {
  std::vector<Slot> old(std::max<size_t>(64, 2 * slots_.size()));
  old.swap(slots_);
  for (const Slot& sl : old)
    if (sl.id >= 0) {
      size_t i = sl.hash & (slots_.size() - 1);
      while (slots_[i].id >= 0) i = (i + 1) & (slots_.size() - 1);
      slots_[i] = sl;
    }
}

namespace {
// A descriptor's hash: its fields, in order, through a 64-bit mix (splitmix64's finaliser).
struct Hasher {
  uint64_t h = 0x9e3779b97f4a7c15ULL;
  Hasher& add(int64_t v) {
    uint64_t x = h ^ (static_cast<uint64_t>(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    h = x ^ (x >> 31);
    return *this;
  }
};
}  // namespace

int ScheduleBuilder::token_set(const TokenSet& t) {
  Hasher h;
  for (const TokenRun& r : t.runs) h.add(r.begin).add(r.len).add(r.stride).add(r.count);
  return token_set_ids_.intern(s_.token_sets, t, h.add(static_cast<int64_t>(t.runs.size())).h);
}

void ScheduleBuilder::set_access(OpId op, std::vector<int> reads, std::vector<int> writes) {
  check_op(op);
  for (int b : reads)
    if (b < 0 || b >= static_cast<int>(s_.buffers.size())) bad(fmt::format("set_access: op {}: no buffer {}", op, b));
  for (int b : writes)
    if (b < 0 || b >= static_cast<int>(s_.buffers.size())) bad(fmt::format("set_access: op {}: no buffer {}", op, b));
  Hasher h;
  for (int b : reads) h.add(b);
  h.add(-1);  // separates reads from writes
  for (int b : writes) h.add(b);
  Access a{std::move(reads), std::move(writes)};
  Op& o = held(op);
  redescribe(o, &OpDesc::access, access_ids_.intern(s_.accesses, std::move(a), h.h));
}

void ScheduleBuilder::set_attention(OpId op, const Attention& a) {
  Op& o = held(op);
  if (o.kind != OpKind::attn_fwd && o.kind != OpKind::attn_bwd)
    bad(fmt::format("set_attention: op {} is a {}", op, to_string(o.kind)));
  Hasher h;
  h.add(a.q_tokens).add(a.kv_tokens).add(a.head_begin).add(a.heads).add(a.kv_head_begin).add(a.kv_heads);
  h.add(int64_t(a.mask)).add(int64_t(a.index)).add(int64_t{a.merge});
  redescribe(o, &OpDesc::detail, attention_ids_.intern(s_.attentions, a, h.h));
}

void ScheduleBuilder::set_gemm(OpId op, const Gemm& g) {
  Op& o = held(op);
  if (o.kind != OpKind::gemm) bad(fmt::format("set_gemm: op {} is a {}", op, to_string(o.kind)));
  redescribe(o, &OpDesc::detail, gemm_ids_.intern(s_.gemms, g, Hasher{}.add(g.m).add(g.n).add(g.k).h));
}

void ScheduleBuilder::drop_buffers() {
  if (!s_.accesses.empty()) bad("drop_buffers: ops name buffers (set_access was called)");
  s_.buffers.clear();
}

int32_t intern_desc(std::vector<OpDesc>& table, TableIndex& index, const OpDesc& d) {
  if (d == kNoDesc) return -1;
  Hasher h;
  h.add(std::bit_cast<int64_t>(d.flops)).add(d.blocks).add(d.tokens).add(d.bytes).add(d.access).add(d.detail);
  return index.intern(table, d, h.h);
}

int32_t ScheduleBuilder::intern_desc(const OpDesc& d) { return schedule::intern_desc(s_.descs, desc_ids_, d); }

void ScheduleBuilder::redescribe(Op& o, int32_t OpDesc::*field, int32_t id) {
  OpDesc d = s_.desc(o);
  d.*field = id;
  o.desc = intern_desc(d);  // the entry it replaces stays until build() or take_ops() drops it
}

OpChunk own_descs(std::vector<Op> ops, std::span<const OpDesc> from) {
  OpChunk c;
  std::vector<int32_t> to(from.size(), -1);
  for (Op& op : ops) {
    if (op.desc < 0) continue;
    int32_t& t = to.at(static_cast<size_t>(op.desc));
    if (t < 0) {
      t = static_cast<int32_t>(c.descs.size());
      c.descs.push_back(from[static_cast<size_t>(op.desc)]);
    }
    op.desc = t;
  }
  c.ops = std::move(ops);
  return c;
}

Schedule ScheduleBuilder::build() && {
  if (op_base_ > 0) bad("build: ops were handed out by take_ops; the Schedule is not whole");
  // set_access and set_attention leave the entries they replaced behind: keep the used ones.
  OpChunk c = own_descs(std::move(s_.ops), s_.descs);
  s_.ops = std::move(c.ops);
  s_.descs = std::move(c.descs);
  validate(s_);
  // Growth by doubling leaves up to half the op array unused, and the engines
  // allocate their own per-op state next to it: give the slack back (a move of
  // the ops, no reallocation of their dependencies).
  if (s_.ops.capacity() > s_.ops.size() + s_.ops.size() / 4) s_.ops.shrink_to_fit();
  return std::move(s_);
}

}  // namespace rm::schedule
