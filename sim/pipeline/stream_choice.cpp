#include "sim/pipeline/stream_choice.hpp"

#include <fmt/format.h>

#include "sim/engine/symmetry.hpp"
#include "sim/generate/footprint.hpp"

namespace rm::pipeline {

StreamFacts stream_facts(const Experiment& e, bool one_replica) {
  StreamFacts f;
  f.have = generate::machine_memory_bytes();
  f.whole = generate::estimate_footprint(e, generate::RunKind::simulate, one_replica);
  f.whole_full = one_replica ? generate::estimate_footprint(e, generate::RunKind::simulate) : f.whole;
  f.window = generate::estimate_stream_footprint(e, one_replica);
  f.window_full = one_replica ? generate::estimate_stream_footprint(e, false) : f.window;
  return f;
}

StreamChoice choose_and_stream(StreamWhen when, bool try_one, const StreamFacts& facts,
                               const std::function<StreamedSimulation(bool one_replica)>& run_streamed) {
  const int64_t have = facts.have;
  // The whole step as it would run now: one replica while the shortcut holds, else the full step.
  auto whole_fits = [&](bool one) { return (one ? facts.whole : facts.whole_full).bytes <= have; };
  StreamChoice c;
  switch (when) {
    case StreamWhen::never: return c;
    case StreamWhen::always: c.note = "asked for (--stream on)"; break;
    case StreamWhen::preferred:
      if (facts.window.bytes > have) return c;
      break;
    case StreamWhen::if_needed:
      if (whole_fits(try_one) || facts.window.bytes > have) return c;
      break;
  }
  if (when != StreamWhen::always)
    c.note = whole_fits(try_one)
                 ? "the whole run's figures in less time and memory; --stream off builds the whole step"
                 : fmt::format("the whole step needs ~{:.1f} GB ({} ops), this machine has {:.1f} GB",
                               double(facts.whole.bytes) / 1e9, facts.whole.ops, double(have) / 1e9);
  for (bool one = try_one;;) {
    generate::check_fits(one == try_one ? facts.window : facts.window_full, "this streamed simulation", have);
    try {
      StreamedSimulation run = run_streamed(one);
      // Ties the streamed run could not tell apart: the whole run traces the path, where it may and fits.
      if (!run.report.critical_path_traced && when != StreamWhen::always && whole_fits(one))
        return {std::nullopt, false, "the streamed run could not trace the critical path (so it ran whole)",
                c.shortcut_left};
      c.run = std::move(run);
      c.one_replica = one;
      return c;
    } catch (const engine::StreamNotExact& x) {
      if (when == StreamWhen::always || !whole_fits(one)) throw ConfigError(x.what());
      return {std::nullopt, false, std::string(x.what()) + " (so it was)", c.shortcut_left};
    } catch (const engine::ShortcutNotExact& x) {
      if (!one) throw;  // raised only under the shortcut
      // The whole path proves and refuses the shortcut first, and says why.
      if (when != StreamWhen::always && whole_fits(false)) return {};
      one = false;
      c.shortcut_left = x.why;
    }
  }
}

StreamChoice stream_step(Session& session, const Experiment& e, StreamWhen when, bool try_one,
                         const StreamFacts& facts, const StreamProgress& progress) {
  return choose_and_stream(when, try_one, facts, [&](bool one) {
    if (progress.starting) progress.starting(one);
    session.patterns(e);
    const int64_t total = one ? generate::count_replica_ops(e) : generate::count_step_ops(e);
    std::function<void(int64_t)> each;
    if (progress.ops) each = [&](int64_t ops) { progress.ops(ops, total); };
    return session.simulate_streamed(e, one, each);
  });
}

}  // namespace rm::pipeline
