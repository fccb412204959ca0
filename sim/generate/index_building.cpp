#include "sim/generate/index_building.hpp"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "sim/config/json_reader.hpp"
#include "sim/generate/attention.hpp"
#include "sim/generate/footprint.hpp"
#include "sim/generate/layer_costs.hpp"

namespace rm::generate {

using schedule::BufferRole;
using schedule::DType;
using schedule::OpKind;
using schedule::Where;

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The largest budget the pattern asks for: top_p.max_vertical / max_slash, or the
// largest static budget (MTraining pads every head to the largest, 3584 / 6144 on Qwen2.5-3B).
int64_t budget(const nlohmann::json& pattern, const char* top_p_key, const char* budget_key, int64_t fallback) {
  if (!pattern.is_object()) return fallback;
  if (auto t = pattern.find("top_p"); t != pattern.end() && t->is_object())
    return t->contains(top_p_key) ? (*t)[top_p_key].get<int64_t>() : fallback;
  if (auto b = pattern.find("budgets"); b != pattern.end() && b->is_array() && !b->empty()) {
    int64_t most = 0;
    for (const auto& row : *b)
      if (row.contains(budget_key)) most = std::max(most, row[budget_key].get<int64_t>());
    return most;
  }
  return fallback;
}

}  // namespace

IndexSizes index_sizes(const Experiment& e) {
  const nlohmann::json& p = e.workload.pattern;
  IndexSizes s;
  s.top_p = p.is_object() && p.contains("top_p");
  // calc_index: max_v_size = min(cdiv(max(v_size), 128), local tokens // 128) * 128
  // (ceil here, so that test sizes below one block keep one).
  s.blocks = ceil_div(e.workload.seq_len / e.parallel.cp, kIndexGranularity);
  auto padded = [&](int64_t n) { return std::max<int64_t>(1, std::min(ceil_div(n, kIndexGranularity), s.blocks)) * kIndexGranularity; };
  s.verticals = padded(budget(p, "max_vertical", "vertical", kIndexMaxVerticals));
  s.slashes = padded(budget(p, "max_slash", "slash", kIndexMaxSlashes));
  return s;
}

void check_index_layout(const Experiment& e) {
  const int cp = e.parallel.cp;
  if (!dynamic_patterns(e) || cp <= 2 || StepContext::shuffle_of(e.parallel) != StepContext::Shuffle::zigzag) return;
  throw ConfigError(fmt::format(
      "{}: $.parallel.partition: zigzag with the per-call shuffle and a dynamic pattern cannot be executed at cp = {}: "
      "the shuffle swaps halves within the pairs (c, cp-1-c), so from the contiguous layout the index is built on it "
      "gives rank 1 chunks 2 and {} of {}, where the zigzag partition puts chunks 1 and {}; export with cp = 2, or "
      "partition = stripe or contiguous",
      e.source, cp, 2 * cp - 3, 2 * cp, 2 * cp - 2));
}

void emit_index_building(StepContext& ctx, int d, int h, int t, schedule::Phase phase, int layer, RankDeps& ready) {
  const Experiment& e = ctx.e;
  const int cp = e.parallel.cp;
  const int64_t B = e.workload.batch, D = e.model.head_dim, Q = kIndexLastQueries;
  const placement::HeadShard shard = placement::head_shard(e.model, e.parallel, h, t);
  const int64_t H = shard.heads, N = e.workload.seq_len / cp, S = e.workload.seq_len;
  const IndexSizes z = index_sizes(e);
  const Where where{phase, layer, -1};
  const int group = ctx.context_groups[size_t(ctx.group_index(d, h, t))];
  // The last queries live with the context rank that owns the last token; the
  // scores are gathered to context rank 0 (calc_index: v_gather_rank = s_gather_rank = 0).
  int last = 0;
  if (index_inputs(ctx, ctx.rank(d, h, 0, t), phase).before_shuffle)
    last = cp - 1;  // the contiguous layout before the shuffle
  else
    for (int c = 0; c < cp; ++c)
      for (const auto& run : ctx.work.tokens(c).runs)
        if (run.begin + (run.count - 1) * run.stride + run.len == S) last = c;
  constexpr int kRoot = 0;

  // Per rank: the last queries, their scores against the local keys [B, H, 64, N]
  // (bf16, as the einsum of bf16 Q and K), the row statistics (top-p), the
  // column and diagonal sums, at the root the gathered sums and the top-k picks,
  // and the selected indices everyone receives.
  using Bufs = IndexBuffers;  // per context rank; declared on the group's first pass of this phase
  auto [memo, fresh] = ctx.memo.index.try_emplace({group, int(phase)});
  std::vector<Bufs>& buf = memo->second;
  if (fresh) {
    buf.resize(static_cast<size_t>(cp));
    for (int c = 0; c < cp; ++c) {
      const int r = ctx.rank(d, h, c, t);
      Bufs& x = buf[size_t(c)];
      auto work = [&](const std::string& name, DType dt, std::vector<int64_t> shape) {
        return ctx.buffer(r, "index." + name, BufferRole::index_work, dt, std::move(shape));
      };
      x.t = attention_tensors(ctx, r, phase);
      const IndexInputs in = index_inputs(ctx, r, phase);
      x.q_in = in.q, x.kv_in = in.kv;
      x.last_q = cp > 1 ? work("last_q", DType::bf16, {B, Q, H, D}) : x.q_in;
      x.qk = work("qk", DType::bf16, {B, H, Q, N});
      if (z.top_p) {
        x.max = work("max", DType::bf16, {B, H, Q});
        x.sum = work("sum", DType::bf16, {B, H, Q});
        x.max_all = cp > 1 ? work("max.all", DType::bf16, {cp, B, H, Q}) : x.max;
        x.sum_all = cp > 1 ? work("sum.all", DType::bf16, {cp, B, H, Q}) : x.sum;
      }
      x.vert = work("vertical", DType::bf16, {B, H, N});
      x.slash = work("slash", DType::bf16, {B, H, N + Q - 1});
      x.v = work("v", DType::int32, {B, H, z.verticals});
      x.s = work("s", DType::int32, {B, H, z.slashes});
      x.v_top = x.v, x.s_top = x.s;
      if (c == kRoot) {
        if (cp > 1) {
          x.v_top = work("v.top", DType::int32, {B, H, z.verticals});
          x.s_top = work("s.top", DType::int32, {B, H, z.slashes});
        }
        for (int from = 0; from < cp; ++from) {
          x.vert_from.push_back(from == kRoot ? x.vert : work(fmt::format("vertical.from{}", from), DType::bf16, {B, H, N}));
          x.slash_from.push_back(from == kRoot ? x.slash
                                               : work(fmt::format("slash.from{}", from), DType::bf16, {B, H, N + Q - 1}));
        }
      }
    }
  }
  const auto& members = ctx.b.peek().groups[size_t(group)].ranks;
  // A collective in the context group; reads/writes per context rank.
  auto collective = [&](OpKind k, int64_t bytes, int root, auto reads, auto writes) {
    auto ids = ctx.collective(group, k, bytes, where, &RankStreams::exchange, ready, 0,
                              root < 0 ? -1 : ctx.rank(d, h, root, t));
    for (size_t i = 0; i < ids.size(); ++i) {
      const int c = ctx.coord[size_t(members[i])].c;
      ctx.access(ids[i], reads(c), writes(c));
    }
  };
  // A compute on every rank (or on the root only); io(c) gives reads and writes.
  auto compute = [&](bool root_only, double flops, int64_t bytes, auto io) {
    for (int c = 0; c < cp; ++c) {
      if (root_only && c != kRoot) continue;
      const OpId id = ctx.compute(ctx.rank(d, h, c, t), OpKind::index_build, where, {flops, 0, Q * B, bytes}, ready);
      auto [reads, writes] = io(c);
      ctx.access(id, std::move(reads), std::move(writes));
    }
  };
  using V = std::vector<int>;
  auto only_root = [](int c, int b) { return c == 0 ? V{b} : V{}; };
  // Every rank's sums to the root, launched together there (torch.distributed.gather = NCCL sends/recvs).
  auto gather = [&](int64_t bytes, int Bufs::*src, std::vector<int> Bufs::*dst) {
    std::vector<OpId> recvs;
    const int root = ctx.rank(d, h, kRoot, t);
    const std::vector<OpId> root_ready = ready[size_t(root)];
    std::vector<OpId> sends;
    for (int c = 0; c < cp; ++c) {
      if (c == kRoot) continue;
      const int r = ctx.rank(d, h, c, t);
      auto ids = ctx.b.p2p({r, ctx.streams[size_t(r)].exchange, root, ctx.streams[size_t(root)].exchange, bytes, where,
                            kTagIndexGather});
      ctx.b.add_deps(ids.send, ready[size_t(r)]);
      ctx.b.add_deps(ids.recv, root_ready);
      ctx.access(ids.send, {buf[size_t(c)].*src}, {});
      ctx.access(ids.recv, {}, {(buf[size_t(kRoot)].*dst)[size_t(c)]});
      ready[size_t(r)] = {ids.send};
      recvs.push_back(ids.recv);
    }
    ctx.b.launch_together(recvs);
    ready[size_t(root)] = recvs;
  };

  const double rows = double(Q * B * H), keys = double(N);
  const int64_t qk_bytes = B * H * Q * N * kBf16Bytes;
  if (cp > 1)
    collective(OpKind::broadcast, head_bytes(Q, int(H), int(D), int(B)), last,
               [&](int c) { return c == last ? V{buf[size_t(c)].q_in} : V{}; },
               [&](int c) { return V{buf[size_t(c)].last_q}; });
  // QK^T of the last queries against the local keys (written once; K read once).
  compute(false, gemm_flops(Q * B, N, D) * double(H), qk_bytes + kv_message_bytes(N, shard.kv_heads, int(D), int(B)) / 2,
          [&](int c) { return std::pair{V{buf[size_t(c)].last_q, buf[size_t(c)].kv_in}, V{buf[size_t(c)].qk}}; });
  if (z.top_p) {  // a global softmax over all ranks' keys: max, then exp and sum
    const int64_t stat = B * H * Q * kBf16Bytes;
    compute(false, rows * keys, qk_bytes, [&](int c) { return std::pair{V{buf[size_t(c)].qk}, V{buf[size_t(c)].max}}; });
    if (cp > 1)
      collective(OpKind::all_gather, cp * stat, -1, [&](int c) { return V{buf[size_t(c)].max}; },
                 [&](int c) { return V{buf[size_t(c)].max_all}; });
    compute(false, 2.0 * rows * keys, 2 * qk_bytes, [&](int c) {
      return std::pair{V{buf[size_t(c)].qk, buf[size_t(c)].max_all}, V{buf[size_t(c)].qk, buf[size_t(c)].sum}};
    });
    if (cp > 1)
      collective(OpKind::all_gather, cp * stat, -1, [&](int c) { return V{buf[size_t(c)].sum}; },
                 [&](int c) { return V{buf[size_t(c)].sum_all}; });
  }
  // Column sums (normalised by the global sums in top-p mode).
  const int64_t vert_bytes = B * H * N * kBf16Bytes, slash_bytes = B * H * (N + Q - 1) * kBf16Bytes;
  compute(false, (z.top_p ? 2.0 : 1.0) * rows * keys, (z.top_p ? 2 : 1) * qk_bytes + vert_bytes, [&](int c) {
    const Bufs& x = buf[size_t(c)];
    return z.top_p ? std::pair{V{x.qk, x.sum_all}, V{x.qk, x.vert}} : std::pair{V{x.qk}, V{x.vert}};
  });
  // Top-k at the root over all S columns, then the chosen indices to everyone.
  auto select = [&](int64_t candidates, int64_t picked, std::vector<int> Bufs::*from, int Bufs::*top, int Bufs::*out) {
    const int64_t in = B * H * candidates * kBf16Bytes, picks = B * H * picked * kFp32Bytes;
    compute(true, 0.0, kTopkPasses * in + 2 * picks,
            [&](int c) { return std::pair{buf[size_t(c)].*from, V{buf[size_t(c)].*top}}; });
    if (cp > 1)
      collective(OpKind::broadcast, picks, kRoot, [&](int c) { return only_root(c, buf[size_t(c)].*top); },
                 [&](int c) { return V{buf[size_t(c)].*out}; });
  };
  if (cp > 1) gather(vert_bytes, &Bufs::vert, &Bufs::vert_from);
  select(S, z.verticals, &Bufs::vert_from, &Bufs::v_top, &Bufs::v);
  // Diagonal sums of the local scores (sum_all_diagonal_matrix: N + 63 diagonals).
  compute(false, rows * keys, qk_bytes + slash_bytes,
          [&](int c) { return std::pair{V{buf[size_t(c)].qk}, V{buf[size_t(c)].slash}}; });
  if (cp > 1) gather(slash_bytes, &Bufs::slash, &Bufs::slash_from);
  select(S, z.slashes, &Bufs::slash_from, &Bufs::s_top, &Bufs::s);
  // Per rank, every head: the block mask of the slashes for each of the cp ring
  // steps, [cp, B, H, nb, nb], and each query block's vertical list [B, H, nb, verticals]
  // (convert_indices); then the sort of the mask into per-row block lists at
  // 64-key granularity (convert_blockmask), [cp, B, H, nb, 2 nb].
  const int64_t nb = z.blocks, mask = int64_t(cp) * B * H * nb * nb;
  const int64_t bars = B * H * nb * z.verticals * kFp32Bytes;  // int32, like fp32
  compute(false, double(S / kIndexGranularity) * double(z.slashes) * double(B * H), mask + 4 * bars, [&](int c) {
    const Bufs& x = buf[size_t(c)];
    return std::pair{V{x.v, x.s}, V{x.t.index, x.t.index_bars}};
  });
  compute(false, 0.0, kBlockSortBytesPerElement * 2 * mask,
          [&](int c) { return std::pair{V{buf[size_t(c)].t.index}, V{buf[size_t(c)].t.index}}; });
}

void emit_backward_index_conversion(StepContext& ctx, int d, int h, int t, schedule::Phase phase, int layer,
                                    RankDeps& ready) {
  const Experiment& e = ctx.e;
  const int64_t cp = e.parallel.cp, B = e.workload.batch, nb = index_sizes(e).blocks;
  const int64_t H = placement::head_shard(e.model, e.parallel, h, t).heads;
  const int64_t bytes = kColReverseBytesPerElement * cp * B * H * nb * nb;
  for (int c = 0; c < e.parallel.cp; ++c) {
    const int r = ctx.rank(d, h, c, t);
    const OpId id = ctx.compute(r, OpKind::index_build, {phase, layer, -1}, {0.0, 0, ctx.local_tokens(), bytes}, ready);
    const int index = attention_tensors(ctx, r, phase).index;
    ctx.access(id, {index}, {index});
  }
}

}  // namespace rm::generate
