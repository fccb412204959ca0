#include "sim/memory/memory_model.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "sim/config/json_reader.hpp"
#include "sim/generate/footprint.hpp"
#include "sim/generate/index_building.hpp"
#include "sim/generate/layer_costs.hpp"
#include "sim/generate/step_context.hpp"
#include "sim/placement/device_map.hpp"

namespace rm::memory {

namespace {

using generate::kBf16Bytes;
using generate::kFp32Bytes;

// Adam in mixed precision (ZeRO paper's K = 12): fp32 master weights, exp_avg and exp_avg_sq.
constexpr int64_t kAdamBytesPerParam = 3 * kFp32Bytes;
// The slash block mask is bool/uint8 in MTraining's code (the Schedule's IR has no 1-byte dtype).
constexpr int64_t kMaskBytes = 1;
// Per (token, vocab entry) of a loss chunk: the bf16 logits, the fp32 copy the
// log-softmax runs on in place, and the bf16 gradient handed to the LM head's backward.
constexpr int64_t kLossBytesPerLogit = kBf16Bytes + kFp32Bytes + kBf16Bytes;
// Layers whose parameters (ZeRO-3) or full gradients (ZeRO >= 2) are live at once:
// the one computing and the one prefetched / being reduce-scattered.
constexpr int64_t kLayersInFlight = 2;
// dK|dV step partials and round sums live at once: the one being computed, the one being sent.
constexpr int kPartialsInFlight = 2;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

const char* to_string(Moment m) { return m == Moment::loss ? "loss" : "layer_backward"; }

int64_t MemoryReport::term(std::string_view name) const {
  for (const Term& t : terms)
    if (t.name == name) return t.bytes;
  return 0;
}

Tensors tensors(const Experiment& e) {
  const Model& m = e.model;
  const Parallel& p = e.parallel;
  const int tp = p.tp;
  if (m.heads % (p.hp * tp) != 0)
    throw ConfigError(fmt::format("{}: $.parallel.tp: hp*tp = {}*{} does not divide the model's {} heads", e.source,
                                  p.hp, tp, m.heads));
  const placement::HeadShard s = placement::head_shard(m, p, 0, 0);
  const int64_t b = e.workload.batch, S = e.workload.seq_len, D = m.head_dim;
  const int64_t T = S / p.cp;                       // ring layout: the context rank's tokens
  const int64_t N = b * S / (int64_t(p.cp) * p.hp);  // dense layout: the (hp, cp) rank's tokens, batch folded
  auto dense = [&](int64_t width) { return ceil_div(N * width * kBf16Bytes, tp); };  // sequence parallel: / tp

  Tensors t;
  t.q = b * T * s.heads * D * kBf16Bytes;
  t.kv = generate::kv_message_bytes(T, s.kv_heads, int(D), int(b));
  t.dkv = generate::dkv_message_bytes(T, s.kv_heads, int(D), int(b), p.grad_comm_dtype);
  t.lse = b * T * s.heads * kFp32Bytes;
  t.x = dense(m.hidden);
  t.dense_rest = dense(3 * m.hidden + 3 * m.intermediate);   // xn1, h, hn (hidden); gu (2 I), act (I)
  t.dense_grads = dense(4 * m.hidden + 3 * m.intermediate);  // dx, dhn, dh, dxn1 (hidden); dgu (2 I), dact (I)
  const bool shuffles = generate::StepContext::shuffle_of(p) != generate::StepContext::Shuffle::none;
  t.exchanges = (p.hp > 1 ? 1 : 0) + (shuffles ? 1 : 0);
  t.o_seq = t.exchanges > 0 ? t.q : 0;
  if (generate::dynamic_patterns(e)) {
    const generate::IndexSizes z = generate::index_sizes(e);
    t.index = p.cp * b * s.heads * z.blocks * z.blocks * kMaskBytes + b * s.heads * z.blocks * z.verticals * kFp32Bytes;
  }

  const generate::RingShape shape = generate::ring_shape(e, 0, 0, 0);
  const int O = int(shape.O), I = int(shape.I);
  t.outer = O;
  t.inner = I;
  const int K = O * I;
  t.kv_slots = ((I > 1 ? 2 : 0) + (O > 1 ? std::min(3, O - 1) : 0)) * t.kv;
  t.dkv_slots = ((I > 1 ? 2 : 0) + (O > 1 ? 2 : 0) + (K > 1 ? std::min(kPartialsInFlight, K) : 0) +
                 (O > 1 && I > 1 ? std::min(kPartialsInFlight, O) : 0)) *
                t.dkv;
  // A FlashAttention kernel returns the step's O (bf16) and LSE; ring-flash-attention
  // merges them into fp32 O and LSE accumulators. MTraining's kernel merges into O, LSE.
  t.fwd_partials = generate::merges_in_kernel(e.kernel) || K == 1 ? 0 : t.q + t.lse + 2 * t.q + t.lse;
  // dO; dQ accumulated in fp32 with each step's bf16 partial (one kernel writes dQ when K = 1); the owner's dK|dV.
  t.bwd_partials = t.q + (K > 1 ? 2 * t.q + t.q : t.q) + t.dkv;
  // The backward's all-to-alls stage dO in and dQ, dK|dV (bf16) out; selective
  // checkpointing also brings Q, K|V again. The forward's (Q, K|V in, O out) are no larger.
  const int64_t moved = 2 * t.q + t.kv + (p.checkpoint == Checkpoint::selective ? t.q + t.kv : 0);
  t.exchange = t.exchanges * moved;

  const int64_t chunk = p.loss_chunk_tokens > 0 ? std::min(p.loss_chunk_tokens, N) : N;
  t.loss = 2 * t.x + ceil_div(chunk * m.vocab * kLossBytesPerLogit, tp);  // xf, dxf; a chunk's logits (vocab / tp)

  // The generator's shards (norm weights stay whole on every tensor rank).
  t.layer_params = generate::tp_layer_params(m, tp);
  t.embed_params = generate::tp_embed_params(m, tp);
  t.params = int64_t(m.layers) * t.layer_params + t.embed_params;
  t.zero_group = p.replicas();
  return t;
}

MemoryReport estimate_memory(const Experiment& e) {
  const Tensors t = tensors(e);
  const Parallel& p = e.parallel;
  const int L = e.model.layers;
  const bool sharded = t.zero_group > 1;
  const int zero = sharded ? p.zero_stage : 0;
  const int64_t shard = ceil_div(t.params, t.zero_group);

  // Persistent state; ZeRO-3 adds the parameters gathered for what computes,
  // ZeRO >= 2 the full gradients not yet reduce-scattered: the embedding's (reduced
  // after the embedding backward, at the end) and, in a layer's backward, the layers in flight.
  auto weights = [&](Moment at) {
    if (zero < 3) return t.params * kBf16Bytes;
    const int64_t gathered = at == Moment::loss ? t.embed_params : kLayersInFlight * t.layer_params;
    return std::min(t.params, shard + gathered) * kBf16Bytes;  // never more than unsharded
  };
  auto gradients = [&](Moment at) {
    if (zero < 2) return t.params * kBf16Bytes;
    const int64_t buckets = t.embed_params + (at == Moment::loss ? 0 : kLayersInFlight * t.layer_params);
    return std::min(t.params, shard + buckets) * kBf16Bytes;
  };
  const int64_t optimizer = (zero >= 1 ? shard : t.params) * kAdamBytesPerParam;

  // What a layer keeps for its backward (all L layers are held at both moments),
  // what its backward rebuilds, and the indices of the layers (docs/memory.md, "Activations").
  const int64_t attn_kept = t.q + t.kv + t.q + t.lse;  // Q, K|V, O, LSE
  int64_t kept = t.x, working = t.dense_grads, indices = t.index;
  switch (p.checkpoint) {
    case Checkpoint::none:
      kept += t.dense_rest + attn_kept + t.o_seq;
      indices *= L;
      break;
    case Checkpoint::selective:  // checkpoint++: O and LSE kept, the attention is not recomputed
      kept += t.q + t.lse + t.o_seq;
      working += t.dense_rest + t.q + t.kv;  // Q, K|V the backward's exchange brings again
      indices *= L;
      break;
    case Checkpoint::full:
      working += t.dense_rest + attn_kept + t.o_seq;
      break;
  }
  const int64_t checkpoints = int64_t(L) * kept + t.x;  // + the last layer's output
  const int64_t attention = std::max(t.kv_slots + t.fwd_partials, t.kv_slots + t.dkv_slots + t.bwd_partials) + indices;

  const double frag = e.cluster.gpu.fragmentation;
  const int64_t context = std::llround(e.cluster.gpu.context_GB * 1e9);
  auto moment = [&](Moment at) {
    const bool loss = at == Moment::loss;
    std::vector<Term> terms{{kWeights, weights(at)},
                            {kGradients, gradients(at)},
                            {kOptimizer, optimizer},
                            {kCheckpoints, checkpoints},
                            {kLayer, loss ? 0 : working},
                            {kAttention, loss ? 0 : attention},
                            {kAllToAll, loss ? 0 : t.exchange},
                            {kLoss, loss ? t.loss : 0}};
    int64_t tensors = 0;
    for (const Term& x : terms) tensors += x.bytes;
    terms.push_back({kFragmentation, std::llround(frag * double(tensors))});
    terms.push_back({kContext, context});
    return terms;
  };
  auto total = [](const std::vector<Term>& terms) {
    int64_t sum = 0;
    for (const Term& x : terms) sum += x.bytes;
    return sum;
  };

  MemoryReport r;
  std::vector<Term> at_loss = moment(Moment::loss), at_layer = moment(Moment::layer_backward);
  r.loss_bytes = total(at_loss);
  r.layer_backward_bytes = total(at_layer);
  r.peak_at = r.loss_bytes > r.layer_backward_bytes ? Moment::loss : Moment::layer_backward;
  r.terms = r.peak_at == Moment::loss ? std::move(at_loss) : std::move(at_layer);
  r.peak_bytes = std::max(r.loss_bytes, r.layer_backward_bytes);
  r.capacity_bytes = std::llround(e.cluster.gpu.memory_GB * 1e9);
  r.oom = r.peak_bytes > r.capacity_bytes;

  // What a narrow scope holds: the attention of one layer (its Q, K|V, O, LSE, the
  // ring's slots and partials, the index, the exchange staging), and for scope layer
  // that layer's weights, gradients and activations; never the optimizer or other layers.
  r.scope = e.scope;
  const int64_t fwd_ring = t.kv_slots + t.fwd_partials + t.index;
  const int64_t fwd_bwd_ring = attention - indices + t.index;
  int64_t held = 0;
  switch (e.scope) {
    case Scope::attention_fwd: held = attn_kept + fwd_ring + t.exchange; break;
    case Scope::attention_fwd_bwd: held = attn_kept + t.dkv + fwd_bwd_ring + t.exchange; break;
    case Scope::layer:
      held = 2 * t.layer_params * kBf16Bytes + t.x + t.dense_rest + attn_kept + t.o_seq + t.dense_grads + t.dkv +
             fwd_bwd_ring + t.exchange;
      break;
    case Scope::step: break;
  }
  r.scope_bytes = e.scope == Scope::step ? r.peak_bytes : held + std::llround(frag * double(held)) + context;
  r.scope_oom = r.scope_bytes > r.capacity_bytes;
  return r;
}

nlohmann::json to_json(const MemoryReport& r) {
  nlohmann::json terms = nlohmann::json::object();
  for (const Term& t : r.terms) terms[std::string(t.name)] = double(t.bytes) / 1e9;
  return {{"peak_GB", r.peak_GB()},
          {"capacity_GB", r.capacity_GB()},
          {"oom", r.oom},
          {"shortfall_GB", double(r.shortfall_bytes()) / 1e9},
          {"peak_at", to_string(r.peak_at)},
          {"moments", {{"loss", double(r.loss_bytes) / 1e9}, {"layer_backward", double(r.layer_backward_bytes) / 1e9}}},
          {"terms", terms},
          {"scope", to_string(r.scope)},
          {"scope_GB", double(r.scope_bytes) / 1e9},
          {"scope_oom", r.scope_oom}};
}

std::string to_text(const MemoryReport& r) {
  std::string verdict = "fits";
  if (r.oom) {  // name the largest term: what to change first
    const Term* big = &r.terms.front();
    for (const Term& t : r.terms)
      if (t.bytes > big->bytes) big = &t;
    verdict = fmt::format("OUT OF MEMORY by {:.2f} GB, the largest term {} {:.2f} GB",
                          double(r.shortfall_bytes()) / 1e9, big->name, double(big->bytes) / 1e9);
  }
  std::string out;
  if (r.scope != Scope::step)  // first what this run holds; the step's figure below is for planning
    out += fmt::format("memory/GPU     {:.2f} GB of {:.2f} GB held by scope {}: {}\n", double(r.scope_bytes) / 1e9,
                       r.capacity_GB(), to_string(r.scope),
                       r.scope_oom ? fmt::format("OUT OF MEMORY by {:.2f} GB",
                                                 double(r.scope_bytes - r.capacity_bytes) / 1e9)
                                   : std::string("fits"));
  out += fmt::format("{}{:.2f} GB of {:.2f} GB: {} (peak at the {})\n",
                     r.scope == Scope::step ? "memory/GPU     " : "a whole step   ", r.peak_GB(), r.capacity_GB(),
                     verdict, r.peak_at == Moment::loss ? "loss" : "last layer's backward");
  std::string line;
  for (const Term& t : r.terms) {
    if (t.bytes == 0) continue;
    const std::string item = fmt::format("{} {:.2f} GB", t.name, double(t.bytes) / 1e9);
    if (!line.empty() && line.size() + item.size() > 90) {
      out += "  ";
      out += line;
      out += '\n';
      line.clear();
    }
    if (!line.empty()) line += ", ";
    line += item;
  }
  if (!line.empty()) {
    out += "  ";
    out += line;
    out += '\n';
  }
  return out;
}

}  // namespace rm::memory
