#include "sim/sparsity/block_owners.hpp"

namespace rm::sparsity {

std::optional<BlockOwners> block_owners(const std::vector<TokenSet>& sets, int64_t block) {
  BlockOwners out;
  out.owners = static_cast<int>(sets.size());
  for (size_t s = 0; s < sets.size(); ++s) {
    for (const auto& r : sets[s].runs) {
      if (r.len <= 0 || r.count <= 0) continue;
      if (r.begin < 0 || r.begin % block || r.len % block || (r.count > 1 && r.stride % block)) return std::nullopt;
      for (int64_t c = 0; c < r.count; ++c) {
        int64_t b0 = (r.begin + c * r.stride) / block, b1 = b0 + r.len / block;
        if (static_cast<int64_t>(out.owner.size()) < b1) out.owner.resize(static_cast<size_t>(b1), -1);
        for (int64_t b = b0; b < b1; ++b) {
          if (out.owner[static_cast<size_t>(b)] != -1) return std::nullopt;
          out.owner[static_cast<size_t>(b)] = static_cast<int>(s);
        }
      }
    }
  }
  return out;
}

int64_t owner_period(const std::vector<int>& owner) {
  // Knuth–Morris–Pratt prefix function: the longest border gives the period.
  const size_t n = owner.size();
  if (n == 0) return 0;
  std::vector<size_t> pi(n, 0);
  for (size_t i = 1; i < n; ++i) {
    size_t k = pi[i - 1];
    while (k > 0 && owner[i] != owner[k]) k = pi[k - 1];
    if (owner[i] == owner[k]) ++k;
    pi[i] = k;
  }
  return static_cast<int64_t>(n - pi[n - 1]);
}

std::vector<OwnerSegment> owner_segments(const std::vector<int>& owner) {
  std::vector<OwnerSegment> segs;
  for (size_t b = 0; b < owner.size(); ++b) {
    if (owner[b] < 0) continue;
    auto i = static_cast<int64_t>(b);
    if (!segs.empty() && segs.back().end == i && segs.back().owner == owner[b]) ++segs.back().end;
    else segs.push_back({i, i + 1, owner[b]});
  }
  return segs;
}

}  // namespace rm::sparsity
