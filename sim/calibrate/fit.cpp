#include "sim/calibrate/fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include <Eigen/Dense>
#include <fmt/format.h>

#include "sim/config/json_reader.hpp"
#include "sim/cost/collective_plan.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/topology/topology.hpp"

namespace rm::calibrate {

using schedule::OpKind;

std::vector<Observation> observations(const Run& r, size_t run) {
  const schedule::Schedule& s = r.schedule;
  std::vector<double> dur(s.ops.size(), 0.0);
  for (const traces::Event& e : r.measured.events)
    if (e.op >= 0 && size_t(e.op) < dur.size()) dur[size_t(e.op)] = e.duration_s();
  const schedule::CommMatching m = schedule::match_comms(s);
  std::vector<Observation> out;
  auto add = [&](schedule::OpId op, double t) {
    if (t > 0) out.push_back({run, op, std::string(schedule::to_string(s.ops[size_t(op)].kind)), t});
  };
  for (const schedule::Op& op : s.ops) {
    if (schedule::is_compute(op.kind)) {
      add(op.id, dur[size_t(op.id)]);
    } else if (op.kind == OpKind::send) {
      const schedule::OpId peer = m.partner[size_t(op.id)];
      if (peer >= 0) add(op.id, std::min(dur[size_t(op.id)], dur[size_t(peer)]));
    } else if (schedule::is_collective(op.kind)) {
      const auto& call = m.calls[size_t(m.call_of[size_t(op.id)])];
      if (call.size() < 2 || call.front() != op.id) continue;  // once per call, by its first member
      double t = std::numeric_limits<double>::infinity();
      for (schedule::OpId x : call)
        if (x >= 0) t = std::min(t, dur[size_t(x)]);
      add(op.id, t);
    }
  }
  return out;
}

namespace {

// One run priced with some parameters: its topology (link values), the
// topology whose routes it takes, and its cost model.
struct Priced {
  Cluster cluster;
  topology::Topology topo;
  std::unique_ptr<topology::Topology> route_topo;  // null: topo's own routes
  cost::CostModel model;
  Priced(const Run& r, const CostParams& p, const CostParams* routes)
      : cluster(apply(r.experiment.cluster, p.cluster)),
        topo(cluster),
        route_topo(routes ? std::make_unique<topology::Topology>(apply(r.experiment.cluster, routes->cluster)) : nullptr),
        model(cluster, p.kernel,
              cost::TileShape{r.experiment.workload.block_q, r.experiment.workload.block_k, r.experiment.model.head_dim}) {}
  const topology::Topology& routes() const { return route_topo ? *route_topo : topo; }
};

int gpu_of(const schedule::Schedule& s, int rank) { return s.ranks[size_t(rank)].gpu; }

// The (src, dst) GPU pairs an observation's transfers cross: a pair's route,
// or the member pairs of the collective's plan (cost::collective_pairs: a ring's
// neighbours, every pair of a pairwise all-to-all, a broadcast's chain).
std::vector<std::pair<int, int>> hops(const schedule::Schedule& s, const schedule::Op& op) {
  if (op.kind == OpKind::send || op.kind == OpKind::recv) return {{gpu_of(s, op.rank), gpu_of(s, op.peer)}};
  std::vector<std::pair<int, int>> out;
  if (!schedule::is_collective(op.kind)) return out;
  const schedule::Group& g = s.groups[size_t(op.group)];
  const int root = op.kind == OpKind::broadcast
                       ? static_cast<int>(std::find(g.ranks.begin(), g.ranks.end(), op.peer) - g.ranks.begin())
                       : 0;
  for (const auto& [a, b] : cost::collective_pairs(op.kind, static_cast<int>(g.ranks.size()), root))
    out.emplace_back(gpu_of(s, g.ranks[size_t(a)]), gpu_of(s, g.ranks[size_t(b)]));
  return out;
}

double op_model_seconds(const Run& r, const Priced& pr, schedule::OpId id) {
  const schedule::Schedule& s = r.schedule;
  const schedule::Op& op = s.ops[size_t(id)];
  if (schedule::is_compute(op.kind)) return pr.model.compute_seconds(s, op);
  const auto route = [&](std::pair<int, int> h) { return pr.model.route_cost(pr.topo, pr.routes().route(h.first, h.second)); };
  const auto hs = hops(s, op);
  if (!schedule::is_collective(op.kind)) return cost::CostModel::transfer_seconds(route(hs.front()), double(s.desc(op).bytes));
  double lat = 0, rate = std::numeric_limits<double>::infinity();
  for (const auto& h : hs) {
    const auto c = route(h);
    lat = std::max(lat, c.latency_s);
    rate = std::min(rate, c.rate_Bps);
  }
  const int members = static_cast<int>(s.groups[size_t(op.group)].ranks.size());
  return cost::collective_seconds(op.kind, members, double(s.desc(op).bytes), lat, rate);
}

void check_same_machine(std::span<const Run* const> runs, const CostParams& base) {
  for (const Run* r : runs) {
    if (r->experiment.cluster.gpu.model != base.cluster.gpu.model)
      throw ConfigError(fmt::format("{}: its cluster's GPU is {}, the calibrated cluster's {} (calibrate one machine at a time)",
                                    r->name, r->experiment.cluster.gpu.model, base.cluster.gpu.model));
    if (r->experiment.kernel.name != base.kernel.name)
      throw ConfigError(fmt::format("{}: it runs attention kernel {}, the others {} (calibrate one kernel at a time)",
                                    r->name, r->experiment.kernel.name, base.kernel.name));
  }
}

}  // namespace

std::vector<double> model_seconds(std::span<const Run* const> runs, std::span<const Observation> obs,
                                  const CostParams& p, const CostParams* routes) {
  std::vector<std::unique_ptr<Priced>> priced(runs.size());
  std::vector<double> out;
  out.reserve(obs.size());
  for (const Observation& o : obs) {
    auto& pr = priced[o.run];
    if (!pr) pr = std::make_unique<Priced>(*runs[o.run], p, routes);
    out.push_back(op_model_seconds(*runs[o.run], *pr, o.op));
  }
  return out;
}

FitResult fit(std::span<const Run* const> runs, const CostParams& base, const FitOptions& opt) {
  if (runs.empty()) throw ConfigError("calibrate: no runs to fit (give --run SCHEDULE=MEASURED or --runs DIR)");
  check_same_machine(runs, base);
  FitResult res;
  for (size_t i = 0; i < runs.size(); ++i)
    for (Observation& o : observations(*runs[i], i)) res.observations.push_back(std::move(o));
  if (res.observations.empty()) throw ConfigError("calibrate: the runs hold no timed op to fit");
  const std::vector<Observation>& obs = res.observations;
  const auto refs = all_params(base.kernel);
  const size_t k = refs.size(), m = obs.size();
  const auto K = static_cast<Eigen::Index>(k), M = static_cast<Eigen::Index>(m);

  // Scaled unknowns: x_j = value_j / scale_j, so every column is of order one.
  std::vector<double> scale(k);
  for (size_t j = 0; j < k; ++j) scale[j] = std::max(std::abs(get(base, refs[j])), unit(refs[j]));
  auto params_at = [&](const Eigen::VectorXd& x) {
    CostParams p = base;
    for (size_t j = 0; j < k; ++j) set(p, refs[j], x[Eigen::Index(j)] * scale[j]);
    return p;
  };
  auto clamp = [&](Eigen::VectorXd x) {
    for (size_t j = 0; j < k; ++j) {
      const Range r = range(refs[j], base);
      x[Eigen::Index(j)] = std::clamp(x[Eigen::Index(j)], r.lo / scale[j], r.hi / scale[j]);
    }
    return x;
  };
  // Residuals are log(model / measured): symmetric, so noisy identical ops fit
  // their geometric mean. Relative to the measured time, (model - measured) /
  // measured, least squares fits them low (an error is at most -100% below but
  // unbounded above).
  auto residuals = [&](const Eigen::VectorXd& x) {
    const std::vector<double> t = model_seconds(runs, obs, params_at(x), &base);
    Eigen::VectorXd r(M);
    for (size_t i = 0; i < m; ++i) r[Eigen::Index(i)] = std::log(std::max(t[i], 1e-300) / obs[i].measured_s);
    return r;
  };
  // Central differences (one-sided at a bound); a column that stays exactly 0
  // is a parameter no observation depends on.
  auto jacobian = [&](const Eigen::VectorXd& x) {
    Eigen::MatrixXd J(M, K);
    for (size_t j = 0; j < k; ++j) {
      const Range rg = range(refs[j], base);
      const double h = 1e-6;
      Eigen::VectorXd hi = x, lo = x;
      hi[Eigen::Index(j)] = std::min(x[Eigen::Index(j)] + h, rg.hi / scale[j]);
      lo[Eigen::Index(j)] = std::max(x[Eigen::Index(j)] - h, rg.lo / scale[j]);
      J.col(Eigen::Index(j)) = (residuals(hi) - residuals(lo)) / (hi[Eigen::Index(j)] - lo[Eigen::Index(j)]);
    }
    return J;
  };

  Eigen::VectorXd x(K);
  for (size_t j = 0; j < k; ++j) x[Eigen::Index(j)] = get(base, refs[j]) / scale[j];
  x = clamp(x);
  res.before_s = model_seconds(runs, obs, base);
  double last_cost = 0;
  Eigen::MatrixXd J;
  {
    Eigen::VectorXd r = residuals(x);
    double cost = r.squaredNorm();
    double lambda = 1e-3;
    J = jacobian(x);
    for (int it = 0; it < opt.max_iterations && cost > 1e-28; ++it) {
      ++res.iterations;
      // min |J d + r|^2 + lambda |D d|^2 with D the column norms (Marquardt's
      // scaling): the augmented least-squares problem, by Eigen's pivoted QR.
      const Eigen::VectorXd colnorm = J.colwise().norm();
      Eigen::MatrixXd A(M + K, K);
      Eigen::VectorXd b = Eigen::VectorXd::Zero(M + K);
      A.topRows(M) = J;
      A.bottomRows(K) = (std::sqrt(lambda) * colnorm.cwiseMax(1e-12)).asDiagonal();
      b.head(M) = -r;
      Eigen::VectorXd d = A.colPivHouseholderQr().solve(b);
      for (size_t j = 0; j < k; ++j)
        if (colnorm[Eigen::Index(j)] == 0) d[Eigen::Index(j)] = 0;  // not exercised: stays
      const Eigen::VectorXd xn = clamp(x + d);
      const Eigen::VectorXd rn = residuals(xn);
      const double cn = rn.squaredNorm();
      if (cn < cost) {
        const double step = (xn - x).cwiseAbs().maxCoeff(), gain = cost - cn;
        x = xn;
        r = rn;
        cost = cn;
        lambda = std::max(lambda / 3, 1e-12);
        if (step < 1e-13 || gain <= 1e-9 * cost) break;  // converged: the last step changed nothing that matters
        J = jacobian(x);
      } else {
        lambda *= 4;
        if (lambda > 1e12) break;  // no step lowers the cost: a minimum (or a bound)
      }
    }
    last_cost = cost;
  }
  res.fitted = params_at(x);
  // Table points no call reaches follow the nearest fitted point of their
  // curve (by index; the nearer lower one on a tie); a curve with none stays.
  J = jacobian(x);
  const auto exercised = [&](size_t j) { return J.col(Eigen::Index(j)).cwiseAbs().maxCoeff() > 0; };
  std::vector<bool> scaled(k, false);
  for (size_t j = 0; j < k; ++j) {
    if (refs[j].kind != ParamKind::kernel_rate || exercised(j)) continue;
    size_t best = k;
    int best_dist = 0;
    for (size_t i = 0; i < k; ++i) {
      const ParamRef& q = refs[i];
      if (q.kind != ParamKind::kernel_rate || q.backward != refs[j].backward || q.causal != refs[j].causal || !exercised(i))
        continue;
      const int dist = std::abs(q.point - refs[j].point);
      if (best == k || dist < best_dist) best = i, best_dist = dist;
    }
    if (best == k) continue;
    const Range rg = range(refs[j], base);
    set(res.fitted, refs[j], std::clamp(get(base, refs[j]) * get(res.fitted, refs[best]) / get(base, refs[best]), rg.lo, rg.hi));
    scaled[j] = true;
  }
  res.after_s = model_seconds(runs, obs, res.fitted);
  auto rms = [&](const std::vector<double>& t) {
    double s = 0;
    for (size_t i = 0; i < m; ++i) s += std::pow((t[i] - obs[i].measured_s) / obs[i].measured_s, 2);
    return std::sqrt(s / double(m));
  };
  auto rms_log = [&](const std::vector<double>& t) {
    double s = 0;
    for (size_t i = 0; i < m; ++i) s += std::pow(std::log(std::max(t[i], 1e-300) / obs[i].measured_s), 2);
    return std::sqrt(s / double(m));
  };
  res.rms_log_before = rms_log(res.before_s);
  res.rms_log_after = rms_log(res.after_s);
  res.rms_rel_before = rms(res.before_s);
  for (size_t i = 0; i < runs.size(); ++i) {
    const topology::Topology before(apply(runs[i]->experiment.cluster, base.cluster));
    const topology::Topology after(apply(runs[i]->experiment.cluster, res.fitted.cluster));
    for (const Observation& o : obs)
      if (o.run == i)
        for (const auto& [a, b] : hops(runs[i]->schedule, runs[i]->schedule.ops[size_t(o.op)]))
          res.rerouted += before.route(a, b).links != after.route(a, b).links;
  }
  res.rms_rel_after = rms(res.after_s);

  // Standard errors: sigma^2 (J^T J)^-1 over the exercised columns, by SVD; a
  // parameter with a component in J's null space is undetermined.
  std::vector<Eigen::Index> active;
  for (size_t j = 0; j < k; ++j)
    if (J.col(Eigen::Index(j)).cwiseAbs().maxCoeff() > 0) active.push_back(Eigen::Index(j));
  Eigen::MatrixXd Ja(M, static_cast<Eigen::Index>(active.size()));
  for (size_t a = 0; a < active.size(); ++a) Ja.col(Eigen::Index(a)) = J.col(active[a]);
  std::vector<double> se(k, std::numeric_limits<double>::quiet_NaN());
  std::vector<bool> determined(k, false);
  if (!active.empty()) {
    Eigen::JacobiSVD<Eigen::MatrixXd> svd(Ja, Eigen::ComputeFullV);
    const Eigen::VectorXd sv = svd.singularValues();
    const Eigen::MatrixXd V = svd.matrixV();
    const double tol = 1e-9 * std::max(sv.size() ? sv[0] : 0.0, 1e-300);
    const double dof = double(m) - double(active.size());
    const double sigma2 = dof > 0 ? last_cost / dof : std::numeric_limits<double>::quiet_NaN();
    for (size_t a = 0; a < active.size(); ++a) {
      double var = 0, null = 0;
      for (Eigen::Index l = 0; l < V.cols(); ++l) {
        const double v = V(Eigen::Index(a), l);
        if (l < sv.size() && sv[l] > tol) var += v * v / (sv[l] * sv[l]);
        else null += v * v;
      }
      const size_t j = size_t(active[a]);
      determined[j] = null < 1e-12;
      if (determined[j]) se[j] = scale[j] * std::sqrt(var * sigma2);
    }
  }
  for (size_t j = 0; j < k; ++j) {
    ParamFit pf;
    pf.ref = refs[j];
    pf.name = param_name(refs[j], base.kernel);
    pf.base = get(base, refs[j]);
    pf.fitted = get(res.fitted, refs[j]);
    pf.std_error = se[j];
    for (size_t i = 0; i < m; ++i) pf.rows += J(Eigen::Index(i), Eigen::Index(j)) != 0;
    pf.exercised = pf.rows > 0;
    pf.scaled = scaled[j];
    pf.determined = determined[j];
    const Range rg = range(refs[j], base);
    pf.at_bound = pf.exercised && (pf.fitted <= rg.lo || pf.fitted >= rg.hi);
    res.params.push_back(pf);
  }
  return res;
}

}  // namespace rm::calibrate
