// runtime_cuda_fake_run: the cuda backend's multi-process path (NCCL, one rank per
// process) on the fake device, whose NCCL is carried by MPI. Run under mpirun by
// cuda_backend_fake_test.cpp:
//   mpirun -np N runtime_cuda_fake_run DISTRIBUTED.json SINGLE.json
// Every rank runs its share twice (a warm-up, then the measured pass); rank 0
// gathers the outputs and compares them with the single-rank Schedule run by the
// cpu backend's op semantics (CpuCompute). Exit 0 when they agree within 2e-2 and
// every op starts after its dependencies end; 1 otherwise, naming what differed.
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "fake_device.hpp"
#include "runtime/buffer_instances.hpp"
#include "runtime/cpu_compute.hpp"
#include "runtime/cuda/cuda_backend.hpp"
#include "runtime/inputs.hpp"
#include "runtime/layouts.hpp"
#include "runtime/world.hpp"
#include "sim/config/config_store.hpp"
#include "sim/config/experiment.hpp"
#include "sim/schedule/schedule_file.hpp"

namespace rm::runtime {
namespace {

using Key = std::tuple<int, int, int64_t, int32_t, int32_t>;  // content, part, batch, head, token

void add(std::map<Key, std::vector<float>>& out, const std::vector<OutputSlice>& slices, int64_t B) {
  for (const OutputSlice& sl : slices) {
    const Layout& l = sl.layout;
    const int parts = l.kv_like() ? 2 : 1;
    const int64_t rows = parts * B * int64_t(l.heads.size()) * int64_t(l.tokens.size());
    const int64_t width = rows ? int64_t(sl.values.size()) / rows : 0;
    for (int part = 0; part < parts; ++part)
      for (int64_t b = 0; b < B; ++b)
        for (size_t h = 0; h < l.heads.size(); ++h)
          for (size_t t = 0; t < l.tokens.size(); ++t) {
            const int64_t row = l.row(part, b, int64_t(h), int64_t(t), B);
            out[{int(l.content), part, b, l.heads[h], l.tokens[t]}].assign(sl.values.begin() + row * width,
                                                                          sl.values.begin() + (row + 1) * width);
          }
  }
}

struct Loaded {
  schedule::Schedule s;
  Experiment e;
  std::unique_ptr<schedule::RunPlan> plan;
  std::unique_ptr<BufferInstances> in;
  std::unique_ptr<Layouts> layouts;
  explicit Loaded(const std::string& path) : s(schedule::read_schedule(path)) {
    e = parse_experiment(s.experiment, path, "", ConfigStore{});
    plan = std::make_unique<schedule::RunPlan>(s);
    in = std::make_unique<BufferInstances>(s);
    layouts = std::make_unique<Layouts>(s, plan->match, e.workload.batch, e.model.head_dim);
  }
};

int run(int argc, char** argv) {
  World world(&argc, &argv);
  if (argc != 3) return std::fprintf(stderr, "usage: runtime_cuda_fake_run DISTRIBUTED.json SINGLE.json\n"), 2;
  Loaded d(argv[1]);
  LaunchOptions o;
  o.schedule = argv[1];
  CudaBackend b(CudaInputs{d.s, d.e, *d.plan, *d.in, *d.layouts}, world, o);
  b.connect(world);
  b.seed(1);
  fake::set_seed(uint64_t(world.rank()) + 11);
  b.run_once();
  const std::vector<OpSample> times = b.run_once();
  b.download();
  int bad = 0;
  std::map<schedule::OpId, const OpSample*> of;
  for (const OpSample& t : times) of[t.op] = &t;
  for (const auto& op : d.s.ops) {
    if (op.rank != world.rank()) continue;
    if (!of.count(op.id)) {
      std::fprintf(stderr, "%s has no sample\n", schedule::describe(d.s, op.id).c_str()), ++bad;
      continue;
    }
    for (schedule::OpId dep : op.deps)
      if (of.at(dep)->end_s > of.at(op.id)->start_s)
        std::fprintf(stderr, "%s starts before %s ends\n", schedule::describe(d.s, op.id).c_str(),
                     schedule::describe(d.s, dep).c_str()),
            ++bad;
  }
  const auto all = world.gather(pack(read_outputs(d.s, *d.layouts, *d.in, b.host(world.rank()))));
  if (!world.all(bad == 0)) return 1;
  if (world.rank() != 0) return 0;

  std::map<Key, std::vector<float>> got, want;
  for (const std::string& bytes : all) add(got, unpack_outputs(bytes), d.e.workload.batch);
  Loaded r(argv[2]);
  TensorStore store(r.s, 0, r.in->layers());
  seed_inputs(r.s, *r.layouts, store, 1);
  CpuCompute compute(r.s, r.e, *r.in, store);
  compute.prepare();
  for (const auto& op : r.s.ops) compute.run(op.id);
  add(want, read_outputs(r.s, *r.layouts, *r.in, store), r.e.workload.batch);
  std::map<int, double> err, scale;
  for (const auto& [key, w] : want) {
    const auto it = got.find(key);
    if (it == got.end() || it->second.size() != w.size()) {
      std::fprintf(stderr, "output of content %d head %d token %d missing\n", std::get<0>(key), std::get<3>(key),
                   std::get<4>(key));
      return 1;
    }
    for (size_t i = 0; i < w.size(); ++i) {
      if (std::isinf(w[i]) && w[i] == it->second[i]) continue;
      err[std::get<0>(key)] = std::max(err[std::get<0>(key)], double(std::fabs(it->second[i] - w[i])));
      scale[std::get<0>(key)] = std::max(scale[std::get<0>(key)], double(std::fabs(w[i])));
    }
  }
  int failed = err.size() == 4 ? 0 : 1;
  for (const auto& [content, e] : err) {
    const double rel = e / std::max(scale[content], 1e-30);
    std::printf("%s: max relative error %.3g\n", std::string(schedule::to_string(schedule::BufferRole(content))).c_str(), rel);
    failed |= rel > 2e-2;
  }
  return failed;
}

}  // namespace
}  // namespace rm::runtime

int main(int argc, char** argv) {
  try {
    return rm::runtime::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "runtime_cuda_fake_run: %s\n", e.what());
    return 3;
  }
}
