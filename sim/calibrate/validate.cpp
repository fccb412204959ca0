#include "sim/calibrate/validate.hpp"

#include <cmath>
#include <map>

#include "sim/engine/engine.hpp"
#include "sim/topology/topology.hpp"

namespace rm::calibrate {

double predict_step_s(const Run& r, const CostParams& p) {
  const Cluster c = apply(r.experiment.cluster, p.cluster);
  const topology::Topology topo(c);
  const cost::CostModel model(
      c, p.kernel, cost::TileShape{r.experiment.workload.block_q, r.experiment.workload.block_k, r.experiment.model.head_dim});
  return engine::simulate(r.schedule, topo, model, engine::EngineKind::analytic).makespan_s();
}

std::vector<KindCheck> kind_checks(std::span<const Observation> obs, std::span<const double> before_s,
                                   std::span<const double> after_s) {
  std::map<std::string, KindCheck> by;
  for (size_t i = 0; i < obs.size(); ++i) {
    KindCheck& k = by[obs[i].kind];
    k.kind = obs[i].kind;
    ++k.observations;
    k.measured_s += obs[i].measured_s;
    k.before_s += before_s[i];
    k.after_s += after_s[i];
    k.mape_before += std::abs(before_s[i] - obs[i].measured_s) / obs[i].measured_s;
    k.mape_after += std::abs(after_s[i] - obs[i].measured_s) / obs[i].measured_s;
  }
  std::vector<KindCheck> out;
  for (auto& [name, k] : by) {
    k.mape_before /= k.observations;
    k.mape_after /= k.observations;
    out.push_back(k);
  }
  return out;
}

Validation validate(std::span<const Run* const> held_out, const CostParams& before, const CostParams& after) {
  Validation v;
  std::vector<Observation> obs;
  for (size_t i = 0; i < held_out.size(); ++i) {
    const Run& r = *held_out[i];
    StepCheck s{r.name, measured_step_s(r.measured), predict_step_s(r, before), predict_step_s(r, after)};
    v.mape_before += std::abs(s.error_before());
    v.mape_after += std::abs(s.error_after());
    v.steps.push_back(s);
    for (Observation& o : observations(r, i)) obs.push_back(std::move(o));
  }
  if (!v.steps.empty()) {
    v.mape_before /= double(v.steps.size());
    v.mape_after /= double(v.steps.size());
  }
  v.kinds = kind_checks(obs, model_seconds(held_out, obs, before), model_seconds(held_out, obs, after));
  return v;
}

}  // namespace rm::calibrate
