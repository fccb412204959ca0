#include "sim/config/model.hpp"

#include <fmt/format.h>

namespace rm {

int64_t Model::layer_params() const {
  const int64_t q = hidden * int64_t(heads) * head_dim;
  const int64_t kv = 2 * hidden * int64_t(kv_heads) * head_dim;
  const int64_t o = int64_t(heads) * head_dim * hidden;
  const int64_t mlp = 3 * hidden * intermediate;  // gate, up, down
  const int64_t norms = layer_norm_params();
  return q + kv + o + mlp + norms;
}

int64_t Model::params() const {
  const int64_t emb = vocab * hidden * (tied_embeddings ? 1 : 2);
  return int64_t(layers) * layer_params() + emb + hidden;
}

Model parse_model(const JsonReader& r) {
  Model m;
  m.name = r.str("name");
  m.layers = static_cast<int>(r.integer("layers", 1, 10000));
  m.hidden = r.integer("hidden", 1, int64_t(1) << 20);
  m.heads = static_cast<int>(r.integer("heads", 1, 4096));
  m.kv_heads = static_cast<int>(r.integer("kv_heads", 1, 4096));
  m.head_dim = static_cast<int>(r.integer("head_dim", 1, 1024));
  m.intermediate = r.integer("intermediate", 1, int64_t(1) << 24);
  m.vocab = r.integer("vocab", 1, int64_t(1) << 24);
  m.tied_embeddings = r.boolean_or("tied_embeddings", false);
  if (m.heads % m.kv_heads != 0)
    r.fail("kv_heads", fmt::format("expected a divisor of heads ({}), got {}", m.heads, m.kv_heads));
  r.finish();
  return m;
}

}  // namespace rm
