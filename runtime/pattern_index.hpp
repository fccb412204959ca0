#pragma once
// The bridge from an experiment's static sparsity pattern to the kernels'
// index: the heads sim/sparsity draws for a decoder layer (same spec, seed
// and draws; built by sim/sparsity's own API, never re-drawn here), turned
// into the kernels::SparseIndex that executes exactly the mask the model
// counted — so the runtime runs the very attention the model predicted.
// Kinds the kernels cannot run exactly, and dynamic patterns (whose index the
// Schedule's index_build ops make at run time), are refused.
#include <string>

#include "kernels/tile.hpp"
#include "sim/config/experiment.hpp"
#include "sim/sparsity/sparsity_model.hpp"

namespace rm::runtime {

// One entry per global query head (model.heads) for `layer`. Dense causal and
// dense full give SparseIndex{dense}; vertical-slash heads give
// VerticalSlash{verticals: key positions, slashes: token offsets q - k (the
// offsets the heads were built from, HeadPattern::slash_offsets())};
// block-sparse heads (block_tokens a multiple of 128) give block_mask rows.
// Throws rm::ConfigError naming the pattern and kind for sliding-window,
// A-shape and document masks, dynamic patterns, layers that mix kinds, and a
// layer outside the model.
kernels::SparseIndex pattern_index(const rm::Experiment& e, int layer);
// False for the non-causal (full) dense/document kinds.
bool pattern_causal(const rm::Experiment& e);

// The experiment's sparsity model, built as the model builds it
// (pipeline::build_patterns' context); lets a caller that needs many layers
// build it once and call the overload below per layer.
sparsity::SparsityModel pattern_model(const rm::Experiment& e);
// pattern_index from a model already built; `where` prefixes error messages.
kernels::SparseIndex pattern_index(const sparsity::SparsityModel& m, int layer, const std::string& where);

}  // namespace rm::runtime
