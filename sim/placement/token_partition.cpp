#include "sim/placement/token_partition.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

namespace rm::placement {

using sparsity::TokenRun;

std::vector<TokenSet> contiguous_partition(int64_t S, int cp) {
  if (S % cp != 0) throw std::invalid_argument(fmt::format("contiguous: {} tokens do not split over {} ranks", S, cp));
  std::vector<TokenSet> out(static_cast<size_t>(cp));
  const int64_t n = S / cp;
  for (int r = 0; r < cp; ++r) out[size_t(r)].runs.push_back({r * n, n, n, 1});
  return out;
}

std::vector<TokenSet> zigzag_partition(int64_t S, int cp) {
  if (S % (2 * cp) != 0) throw std::invalid_argument(fmt::format("zigzag: {} tokens do not split into {} chunks", S, 2 * cp));
  std::vector<TokenSet> out(static_cast<size_t>(cp));
  const int64_t n = S / (2 * cp);
  for (int r = 0; r < cp; ++r) {
    out[size_t(r)].runs.push_back({r * n, n, n, 1});
    out[size_t(r)].runs.push_back({(2 * cp - 1 - r) * n, n, n, 1});
  }
  return out;
}

std::vector<TokenSet> stripe_partition(int64_t S, int cp, int64_t g) {
  if (S % (int64_t(cp) * g) != 0)
    throw std::invalid_argument(fmt::format("stripe: {} tokens do not split into {}-token chunks over {} ranks", S, g, cp));
  std::vector<TokenSet> out(static_cast<size_t>(cp));
  const int64_t periods = S / (int64_t(cp) * g);
  for (int r = 0; r < cp; ++r) out[size_t(r)].runs.push_back({r * g, g, int64_t(cp) * g, periods});
  return out;
}

std::vector<TokenSet> periodic_partition(int64_t S, int cp, int64_t g, const std::vector<bool>& reversed) {
  const int64_t period = int64_t(cp) * g;
  if (S % period != 0)
    throw std::invalid_argument(fmt::format("balanced: {} tokens do not split into {}-token chunks over {} ranks", S, g, cp));
  const int64_t periods = S / period;
  if (int64_t(reversed.size()) != periods) throw std::invalid_argument("balanced: one direction per period expected");
  std::vector<TokenSet> out(static_cast<size_t>(cp));
  for (int r = 0; r < cp; ++r) {
    auto& runs = out[size_t(r)].runs;
    for (int64_t p = 0; p < periods; ++p) {
      int64_t slot = reversed[size_t(p)] ? cp - 1 - r : r;
      int64_t begin = p * period + slot * g;
      // Merge with the previous run when the stride pattern continues (keeps sets compact).
      if (!runs.empty()) {
        auto& last = runs.back();
        int64_t next = last.begin + last.count * last.stride;
        if (last.count == 1 && begin - last.begin > 0) {
          last.stride = begin - last.begin;
          last.count = 2;
          continue;
        }
        if (begin == next) {
          ++last.count;
          continue;
        }
      }
      runs.push_back({begin, g, period, 1});
    }
  }
  return out;
}

std::vector<bool> balance_periods(const std::vector<double>& chunk_work, int cp) {
  const size_t periods = chunk_work.size() / size_t(cp);
  std::vector<bool> reversed(periods, false);
  // Heaviest spread first: those periods decide the balance, the light ones fine-tune it.
  std::vector<size_t> order(periods);
  std::iota(order.begin(), order.end(), 0);
  auto spread = [&](size_t p) {
    auto b = chunk_work.begin() + std::ptrdiff_t(p * size_t(cp));
    auto [lo, hi] = std::minmax_element(b, b + cp);
    return *hi - *lo;
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return spread(a) > spread(b); });
  std::vector<double> load(static_cast<size_t>(cp), 0.0);
  for (size_t p : order) {
    double best_max[2];
    for (int dir = 0; dir < 2; ++dir) {
      double m = 0;
      for (int r = 0; r < cp; ++r) {
        size_t slot = dir ? size_t(cp - 1 - r) : size_t(r);
        m = std::max(m, load[size_t(r)] + chunk_work[p * size_t(cp) + slot]);
      }
      best_max[dir] = m;
    }
    bool rev = best_max[1] < best_max[0];
    reversed[p] = rev;
    for (int r = 0; r < cp; ++r) load[size_t(r)] += chunk_work[p * size_t(cp) + (rev ? size_t(cp - 1 - r) : size_t(r))];
  }
  return reversed;
}

std::vector<TokenSet> simple_partition(Partition p, int64_t S, int cp, int64_t g) {
  switch (p) {
    case Partition::contiguous: return contiguous_partition(S, cp);
    case Partition::zigzag: return zigzag_partition(S, cp);
    case Partition::stripe: return stripe_partition(S, cp, g);
    case Partition::balanced: break;
  }
  throw std::invalid_argument("balanced partition needs chunk work: use partition_for()");
}

TokenSet sequence_shard(const TokenSet& ctx, int hp, int h) {
  const int64_t n = ctx.size();
  if (hp < 1 || h < 0 || h >= hp || n % hp != 0)
    throw std::invalid_argument(fmt::format("sequence_shard: {} tokens do not split over {} head ranks", n, hp));
  const int64_t want_begin = n / hp * h, want = n / hp;
  TokenSet out;
  int64_t pos = 0;  // local position of the current token
  for (const auto& run : ctx.runs) {
    for (int64_t c = 0; c < run.count; ++c) {
      const int64_t lo = std::max(pos, want_begin), hi = std::min(pos + run.len, want_begin + want);
      if (lo < hi) {
        TokenRun piece{run.begin + c * run.stride + (lo - pos), hi - lo, run.stride, 1};
        auto& runs = out.runs;
        if (!runs.empty() && runs.back().len == piece.len &&
            piece.begin == runs.back().begin + runs.back().count * runs.back().stride &&
            (runs.back().count > 1 || runs.back().stride == piece.stride))
          ++runs.back().count;
        else
          runs.push_back(piece);
      }
      pos += run.len;
      if (pos >= want_begin + want) return out;
    }
  }
  return out;
}

}  // namespace rm::placement
