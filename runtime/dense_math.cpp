#include "runtime/dense_math.hpp"

#include <cblas.h>

#include <algorithm>
#include <cctype>

namespace rm::runtime {

void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, const float* b, float beta, float* c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, blasint(m), blasint(n),
              blasint(k), 1.f, a, blasint(ta ? m : k), b, blasint(tb ? k : n), beta, c, blasint(n));
}

bool is_layer_input(std::string_view name) {
  return name.size() > 1 && name[0] == 'x' &&
         std::all_of(name.begin() + 1, name.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

}  // namespace rm::runtime
