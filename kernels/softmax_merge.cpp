#include "kernels/softmax_merge.hpp"

#include <stdexcept>
#include <string>

namespace rm::kernels {

void merge_partial(std::span<float> acc_out, std::span<float> acc_lse, std::span<const float> part_out,
                   std::span<const float> part_lse, int head_dim) {
  const auto rows = acc_lse.size();
  if (head_dim <= 0 || part_lse.size() != rows || acc_out.size() != rows * static_cast<std::size_t>(head_dim) ||
      part_out.size() != acc_out.size())
    throw std::invalid_argument("merge_partial: sizes do not match (rows " + std::to_string(rows) + ", head_dim " +
                                std::to_string(head_dim) + ", out " + std::to_string(acc_out.size()) + " and " +
                                std::to_string(part_out.size()) + ", part lse " + std::to_string(part_lse.size()) +
                                ")");
  const auto d = static_cast<std::size_t>(head_dim);
  for (std::size_t r = 0; r < rows; ++r) {
    const MergeWeights w = merge_weights(acc_lse[r], part_lse[r]);
    float* o = acc_out.data() + r * d;
    const float* p = part_out.data() + r * d;
    for (std::size_t i = 0; i < d; ++i) o[i] = w.a * o[i] + w.b * p[i];
    acc_lse[r] = w.lse;
  }
}

}  // namespace rm::kernels
