// Whether a generated step is simulated streamed or whole, decided in one place
// for `simulate` and for a sweep's or plan's points (docs/engines.md, "Streaming").
//
// A streamed run gives the whole run's figures to the last bit in less time and
// memory, but it can refuse (an op would arrive after it should have started:
// StreamNotExact), leave the data-parallel shortcut (a route whose translates are
// not its copies: ShortcutNotExact), or end without the critical path traced
// (ties it cannot tell apart). Each of those falls back to the whole step where
// that fits and the policy allows, else to what still runs, else to an error.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "sim/config/experiment.hpp"
#include "sim/generate/footprint.hpp"
#include "sim/pipeline/pipeline.hpp"

namespace rm::pipeline {

enum class StreamWhen {
  never,      // `--stream off`
  always,     // `--stream on`: streamed, or an error saying why it cannot be
  preferred,  // `--stream auto`: streamed wherever the streamed run fits
  if_needed,  // a sweep's or plan's point: streamed only where the whole step does not
              // fit (whole steps let a worker reuse a Schedule across points)
};

// The memory figures the choice reads, in bytes (generate::estimate_footprint and
// estimate_stream_footprint, with and without the shortcut; machine_memory_bytes).
struct StreamFacts {
  int64_t have = 0;
  generate::Footprint whole, whole_full;    // the whole step: as asked (one replica or not), and the full step
  generate::Footprint window, window_full;  // the streamed run: the same two
};
// May throw ConfigError (what the whole run would say of a bad experiment).
StreamFacts stream_facts(const Experiment& e, bool one_replica);

struct StreamChoice {
  // Set: the step ran streamed and these are its figures.
  std::optional<StreamedSimulation> run;
  bool one_replica = false;  // run under the data-parallel shortcut
  // Why it streamed, or why it did not where that is worth a line; empty otherwise.
  std::string note;
  // Set when a streamed run left the shortcut: the route that did not translate.
  std::string shortcut_left;
};

// run_streamed(one_replica) runs the streamed step (Session::simulate_streamed).
// try_one: the caller asks for the shortcut and generate::replica_refusal allows it.
// Throws ConfigError where nothing the policy allows fits or is exact.
StreamChoice choose_and_stream(StreamWhen when, bool try_one, const StreamFacts& facts,
                               const std::function<StreamedSimulation(bool one_replica)>& run_streamed);

// What a long streamed run tells a terminal: starting(one_replica) once its
// patterns are to be built, then ops(so far, the streamed step's total) after each chunk.
struct StreamProgress {
  std::function<void(bool)> starting;
  std::function<void(int64_t, int64_t)> ops;
};

// choose_and_stream on e (facts: stream_facts(e, try_one)) with the session's streamed run.
StreamChoice stream_step(Session& session, const Experiment& e, StreamWhen when, bool try_one,
                         const StreamFacts& facts, const StreamProgress& progress = {});

}  // namespace rm::pipeline
