// A transformer model's shape as its JSON file describes it (configs/models/).
#pragma once

#include <cstdint>
#include <string>

#include "sim/config/json_reader.hpp"

namespace rm {

struct Model {
  std::string name;
  int layers = 0;
  int64_t hidden = 0;
  int heads = 0;     // query heads
  int kv_heads = 0;  // key/value heads (GQA when < heads)
  int head_dim = 0;
  int64_t intermediate = 0;
  int64_t vocab = 0;
  bool tied_embeddings = false;

  // Parameters of one decoder layer and of the whole model (SwiGLU MLP, RMSNorm).
  int64_t layer_params() const;
  int64_t layer_norm_params() const { return 2 * hidden; }  // of layer_params(): the two RMSNorm weights
  int64_t params() const;
};

Model parse_model(const JsonReader& r);

}  // namespace rm
