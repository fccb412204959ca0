// Held-out validation: how well parameters predict runs they were not fitted
// on — each run's step time re-simulated (the analytic engine, the run's own
// Schedule and cluster shape with the parameters applied) against its
// measured step, and per op kind the model's op times against the measured
// ones — before and after calibration.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "sim/calibrate/fit.hpp"

namespace rm::calibrate {

// The run's step time predicted with p: the analytic engine's makespan.
double predict_step_s(const Run& r, const CostParams& p);

struct StepCheck {
  std::string run;
  double measured_s = 0, before_s = 0, after_s = 0;
  double error_before() const { return (before_s - measured_s) / measured_s; }
  double error_after() const { return (after_s - measured_s) / measured_s; }
};

struct KindCheck {
  std::string kind;
  int observations = 0;
  double measured_s = 0, before_s = 0, after_s = 0;  // summed over the kind's observations
  double mape_before = 0, mape_after = 0;            // mean |model - measured| / measured over them
};

// Per op kind, in kind-name order, of observations with model times before and after.
std::vector<KindCheck> kind_checks(std::span<const Observation> obs, std::span<const double> before_s,
                                   std::span<const double> after_s);

struct Validation {
  std::vector<StepCheck> steps;
  double mape_before = 0, mape_after = 0;  // step time, over steps
  std::vector<KindCheck> kinds;
};

Validation validate(std::span<const Run* const> held_out, const CostParams& before, const CostParams& after);

}  // namespace rm::calibrate
