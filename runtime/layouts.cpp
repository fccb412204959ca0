#include "runtime/layouts.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include "sim/schedule/schedule_error.hpp"

namespace rm::runtime {

using schedule::BufferRole;
using schedule::OpKind;

int64_t Layout::elements(int64_t batch, int64_t head_dim) const {
  const int64_t rows = batch * int64_t(heads.size()) * int64_t(tokens.size());
  if (content == BufferRole::lse) return rows;
  return rows * head_dim * (kv_like() ? 2 : 1);
}

std::vector<int32_t> positions(const schedule::TokenSet& t) {
  std::vector<int32_t> out;
  out.reserve(size_t(t.size()));
  for (const auto& r : t.runs)
    for (int64_t c = 0; c < r.count; ++c)
      for (int64_t i = 0; i < r.len; ++i) out.push_back(int32_t(r.begin + c * r.stride + i));
  return out;
}

namespace {

std::vector<int32_t> range(int begin, int count) {
  std::vector<int32_t> v(size_t(std::max(count, 0)));
  std::iota(v.begin(), v.end(), begin);
  return v;
}

// The far side of an all-to-all whose near sides are `near` (one per member).
std::vector<Layout> far_side(const std::vector<const Layout*>& near) {
  std::vector<int32_t> tokens, heads;
  for (const Layout* l : near) {
    tokens.insert(tokens.end(), l->tokens.begin(), l->tokens.end());
    heads.insert(heads.end(), l->heads.begin(), l->heads.end());
  }
  std::sort(tokens.begin(), tokens.end());
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
  std::sort(heads.begin(), heads.end());
  heads.erase(std::unique(heads.begin(), heads.end()), heads.end());
  const size_t n = near.size(), chunk = tokens.size() / n;
  std::vector<Layout> out(n);
  for (size_t j = 0; j < n; ++j) {
    out[j].content = near[j]->content;
    out[j].tokens.assign(tokens.begin() + std::ptrdiff_t(j * chunk), tokens.begin() + std::ptrdiff_t((j + 1) * chunk));
    out[j].heads = heads;
  }
  return out;
}

}  // namespace

Layouts::Layouts(const schedule::Schedule& s, const schedule::CommMatching& m, int64_t batch, int64_t head_dim)
    : batch_(batch), head_dim_(head_dim), layout_(s.buffers.size()) {
  // Home buffers, from the attention ops that use them.
  for (const auto& op : s.ops) {
    const schedule::Attention* a = s.attention_of(op);
    const schedule::Access* acc = s.access_of(op);
    if (!a || !acc) continue;
    const auto q_pos = positions(s.token_sets.at(size_t(a->q_tokens)));
    const auto k_pos = positions(s.token_sets.at(size_t(a->kv_tokens)));
    const auto heads = range(a->head_begin, a->heads), kv_heads = range(a->kv_head_begin, a->kv_heads);
    auto set = [&](int b) {
      const BufferRole role = s.buffers[size_t(b)].role;
      switch (role) {
        case BufferRole::q: case BufferRole::o: case BufferRole::lse: case BufferRole::d_o: case BufferRole::dq:
          layout_[size_t(b)] = Layout{role, q_pos, heads};
          break;
        case BufferRole::kv:
          layout_[size_t(b)] = Layout{role, k_pos, kv_heads};
          break;
        default: break;
      }
    };
    for (int b : acc->reads) set(b);
    for (int b : acc->writes) set(b);
    // The rank's finished dK|dV: its own tokens' K|V gradients (written by the
    // ring's last transfer, or by the op itself with one step).
    if (op.kind == OpKind::attn_bwd)
      for (const auto& buf : s.buffers)
        if (buf.rank == op.rank && buf.role == BufferRole::dkv) layout_[size_t(buf.id)] = Layout{BufferRole::dkv, q_pos, kv_heads};
  }
  // Exchange buffers, from the all-to-alls, until nothing changes.
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& call : m.calls) {
      if (call.empty() || call[0] < 0 || s.ops[size_t(call[0])].kind != OpKind::all_to_all) continue;
      const size_t pairs = s.access_of(s.ops[size_t(call[0])])->reads.size();
      for (size_t i = 0; i < pairs; ++i) {
        std::vector<int> reads, writes;
        for (schedule::OpId id : call) {
          const schedule::Access* acc = s.access_of(s.ops[size_t(id)]);
          if (acc->reads.size() != pairs || acc->writes.size() != pairs)
            throw schedule::ScheduleError(schedule::describe(s, id) +
                                          ": an all-to-all reads and writes as many buffers as its group's other members");
          reads.push_back(acc->reads[i]);
          writes.push_back(acc->writes[i]);
        }
        auto known = [&](const std::vector<int>& side) {
          return std::all_of(side.begin(), side.end(), [&](int b) { return layout_[size_t(b)].has_value(); });
        };
        auto unknown = [&](const std::vector<int>& side) {
          return std::none_of(side.begin(), side.end(), [&](int b) { return layout_[size_t(b)].has_value(); });
        };
        const std::vector<int>* from = nullptr;
        const std::vector<int>* to = nullptr;
        if (known(writes) && unknown(reads)) from = &writes, to = &reads;
        else if (known(reads) && unknown(writes)) from = &reads, to = &writes;
        if (!from) continue;
        std::vector<const Layout*> near;
        for (int b : *from) near.push_back(&*layout_[size_t(b)]);
        std::vector<Layout> far = far_side(near);
        for (size_t j = 0; j < far.size(); ++j) layout_[size_t((*to)[j])] = std::move(far[j]);
        changed = true;
      }
    }
  }
  for (const auto& b : s.buffers) {
    const auto& l = layout_[size_t(b.id)];
    if (l && l->elements(batch, head_dim) != b.elements())
      throw schedule::ScheduleError("buffer '" + b.name + "' on rank " + std::to_string(b.rank) + " holds " +
                                    std::to_string(b.elements()) + " elements but its tokens x heads layout needs " +
                                    std::to_string(l->elements(batch, head_dim)) +
                                    " (an all-to-all whose sides do not add up, e.g. replicated KV heads)");
  }
}

}  // namespace rm::runtime
