#include "sim/sparsity/frame_sweep.hpp"

#include <algorithm>
#include <map>

namespace rm::sparsity {

namespace {

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Owner of block x of a side padded with -1.
int owner_at(const std::vector<int>& owner, int64_t x) {
  return x < static_cast<int64_t>(owner.size()) ? owner[static_cast<size_t>(x)] : -1;
}

// Frame types of one side: per frame its type, and the owners of each type.
std::vector<int> frame_types(const std::vector<int>& owner, int64_t len, int64_t frames,
                             std::vector<std::vector<int>>& types) {
  std::map<std::vector<int>, int> ids;
  std::vector<int> out;
  for (int64_t f = 0; f < frames; ++f) {
    std::vector<int> fr(static_cast<size_t>(len));
    for (int64_t x = 0; x < len; ++x) fr[static_cast<size_t>(x)] = owner_at(owner, f * len + x);
    auto [it, fresh] = ids.emplace(fr, static_cast<int>(types.size()));
    if (fresh) types.push_back(std::move(fr));
    out.push_back(it->second);
  }
  return out;
}

// What choose_frames minimises: one add_frame_blocks call (its fill of the
// owner matrix, and 2 reads per offset and type pair, taking nk/8 offsets —
// a head's real count decides later whether frames are used at all).
double call_cost(double tq, double tk, double p, double pk, double nk) { return tq * tk * (p * pk + nk / 4); }

// make_frames pairs every two frames once: bound that (about 50 ms).
constexpr double kMaxFramePairs = double(1 << 26);

// Polynomial hashes of every window of a padded owner sequence, two moduli:
// distinct frames almost surely hash apart. They only steer the choice of p;
// make_frames compares frames exactly.
class WindowHash {
 public:
  WindowHash(const std::vector<int>& owner, int64_t padded) {
    for (int m = 0; m < 2; ++m) {
      pre_[m].assign(static_cast<size_t>(padded) + 1, 0);
      pow_[m].assign(static_cast<size_t>(padded) + 1, 1);
      for (int64_t x = 0; x < padded; ++x) {
        const auto v = static_cast<uint64_t>(owner_at(owner, x) + 2);
        pre_[m][static_cast<size_t>(x) + 1] = (pre_[m][static_cast<size_t>(x)] * kBase + v) % kMod[m];
        pow_[m][static_cast<size_t>(x) + 1] = pow_[m][static_cast<size_t>(x)] * kBase % kMod[m];
      }
    }
  }
  uint64_t operator()(int64_t begin, int64_t len) const {
    uint64_t h[2];
    for (int m = 0; m < 2; ++m) {
      const uint64_t a = pre_[m][static_cast<size_t>(begin + len)];
      const uint64_t b = pre_[m][static_cast<size_t>(begin)] * pow_[m][static_cast<size_t>(len)] % kMod[m];
      h[m] = (a + kMod[m] - b) % kMod[m];
    }
    return h[0] << 32 | h[1];
  }

 private:
  static constexpr uint64_t kMod[2] = {1000000007ull, 998244353ull};
  static constexpr uint64_t kBase = 131071;
  std::vector<uint64_t> pre_[2], pow_[2];
};

// Distinct windows [f·len, (f+1)·len) for f < frames.
int64_t distinct_frames(const WindowHash& h, int64_t len, int64_t frames) {
  std::vector<uint64_t> v(static_cast<size_t>(frames));
  for (int64_t f = 0; f < frames; ++f) v[static_cast<size_t>(f)] = h(f * len, len);
  std::sort(v.begin(), v.end());
  return std::unique(v.begin(), v.end()) - v.begin();
}

}  // namespace

Frames make_frames(const std::vector<int>& q_owner, const std::vector<int>& k_owner, int64_t r, int64_t p) {
  Frames f;
  f.p = p;
  f.r = r;
  const auto nq = std::max(static_cast<int64_t>(q_owner.size()), (static_cast<int64_t>(k_owner.size()) + r - 1) / r);
  f.frames = (nq + p - 1) / p;
  const std::vector<int> qt = frame_types(q_owner, p, f.frames, f.q_types);
  const std::vector<int> kt = frame_types(k_owner, p * r, f.frames, f.k_types);
  const auto nk_types = static_cast<int64_t>(f.k_types.size());
  f.distance.assign(f.q_types.size() * f.k_types.size() * static_cast<size_t>(f.frames), 0);
  for (int64_t a = 0; a < f.frames; ++a)
    for (int64_t d = 0; d <= a; ++d)  // key frames after the query's hold no earlier key block
      ++f.distance[static_cast<size_t>((qt[static_cast<size_t>(a)] * nk_types + kt[static_cast<size_t>(a - d)]) * f.frames + d)];
  return f;
}

Frames choose_frames(const std::vector<int>& q_owner, const std::vector<int>& k_owner, int64_t r, double limit) {
  const auto nq = std::max(static_cast<int64_t>(q_owner.size()), (static_cast<int64_t>(k_owner.size()) + r - 1) / r);
  if (nq == 0) return {};
  // A frame never exceeds the sequence, so padding to 2·nq covers every p.
  const WindowHash qh(q_owner, 2 * nq), kh(k_owner, 2 * nq * r);
  double best = limit;
  int64_t best_p = 0;
  const auto nk = static_cast<double>(nq * r);
  for (int64_t p = 1; p <= nq; ++p) {
    const auto frames = (nq + p - 1) / p;
    const auto fp = static_cast<double>(p), fpk = static_cast<double>(p * r), ff = static_cast<double>(frames);
    if (call_cost(1, 1, fp, fpk, nk) >= best) break;  // the fill alone grows with p
    if (ff * ff / 2 > kMaxFramePairs) continue;
    const auto tq = static_cast<double>(distinct_frames(qh, p, frames));
    if (call_cost(tq, 1, fp, fpk, nk) >= best) continue;
    const double c = call_cost(tq, static_cast<double>(distinct_frames(kh, p * r, frames)), fp, fpk, nk);
    if (c < best) best = c, best_p = p;
  }
  return best_p ? make_frames(q_owner, k_owner, r, best_p) : Frames{};
}

double frame_sweep_cost(const Frames& f, size_t offsets) {
  const auto types = static_cast<double>(f.q_types.size() * f.k_types.size());
  return types * (static_cast<double>(f.p * f.p * f.r) + 2.0 * static_cast<double>(offsets));
}

void add_frame_blocks(const Frames& f, const std::vector<int64_t>& offset, const std::vector<int64_t>& pairs,
                      int k_owners, std::vector<TileCost>& out) {
  const int64_t p = f.p, r = f.r, pk = p * r, span = 2 * pk - r;  // e = a·r − b in [−(pk − 1), (p − 1)·r]
  const size_t types = f.q_types.size() * f.k_types.size();
  std::vector<TileCost> g(types * static_cast<size_t>(span));
  for (size_t e = 0; e < offset.size(); ++e) {
    const int64_t d0 = floor_div(offset[e], pk), m = offset[e] - d0 * pk;
    auto add = [&](int64_t d, int64_t rel) {
      if (d < 0 || d >= f.frames) return;
      for (size_t t = 0; t < types; ++t)
        if (const int64_t n = f.distance[t * static_cast<size_t>(f.frames) + static_cast<size_t>(d)])
          g[t * static_cast<size_t>(span) + static_cast<size_t>(rel + pk - 1)] += TileCost{n, n * pairs[e]};
    };
    if (m <= (p - 1) * r) add(d0, m);  // same frame distance, a·r >= b
    if (m >= 1) add(d0 + 1, m - pk);   // one frame further, a·r < b
  }
  for (size_t tq = 0; tq < f.q_types.size(); ++tq)
    for (size_t tk = 0; tk < f.k_types.size(); ++tk) {
      const TileCost* gt = &g[(tq * f.k_types.size() + tk) * static_cast<size_t>(span)];
      for (int64_t a = 0; a < p; ++a) {
        const int cq = f.q_types[tq][static_cast<size_t>(a)];
        if (cq < 0) continue;
        TileCost* row = &out[static_cast<size_t>(cq) * static_cast<size_t>(k_owners)];
        for (int64_t b = 0; b < pk; ++b)
          if (const int ck = f.k_types[tk][static_cast<size_t>(b)]; ck >= 0) row[ck] += gt[a * r - b + pk - 1];
      }
    }
}

}  // namespace rm::sparsity
