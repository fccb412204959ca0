// Synthetic calibration runs for the calibrate tests: a Schedule of an
// embedded experiment, "measured" by simulating it with known parameters
// (optionally with seeded multiplicative noise on every op's duration).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "sim/calibrate/params.hpp"
#include "sim/calibrate/runs.hpp"
#include "sim/config/config_store.hpp"
#include "sim/engine/engine.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "sim/topology/topology.hpp"

namespace rm::calibrate::synth {

inline Experiment experiment(const std::string& name, const std::vector<std::string>& sets) {
  return load_experiment(ConfigStore(), name, sets);
}

// The experiment's own parameters (its cluster and kernel).
inline CostParams params_of(const Experiment& e) { return {e.cluster, e.kernel}; }

inline Run synthetic_run(const std::string& name, const std::vector<std::string>& sets, const CostParams& truth,
                         double noise = 0, uint64_t seed = 1) {
  Run r;
  r.name = name + " " + [&] {
    std::string s;
    for (const auto& x : sets) s += x + " ";
    return s;
  }();
  r.experiment = experiment(name, sets);
  pipeline::Session session;
  r.schedule = session.schedule(r.experiment);
  const Cluster c = apply(r.experiment.cluster, truth.cluster);
  const topology::Topology topo(c);
  const cost::CostModel m(c, truth.kernel,
                          cost::TileShape{r.experiment.workload.block_q, r.experiment.workload.block_k,
                                          r.experiment.model.head_dim});
  r.measured = engine::simulate(r.schedule, topo, m, engine::EngineKind::analytic);
  if (noise > 0) {
    std::mt19937_64 rng(seed);
    for (traces::Event& e : r.measured.events) {
      const double u = double(rng() >> 11) / double(uint64_t(1) << 53);  // [0, 1)
      e.end_s = e.start_s + e.duration_s() * (1 + noise * (2 * u - 1));
    }
  }
  r.measured.metadata["schedule_hash"] = schedule::schedule_hash(r.schedule);
  return r;
}

// cpu-2core-1x2 routes its two ranks through the PCIe host or the NVSwitch
// at nearly equal cost; a slow PCIe settles it, so every route is the
// NVSwitch's with the base and the known parameters alike.
inline const std::vector<std::string> kNvswitchOnly{"cluster.pcie.bandwidth_GBps=1"};
inline std::vector<std::string> with_nvswitch(std::vector<std::string> sets) {
  sets.insert(sets.begin(), kNvswitchOnly.begin(), kNvswitchOnly.end());
  return sets;
}

// Known parameters unlike cpu-2core-1x2's: what the fit must recover.
inline CostParams truth_from(CostParams p) {
  p.cluster.cost.gemm_efficiency = 0.5;
  p.cluster.cost.elementwise_efficiency = 0.6;
  p.cluster.cost.kernel_launch_us = 20;
  p.cluster.cost.nvlink_efficiency = 0.6;  // 3 GB/s of the 5
  p.cluster.intra.latency_us = 2;
  for (RateCurve* c : {&p.kernel.fwd_full, &p.kernel.fwd_causal}) for (RatePoint& x : *c) x.tflops *= 0.7;
  for (RateCurve* c : {&p.kernel.bwd_full, &p.kernel.bwd_causal}) for (RatePoint& x : *c) x.tflops *= 0.75;
  return p;
}

}  // namespace rm::calibrate::synth
