// The least-squares fit: what each measured op says about the cost model's
// parameters, and the parameters that make the model's op times match the
// measured ones best in relative terms (projected Levenberg-Marquardt,
// Eigen's QR for each step; docs/calibrate.md). The model of an op's time is
// the CostModel's contention-free formula for it (one source of truth):
//   compute op:  CostModel::compute_seconds
//   send/recv:   CostModel::transfer_seconds over the pair's route
//   collective:  cost::collective_seconds with the plan's slowest hop
//                (largest route latency, lowest route rate over
//                cost::collective_pairs: the pairs the engines' transfers use)
// An observation is a compute op, a matched send/recv pair or a collective
// call; a pair's or call's measured time is its shortest member's, since the
// runtime times each member from when it was posted and the last to post
// waited for no one.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "sim/calibrate/params.hpp"
#include "sim/calibrate/runs.hpp"
#include "sim/schedule/comm_matching.hpp"

namespace rm::calibrate {

struct Observation {
  size_t run = 0;           // index into the runs given
  schedule::OpId op = -1;   // the compute op, the pair's send, the call's first member
  std::string kind;         // the op kind ("attn_fwd", "send", "all_to_all", ...)
  double measured_s = 0;
};

// A run's observations (run index `run`); ops whose measured time is 0 and
// collectives of one member carry no information and are left out.
std::vector<Observation> observations(const Run& r, size_t run);

// The model's seconds for each observation, every run priced on its own
// cluster shape with p's fitted fields (apply) and p's kernel. Transfers take
// the routes the Topology of `routes` finds (default: p's own): the fit holds
// them at the base's, so that a latency moving does not reroute mid-fit.
std::vector<double> model_seconds(std::span<const Run* const> runs, std::span<const Observation> obs,
                                  const CostParams& p, const CostParams* routes = nullptr);

struct ParamFit {
  ParamRef ref;
  std::string name;
  double base = 0, fitted = 0;
  double std_error = 0;  // from the residuals' variance and (J^T J)^-1; NaN when undetermined or no dof
  int rows = 0;          // observations whose time depends on it
  bool exercised = false;  // some observation depends on it (else it stays at base)
  bool determined = false; // the observations pin it (not a combination of others)
  bool at_bound = false;   // clamped to its physical range
  // A kernel table point no observation reaches, moved with the nearest fitted
  // point of its curve (its fitted / base ratio), so the curve keeps its shape:
  // a kernel measured 3x slower at 1K tokens is taken as 3x slower at 512 too.
  bool scaled = false;
};

struct FitResult {
  CostParams fitted;
  std::vector<ParamFit> params;
  std::vector<Observation> observations;
  std::vector<double> before_s, after_s;  // model seconds, per observation
  int iterations = 0;
  double rms_rel_before = 0, rms_rel_after = 0;  // root mean square of (model - measured) / measured
  double rms_log_before = 0, rms_log_after = 0;  // of log(model / measured): what the fit minimises
  // Observed transfers (pairs and collective ring hops) that the fitted
  // parameters' Topology routes differently from the base's: their fitted
  // times assumed the base route, so simulating with the result may differ.
  int rerouted = 0;
};

struct FitOptions {
  int max_iterations = 200;
};

// Fits base's parameters to the runs' observations. Throws ConfigError when
// there is no run or no observation, or when the runs disagree on the GPU
// model or the attention kernel (one calibration is one machine's).
FitResult fit(std::span<const Run* const> runs, const CostParams& base, const FitOptions& o = {});

}  // namespace rm::calibrate
