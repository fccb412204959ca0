#include "kernels/index_builder.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include "kernels/bf16.hpp"

namespace rm::kernels {
namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("index builder: " + what); }

// Row sums in units of 2^-32 of the largest term: up to 2^22 keys of weight <= 1 fit in int64.
constexpr double kSumOne = 4294967296.0;

void validate(const IndexProblem& p) {
  if (p.heads_q <= 0 || p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0)
    fail("heads_q (" + std::to_string(p.heads_q) + ") must be a positive multiple of heads_kv (" +
         std::to_string(p.heads_kv) + ")");
  if (p.head_dim <= 0) fail("head_dim must be positive");
  if (p.seq_len <= 0 || p.seq_len > (1 << 22)) fail("seq_len must be in [1, 2^22]");
  const auto d = static_cast<std::size_t>(p.head_dim);
  if (p.q.data == nullptr || p.q.size != static_cast<std::size_t>(p.heads_q) * p.q_pos.size() * d)
    fail("q must hold heads_q x q_pos.size() x head_dim elements");
  if ((p.k.data == nullptr && !p.k_pos.empty()) ||
      p.k.size != static_cast<std::size_t>(p.heads_kv) * p.k_pos.size() * d)
    fail("k must hold heads_kv x k_pos.size() x head_dim elements");
  for (auto pos : p.q_pos)
    if (pos < 0 || pos >= p.seq_len) fail("query position " + std::to_string(pos) + " outside the sequence");
  for (auto pos : p.k_pos)
    if (pos < 0 || pos >= p.seq_len) fail("key position " + std::to_string(pos) + " outside the sequence");
}

double element(const ConstTensor& t, std::size_t i) {
  return t.dtype == DType::f32 ? static_cast<const float*>(t.data)[i]
                               : from_bf16(static_cast<const bf16_bits*>(t.data)[i]);
}

// Scaled score of query row r of head h against local key row j, in fp64;
// the same arithmetic on every rank, so every rank agrees on every bit.
struct Scorer {
  const IndexProblem& p;
  double scale;
  explicit Scorer(const IndexProblem& problem)
      : p(problem),
        scale(problem.softmax_scale > 0 ? problem.softmax_scale : 1.0 / std::sqrt(static_cast<double>(problem.head_dim))) {}
  bool visible(std::size_t r, std::size_t j) const { return p.k_pos[j] <= p.q_pos[r]; }
  double operator()(int h, std::size_t r, std::size_t j) const {
    const auto d = static_cast<std::size_t>(p.head_dim);
    const auto kv = static_cast<std::size_t>(h / (p.heads_q / p.heads_kv));
    const std::size_t qi = (static_cast<std::size_t>(h) * p.q_pos.size() + r) * d;
    const std::size_t ki = (kv * p.k_pos.size() + j) * d;
    double acc = 0;
    for (std::size_t e = 0; e < d; ++e) acc += element(p.q, qi + e) * element(p.k, ki + e);
    return acc * scale;
  }
};

template <class T, class Op>
std::vector<T> combine(std::span<const std::vector<T>> parts, Op op) {
  if (parts.empty()) fail("nothing to combine");
  std::vector<T> out = parts[0];
  for (std::size_t r = 1; r < parts.size(); ++r) {
    if (parts[r].size() != out.size()) fail("parts to combine differ in size");
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = op(out[i], parts[r][i]);
  }
  return out;
}

// Forced entries first, then the best others by score (ties: lower value first),
// while keep(count, cumulative score) says so; returned sorted.
template <class Keep>
std::vector<std::int32_t> choose(std::vector<std::pair<std::int32_t, std::int64_t>> candidates, std::int32_t forced_below,
                                 Keep keep) {
  std::vector<std::int32_t> chosen;
  std::int64_t cumulative = 0;
  std::stable_partition(candidates.begin(), candidates.end(), [&](const auto& c) { return c.first < forced_below; });
  auto rest = std::find_if(candidates.begin(), candidates.end(), [&](const auto& c) { return c.first >= forced_below; });
  for (auto it = candidates.begin(); it != rest; ++it) {
    chosen.push_back(it->first);
    cumulative += it->second;
  }
  std::sort(rest, candidates.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  for (auto it = rest; it != candidates.end() && keep(chosen.size(), cumulative); ++it) {
    chosen.push_back(it->first);
    cumulative += it->second;
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

}  // namespace

std::vector<float> row_max(const IndexProblem& p) {
  validate(p);
  const Scorer score(p);
  const std::size_t rows = p.q_pos.size();
  std::vector<float> out(static_cast<std::size_t>(p.heads_q) * rows, -std::numeric_limits<float>::infinity());
  for (int h = 0; h < p.heads_q; ++h)
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < p.k_pos.size(); ++j)
        if (score.visible(r, j))
          out[static_cast<std::size_t>(h) * rows + r] =
              std::max(out[static_cast<std::size_t>(h) * rows + r], static_cast<float>(score(h, r, j)));
  return out;
}

std::vector<float> combine_row_max(std::span<const std::vector<float>> parts) {
  return combine(parts, [](float a, float b) { return std::max(a, b); });
}

std::vector<std::int64_t> row_sum(const IndexProblem& p, std::span<const float> global_max) {
  validate(p);
  const Scorer score(p);
  const std::size_t rows = p.q_pos.size();
  if (global_max.size() != static_cast<std::size_t>(p.heads_q) * rows) fail("global_max has the wrong size");
  std::vector<std::int64_t> out(global_max.size(), 0);
  for (int h = 0; h < p.heads_q; ++h)
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < p.k_pos.size(); ++j)
        if (score.visible(r, j)) {
          const std::size_t i = static_cast<std::size_t>(h) * rows + r;
          out[i] += std::llround(std::exp(score(h, r, j) - global_max[i]) * kSumOne);
        }
  return out;
}

std::vector<std::int64_t> combine_row_sum(std::span<const std::vector<std::int64_t>> parts) {
  return combine(parts, [](std::int64_t a, std::int64_t b) { return a + b; });
}

KeyScores key_scores(const IndexProblem& p, std::span<const float> global_max, std::span<const std::int64_t> global_sum) {
  validate(p);
  const Scorer score(p);
  const std::size_t rows = p.q_pos.size();
  if (global_max.size() != static_cast<std::size_t>(p.heads_q) * rows || global_sum.size() != global_max.size())
    fail("global_max/global_sum have the wrong size");
  KeyScores out;
  out.columns.resize(static_cast<std::size_t>(p.heads_q));
  out.diagonals.assign(static_cast<std::size_t>(p.heads_q), std::vector<std::int64_t>(static_cast<std::size_t>(p.seq_len), 0));
  for (int h = 0; h < p.heads_q; ++h) {
    auto& cols = out.columns[static_cast<std::size_t>(h)];
    auto& diag = out.diagonals[static_cast<std::size_t>(h)];
    for (std::size_t j = 0; j < p.k_pos.size(); ++j) {
      std::int64_t column = 0;
      for (std::size_t r = 0; r < rows; ++r) {
        if (!score.visible(r, j)) continue;
        const std::size_t i = static_cast<std::size_t>(h) * rows + r;
        const double prob = std::exp(score(h, r, j) - global_max[i]) * kSumOne / static_cast<double>(global_sum[i]);
        const std::int64_t fixed = std::llround(prob * kScoreOne);
        column += fixed;
        diag[static_cast<std::size_t>(p.q_pos[r] - p.k_pos[j])] += fixed;
      }
      cols.emplace_back(p.k_pos[j], column);
    }
  }
  return out;
}

KeyScores combine_key_scores(std::span<const KeyScores> parts) {
  if (parts.empty()) fail("nothing to combine");
  KeyScores out = parts[0];
  for (std::size_t r = 1; r < parts.size(); ++r) {
    if (parts[r].columns.size() != out.columns.size() || parts[r].diagonals.size() != out.diagonals.size())
      fail("key scores to combine differ in head count");
    for (std::size_t h = 0; h < out.columns.size(); ++h) {
      out.columns[h].insert(out.columns[h].end(), parts[r].columns[h].begin(), parts[r].columns[h].end());
      if (parts[r].diagonals[h].size() != out.diagonals[h].size()) fail("key scores differ in sequence length");
      for (std::size_t d = 0; d < out.diagonals[h].size(); ++d) out.diagonals[h][d] += parts[r].diagonals[h][d];
    }
  }
  for (auto& c : out.columns) std::sort(c.begin(), c.end());
  return out;
}

SparseIndex select_index(const KeyScores& scores, const IndexBuildConfig& c, std::int32_t seq_len) {
  if (c.p < 0 || c.p > 1) fail("top-p share must be in [0, 1]");
  if (c.vertical_budget < 0 || c.slash_budget < 0 || c.max_verticals < 0 || c.max_slashes < 0 || c.sink_tokens < 0 ||
      c.local_diagonals < 0)
    fail("budgets and counts must not be negative");
  SparseIndex index;
  index.mode = SparseMode::vertical_slash;
  for (std::size_t h = 0; h < scores.columns.size(); ++h) {
    std::vector<std::pair<std::int32_t, std::int64_t>> diag;
    std::int64_t diag_total = 0, col_total = 0;
    for (std::int32_t d = 0; d < seq_len && static_cast<std::size_t>(d) < scores.diagonals[h].size(); ++d) {
      diag.emplace_back(d, scores.diagonals[h][static_cast<std::size_t>(d)]);
      diag_total += diag.back().second;
    }
    // Sinks are forced whether or not this rank set holds them, so add absent ones.
    auto cols = scores.columns[h];
    for (std::int32_t s = 0; s < std::min(c.sink_tokens, seq_len); ++s)
      if (!std::binary_search(cols.begin(), cols.end(), std::make_pair(s, std::int64_t{0}),
                              [](const auto& a, const auto& b) { return a.first < b.first; }))
        cols.emplace_back(s, 0);
    std::sort(cols.begin(), cols.end());
    for (const auto& col : cols) col_total += col.second;

    VerticalSlash vs;
    if (c.select == IndexBuildConfig::Select::top_k) {
      vs.verticals = choose(cols, c.sink_tokens, [&](std::size_t n, std::int64_t) { return n < static_cast<std::size_t>(c.vertical_budget); });
      vs.slashes = choose(diag, c.local_diagonals, [&](std::size_t n, std::int64_t) { return n < static_cast<std::size_t>(c.slash_budget); });
    } else {
      auto until = [&](std::int64_t total, int cap) {
        return [=, &c](std::size_t n, std::int64_t cum) {
          return n < static_cast<std::size_t>(cap) && static_cast<double>(cum) < c.p * static_cast<double>(total);
        };
      };
      vs.verticals = choose(cols, c.sink_tokens, until(col_total, c.max_verticals));
      vs.slashes = choose(diag, c.local_diagonals, until(diag_total, c.max_slashes));
    }
    index.vertical_slash.push_back(std::move(vs));
  }
  return index;
}

SparseIndex build_index(const IndexProblem& p, const IndexBuildConfig& config) {
  const auto mx = row_max(p);
  const auto sum = row_sum(p, mx);
  return select_index(key_scores(p, mx, sum), config, p.seq_len);
}

}  // namespace rm::kernels
