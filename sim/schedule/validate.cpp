#include "sim/schedule/validate.hpp"

#include <algorithm>
#include <initializer_list>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "sim/config/json_reader.hpp"
#include "sim/schedule/comm_matching.hpp"
#include "sim/schedule/deadlock.hpp"
#include "sim/schedule/schedule_error.hpp"
#include "sim/schedule/schedule_read_parts.hpp"
#include "sim/schedule/topo_order.hpp"

namespace rm::schedule {

namespace {

class Checker {
 public:
  explicit Checker(const Schedule& s)
      : s_(s), batch_(known(s.experiment, {"workload", "batch"})), head_dim_(known(s.experiment, {"model", "head_dim"})) {}

  std::vector<Problem> run() {
    check_ranks_and_groups();
    check_tables();
    check_ops();
    if (!out_.empty()) return out_;  // matching needs sound ids, ranks and groups
    CommMatching m = match_comms(s_);
    check_p2p(m);
    check_collectives(m);
    if (!out_.empty()) return out_;
    // The zero-time run first: when it runs every op there is no cycle (an op
    // posts only after its dependencies and its stream's previous run ended,
    // and is posted with the ops joined to it, so along a cycle post times
    // would strictly decrease), and the cycle search is skipped.
    auto dl = find_deadlocks(s_, std::move(m));  // the last use of m
    if (dl.empty()) return out_;
    if (auto cycle = find_cycle(s_)) {
      std::string chain;
      for (size_t i = 0; i < std::min<size_t>(cycle->size(), 8); ++i) chain += fmt::format("{} -> ", (*cycle)[i]);
      chain += cycle->size() > 8 ? "... -> " : "";
      add(ProblemKind::cycle, cycle->front(),
          fmt::format("is on a dependency cycle ({}{}; a -> b: a needs b, by dependency or stream order)", chain,
                      cycle->front()));
      return out_;
    }
    out_.insert(out_.end(), dl.begin(), dl.end());
    return out_;
  }

 private:
  void add(ProblemKind k, OpId op, const std::string& what) {
    out_.push_back({k, op, fmt::format("{}: {}", describe(s_, op), what)});
  }
  void add_plain(ProblemKind k, const std::string& what) { out_.push_back({k, -1, what}); }

  bool rank_ok(int r) const { return r >= 0 && r < static_cast<int>(s_.ranks.size()); }
  bool group_ok(int g) const { return g >= 0 && g < static_cast<int>(s_.groups.size()); }
  bool in_group(int g, int r) const {
    const auto& m = s_.groups[static_cast<size_t>(g)].ranks;
    return std::find(m.begin(), m.end(), r) != m.end();
  }

  void check_ranks_and_groups() {
    for (size_t i = 0; i < s_.ranks.size(); ++i) {
      const Rank& r = s_.ranks[i];
      if (r.id != static_cast<int>(i)) add_plain(ProblemKind::bad_id, fmt::format("rank at position {} has id {}", i, r.id));
      std::set<std::string> names;
      for (size_t k = 0; k < r.streams.size(); ++k) {
        if (r.streams[k].id != static_cast<int>(k))
          add_plain(ProblemKind::bad_id, fmt::format("rank {}: stream at position {} has id {}", i, k, r.streams[k].id));
        if (!names.insert(r.streams[k].name).second)
          add_plain(ProblemKind::bad_stream, fmt::format("rank {}: two streams named '{}'", i, r.streams[k].name));
      }
    }
    for (size_t g = 0; g < s_.groups.size(); ++g) {
      const Group& grp = s_.groups[g];
      if (grp.id != static_cast<int>(g)) add_plain(ProblemKind::bad_id, fmt::format("group at position {} has id {}", g, grp.id));
      if (grp.ranks.empty()) add_plain(ProblemKind::bad_group, fmt::format("group {} has no members", g));
      std::set<int> seen;
      for (int r : grp.ranks) {
        if (!rank_ok(r)) add_plain(ProblemKind::bad_rank, fmt::format("group {} names unknown rank {}", g, r));
        if (!seen.insert(r).second) add_plain(ProblemKind::bad_group, fmt::format("group {} lists rank {} twice", g, r));
      }
      if (grp.spans_replicas && (s_.symmetry.replicas < 2 || !std::is_sorted(grp.ranks.begin(), grp.ranks.end())))
        add_plain(ProblemKind::bad_group, fmt::format("group {} spans replicas: expected ascending members in a "
                                                      "replica-symmetric Schedule", g));
    }
    // The data-parallel shortcut's annotation (schedule.hpp): replica 0's ranks, all of them.
    const ReplicaSymmetry& sym = s_.symmetry;
    if (sym.replicas < 1 || (sym.replicas > 1 && sym.ranks_per_replica != static_cast<int>(s_.ranks.size())))
      add_plain(ProblemKind::bad_rank, fmt::format("symmetry: expected replicas >= 1 and ranks_per_replica = the "
                                                   "{} ranks, got {} and {}", s_.ranks.size(), sym.replicas,
                                                   sym.ranks_per_replica));
  }

  void check_ops() {
    std::vector<bool> seen_id(s_.ops.size(), false);
    for (size_t i = 0; i < s_.ops.size(); ++i) {
      const Op& op = s_.ops[i];
      if (op.id != static_cast<OpId>(i)) {
        bool dup = op.id >= 0 && op.id < static_cast<OpId>(s_.ops.size()) && seen_id[static_cast<size_t>(op.id)];
        add_plain(ProblemKind::bad_id, fmt::format("op {}: {} (found at position {}; ids must equal positions)", op.id,
                                                   dup ? "duplicate id" : "id out of place", i));
        continue;
      }
      seen_id[i] = true;
      if (!rank_ok(op.rank)) {
        add(ProblemKind::bad_rank, op.id, fmt::format("unknown rank {}", op.rank));
        continue;
      }
      if (!s_.find_stream(op.rank, op.stream)) add(ProblemKind::bad_stream, op.id, fmt::format("unknown stream {} on rank {}", op.stream, op.rank));
      check_fields(op);
      check_deps(op);
      check_data(op);
    }
    check_joins();
  }

  void check_fields(const Op& op) {
    if (op.layer < -1 || op.step < -1) add(ProblemKind::bad_field, op.id, "layer and step must be >= -1");
    if (op.desc < -1 || op.desc >= static_cast<int64_t>(s_.descs.size()))
      add(ProblemKind::bad_field, op.id, fmt::format("desc {} is not in the table of {}", op.desc, s_.descs.size()));
    const OpDesc& d = s_.desc(op);
    if (d.bytes < 0 || d.flops < 0 || d.blocks < 0 || d.tokens < 0)
      add(ProblemKind::bad_field, op.id, "costs must be >= 0");
    if (is_compute(op.kind)) {
      if (op.peer != -1 || op.group != -1) add(ProblemKind::bad_field, op.id, "a compute op has no peer or group");
    } else if (is_p2p(op.kind)) {
      if (!rank_ok(op.peer) || op.peer == op.rank)
        add(ProblemKind::bad_rank, op.id, fmt::format("peer {} is not another known rank", op.peer));
      if (op.group != -1) add(ProblemKind::bad_field, op.id, "a send/recv has no group");
    } else {
      if (!group_ok(op.group)) {
        add(ProblemKind::bad_group, op.id, fmt::format("unknown group {}", op.group));
      } else if (!in_group(op.group, op.rank)) {
        add(ProblemKind::bad_group, op.id, fmt::format("rank {} is not a member of group {}", op.rank, op.group));
      } else if (op.kind == OpKind::broadcast ? !in_group(op.group, op.peer) : op.peer != -1) {
        add(ProblemKind::bad_field, op.id,
            op.kind == OpKind::broadcast ? fmt::format("broadcast root {} is not in group {}", op.peer, op.group)
                                         : std::string("only a broadcast has a peer (its root)"));
      }
    }
  }

  // Sizes the experiment fixes, when the Schedule carries them (-1: unknown).
  static int64_t known(const nlohmann::json& j, std::initializer_list<const char*> path) {
    const nlohmann::json* v = &j;
    for (const char* k : path) {
      if (!v->is_object() || !v->contains(k)) return -1;
      v = &(*v)[k];
    }
    try {
      return rm::parse_size(*v, "");
    } catch (const std::exception&) {
      return -1;
    }
  }

  void check_tables() {
    const int64_t seq_len = known(s_.experiment, {"workload", "seq_len"});
    const int64_t heads = known(s_.experiment, {"model", "heads"}), kv_heads = known(s_.experiment, {"model", "kv_heads"});
    std::set<std::pair<int, std::string>> names;
    for (size_t i = 0; i < s_.buffers.size(); ++i) {
      const Buffer& b = s_.buffers[i];
      auto bad = [&](const std::string& what) {
        add_plain(ProblemKind::bad_data, fmt::format("buffer {} '{}': {}", i, b.name, what));
      };
      if (b.id != static_cast<int>(i)) bad(fmt::format("id {} (ids must equal positions)", b.id));
      if (!rank_ok(b.rank)) bad(fmt::format("unknown rank {}", b.rank));
      if (b.shape.empty() || std::any_of(b.shape.begin(), b.shape.end(), [](int64_t d) { return d < 1; }))
        bad("its shape needs at least one dimension, each >= 1");
      if (!names.insert({b.rank, b.name}).second) bad(fmt::format("a second buffer of that name on rank {}", b.rank));
    }
    for (size_t i = 0; i < s_.token_sets.size(); ++i) {
      const TokenSet& t = s_.token_sets[i];
      for (const TokenRun& r : t.runs)
        if (r.begin < 0 || r.len < 1 || r.count < 1 || (r.count > 1 && r.stride < r.len))
          add_plain(ProblemKind::bad_data, fmt::format("token set {}: run {{begin {}, len {}, stride {}, count {}}} "
                                                       "needs len >= 1, count >= 1 and stride >= len",
                                                       i, r.begin, r.len, r.stride, r.count));
      if (seq_len > 0 && t.end() > seq_len)
        add_plain(ProblemKind::bad_data,
                  fmt::format("token set {}: reaches token {}, beyond seq_len {}", i, t.end() - 1, seq_len));
    }
    for (size_t i = 0; i < s_.accesses.size(); ++i)
      for (const auto* list : {&s_.accesses[i].reads, &s_.accesses[i].writes})
        for (int b : *list)
          if (b < 0 || b >= static_cast<int>(s_.buffers.size()))
            add_plain(ProblemKind::bad_data, fmt::format("access {}: no buffer {}", i, b));
    const auto sets = static_cast<int>(s_.token_sets.size());
    for (size_t i = 0; i < s_.attentions.size(); ++i) {
      const Attention& a = s_.attentions[i];
      auto bad = [&](const std::string& what) { add_plain(ProblemKind::bad_data, fmt::format("attention {}: {}", i, what)); };
      if (a.q_tokens < 0 || a.q_tokens >= sets || a.kv_tokens < 0 || a.kv_tokens >= sets)
        bad(fmt::format("token sets {} and {}: expected ids below {}", a.q_tokens, a.kv_tokens, sets));
      if (a.head_begin < 0 || a.heads < 1 || (heads > 0 && a.head_begin + a.heads > heads))
        bad(fmt::format("query heads [{}, {}) lie outside the model's {} heads", a.head_begin, a.head_begin + a.heads,
                        heads));
      if (a.kv_head_begin < 0 || a.kv_heads < 1 || (kv_heads > 0 && a.kv_head_begin + a.kv_heads > kv_heads))
        bad(fmt::format("KV heads [{}, {}) lie outside the model's {} KV heads", a.kv_head_begin,
                        a.kv_head_begin + a.kv_heads, kv_heads));
    }
    for (size_t i = 0; i < s_.gemms.size(); ++i) {
      const Gemm& g = s_.gemms[i];
      if (g.m < 1 || g.n < 1 || g.k < 1)
        add_plain(ProblemKind::bad_data, fmt::format("gemm {}: (m, n, k) = ({}, {}, {}) must be >= 1", i, g.m, g.n, g.k));
    }
  }

  int64_t bytes_of(const std::vector<int>& ids) const {
    int64_t n = 0;
    for (int b : ids) n += s_.buffers[static_cast<size_t>(b)].bytes();
    return n;
  }

  void check_data(const Op& op) {
    const bool attn = op.kind == OpKind::attn_fwd || op.kind == OpKind::attn_bwd;
    const bool executable = !s_.buffers.empty();  // a costable-only Schedule declares none
    const OpDesc& d = s_.desc(op);
    if (d.access < -1 || d.access >= static_cast<int32_t>(s_.accesses.size())) {
      add(ProblemKind::bad_data, op.id, fmt::format("access {} is not in the table of {}", d.access, s_.accesses.size()));
      return;
    }
    const size_t details = attn ? s_.attentions.size() : op.kind == OpKind::gemm ? s_.gemms.size() : 0;
    if (d.detail < -1 || d.detail >= static_cast<int32_t>(details)) {
      add(ProblemKind::bad_data, op.id,
          details == 0 ? std::string("only attention and gemm ops have a detail")
                       : fmt::format("detail {} is not in the table of {}", d.detail, details));
      return;
    }
    if (executable && (attn || op.kind == OpKind::gemm) && d.detail < 0)
      add(ProblemKind::bad_data, op.id, attn ? "has no attention descriptor" : "has no (m, n, k)");
    const Access* a = s_.access_of(op);
    if (!a) {
      if (executable) add(ProblemKind::bad_data, op.id, is_compute(op.kind) ? "names no buffers" : "names no buffers it moves");
      return;
    }
    bool ids_ok = true;  // a bad id is reported with its access entry
    for (const auto* list : {&a->reads, &a->writes})
      for (int b : *list)
        if (b < 0 || b >= static_cast<int>(s_.buffers.size())) ids_ok = false;
        else if (s_.buffers[static_cast<size_t>(b)].rank != op.rank)
          add(ProblemKind::bad_data, op.id,
              fmt::format("uses buffer {} '{}' of rank {}", b, s_.buffers[static_cast<size_t>(b)].name,
                          s_.buffers[static_cast<size_t>(b)].rank));
    if (attn && ids_ok) check_home_shapes(op, *a);
    if (is_compute(op.kind) || !ids_ok) return;
    // Bytes of a transfer against its buffers (collectives: docs/schedule-format.md's byte convention).
    auto need = [&](const char* side, const std::vector<int>& ids, bool each) {
      const int64_t n = each ? (ids.empty() ? -1 : s_.buffers[static_cast<size_t>(ids.front())].bytes()) : bytes_of(ids);
      bool ok = !ids.empty() && n == d.bytes;
      if (each)
        for (int b : ids) ok = ok && s_.buffers[static_cast<size_t>(b)].bytes() == d.bytes;
      if (!ok)
        add(ProblemKind::bad_data, op.id,
            fmt::format("moves {} bytes, but the buffers it {} hold {}", d.bytes, side, ids.empty() ? 0 : bytes_of(ids)));
    };
    switch (op.kind) {
      case OpKind::send: need("reads", a->reads, true); break;  // several: their sum is sent
      case OpKind::recv:
        if (a->writes.size() != 1) add(ProblemKind::bad_data, op.id, "a recv writes exactly one buffer");
        else need("writes", a->writes, false);
        break;
      case OpKind::all_to_all: {  // may narrow what it reads (fp32 dK|dV leave the ring as bf16)
        need("writes", a->writes, false);
        int64_t in = 0, out = 0;
        for (int b : a->reads) in += s_.buffers[static_cast<size_t>(b)].elements();
        for (int b : a->writes) out += s_.buffers[static_cast<size_t>(b)].elements();
        if (in != out)
          add(ProblemKind::bad_data, op.id,
              fmt::format("reads {} elements but writes {}: an all-to-all moves its input whole", in, out));
        break;
      }
      case OpKind::all_reduce:
        need("reads", a->reads, false);
        need("writes", a->writes, false);
        break;
      case OpKind::all_gather:
      case OpKind::broadcast: need("writes", a->writes, false); break;
      case OpKind::reduce_scatter: need("reads", a->reads, false); break;
      default: break;
    }
    if (op.kind == OpKind::broadcast && op.peer == op.rank && a->reads.empty())
      add(ProblemKind::bad_data, op.id, "the broadcast root reads no buffer");
  }

  // The buffers an attention op reads and writes as Q, O, LSE, dO, dQ and K|V hold
  // its tokens x heads (x head_dim) per batch element: the layout the runtime gives
  // them (runtime/layouts.hpp). A shape holding another element count would be read
  // past its end or left short; its experiment's sizes are what the runtime uses.
  void check_home_shapes(const Op& op, const Access& a) {
    const Attention* at = s_.attention_of(op);
    const auto sets = static_cast<int>(s_.token_sets.size());
    if (!at || batch_ < 1 || head_dim_ < 1 || at->q_tokens < 0 || at->q_tokens >= sets || at->kv_tokens < 0 ||
        at->kv_tokens >= sets)
      return;  // a bad token set is reported with the attention table
    const int64_t q = s_.token_sets[static_cast<size_t>(at->q_tokens)].size();
    const int64_t k = s_.token_sets[static_cast<size_t>(at->kv_tokens)].size();
    // -1 beyond 2^50, which no buffer holds (the reader's bound)
    auto product = [](std::initializer_list<int64_t> f) {
      int64_t p = 1;
      for (int64_t x : f) p = p < 0 ? -1 : read_parts::product_within(p, x);
      return p;
    };
    for (const auto* list : {&a.reads, &a.writes})
      for (int b : *list) {
        const Buffer& buf = s_.buffers[static_cast<size_t>(b)];
        int64_t need = 0;
        std::string why;
        switch (buf.role) {
          case BufferRole::q: case BufferRole::o: case BufferRole::d_o: case BufferRole::dq:
            need = product({batch_, q, at->heads, head_dim_});
            why = fmt::format("batch {} x {} query tokens x {} heads x head_dim {}", batch_, q, at->heads, head_dim_);
            break;
          case BufferRole::lse:
            need = product({batch_, q, at->heads});
            why = fmt::format("batch {} x {} query tokens x {} heads", batch_, q, at->heads);
            break;
          case BufferRole::kv:
            need = product({2, batch_, k, at->kv_heads, head_dim_});
            why = fmt::format("K and V x batch {} x {} key tokens x {} KV heads x head_dim {}", batch_, k, at->kv_heads,
                              head_dim_);
            break;
          default: continue;
        }
        if (buf.elements() == need) continue;
        std::string shape;
        for (int64_t d : buf.shape) shape += fmt::format("{}{}", shape.empty() ? "" : ", ", d);
        add(ProblemKind::bad_data, op.id,
            fmt::format("buffer {} '{}' has shape [{}], {} elements, but as its {} it needs {} = {}", b, buf.name, shape,
                        buf.elements(), to_string(buf.role), why,
                        need < 0 ? std::string("more than 2^50") : std::to_string(need)));
      }
  }

  void check_deps(const Op& op) {
    for (OpId d : op.deps) {
      if (d < 0 || d >= static_cast<OpId>(s_.ops.size())) {
        add(ProblemKind::dangling_dep, op.id, fmt::format("depends on op {}, which does not exist", d));
      } else if (s_.ops[static_cast<size_t>(d)].rank != op.rank) {
        add(ProblemKind::cross_rank_dep, op.id,
            fmt::format("depends on {} on another rank (ranks meet only through send/recv and collectives)",
                        describe(s_, d)));
      }
    }
  }

  void check_joins() {
    // Per (rank, stream): its last op so far; a flat table for declared
    // streams, a map for the ops that name no declared stream.
    std::vector<size_t> base{0};
    for (const Rank& r : s_.ranks) base.push_back(base.back() + r.streams.size());
    std::vector<const Op*> flat(base.back(), nullptr);
    std::map<std::pair<int, int>, const Op*> odd;
    for (const Op& op : s_.ops) {
      const bool known = rank_ok(op.rank) && op.stream >= 0 &&
                         op.stream < static_cast<int>(s_.ranks[static_cast<size_t>(op.rank)].streams.size());
      const Op*& prev = known ? flat[base[static_cast<size_t>(op.rank)] + static_cast<size_t>(op.stream)]
                              : odd[{op.rank, op.stream}];
      if (op.joined && (!is_p2p(op.kind) || !prev || !is_p2p(prev->kind)))
        add(ProblemKind::bad_join, op.id, "is joined, but it and the previous op of its stream are not both send/recv");
      prev = &op;
    }
  }

  void check_p2p(const CommMatching& m) {
    for (const Op& op : s_.ops) {
      if (!is_p2p(op.kind)) continue;
      OpId p = m.partner[static_cast<size_t>(op.id)];
      bool is_send = op.kind == OpKind::send;
      if (p < 0) {
        add(ProblemKind::unmatched_p2p, op.id,
            fmt::format("{} {} rank {} (tag {}, {} bytes) has no matching {} on rank {}", is_send ? "send" : "recv",
                        is_send ? "to" : "from", op.peer, op.tag, s_.desc(op).bytes, is_send ? "recv" : "send", op.peer));
      } else if (is_send && s_.desc(s_.ops[static_cast<size_t>(p)]).bytes != s_.desc(op).bytes) {
        add(ProblemKind::unmatched_p2p, op.id,
            fmt::format("sends {} bytes but its matching recv, op {}, expects {}", s_.desc(op).bytes, p,
                        s_.desc(s_.ops[static_cast<size_t>(p)]).bytes));
      }
    }
  }

  void check_collectives(const CommMatching& m) {
    for (const auto& call : m.calls) {
      auto present = std::find_if(call.begin(), call.end(), [](OpId o) { return o >= 0; });
      const Op& first = s_.ops[static_cast<size_t>(*present)];
      const Group& g = s_.groups[static_cast<size_t>(first.group)];
      for (size_t i = 0; i < call.size(); ++i) {
        if (call[i] < 0) {
          add(ProblemKind::bad_collective, first.id,
              fmt::format("{} on group {} (tag {}): member rank {} has no matching op", to_string(first.kind), g.id,
                          first.tag, g.ranks[i]));
          continue;
        }
        const Op& op = s_.ops[static_cast<size_t>(call[i])];
        if (op.kind != first.kind || s_.desc(op).bytes != s_.desc(first).bytes || op.peer != first.peer)
          add(ProblemKind::bad_collective, op.id,
              fmt::format("is matched with {} but they differ in kind, bytes or root", describe(s_, first.id)));
      }
    }
  }

  const Schedule& s_;
  int64_t batch_, head_dim_;  // from the carried experiment; -1 when it does not say
  std::vector<Problem> out_;
};

}  // namespace

std::vector<Problem> check(const Schedule& s) { return Checker(s).run(); }

void validate(const Schedule& s, const std::string& context) {
  auto problems = check(s);
  if (problems.empty()) return;
  std::string more = problems.size() > 1 ? fmt::format(" (and {} more problems)", problems.size() - 1) : "";
  throw ScheduleError(context.empty() ? problems.front().message + more
                                      : fmt::format("{}: {}{}", context, problems.front().message, more));
}

}  // namespace rm::schedule
