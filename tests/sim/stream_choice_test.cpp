// pipeline::choose_and_stream: the one place that decides whether a step is
// streamed or whole, for `simulate --stream` and a sweep's points. A scripted
// streamed run stands in for the engine, so every fallback is reached, those no
// generated step has shown (a critical path the streamed run could not trace).
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/engine/stream_run.hpp"
#include "sim/engine/symmetry.hpp"
#include "sim/pipeline/stream_choice.hpp"

namespace rm::pipeline {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t GB = 1'000'000'000;

// have 10 GB; the whole step (one replica / full) and the streamed run (one replica / full).
StreamFacts facts(int64_t whole, int64_t whole_full, int64_t window = 1 * GB, int64_t window_full = 2 * GB) {
  StreamFacts f;
  f.have = 10 * GB;
  f.whole = {100, whole};
  f.whole_full = {400, whole_full};
  f.window = {10, window};
  f.window_full = {20, window_full};
  return f;
}

enum class Then { traced, untraced, not_exact, shortcut_breaks };

// A streamed run that does what `script` says, call after call, and records the calls.
struct Scripted {
  std::vector<Then> script;
  std::vector<bool> calls = {};  // one_replica of each call
  StreamChoice run(StreamWhen when, bool try_one, const StreamFacts& f) {
    return choose_and_stream(when, try_one, f, [&](bool one) {
      calls.push_back(one);
      const Then t = script.at(calls.size() - 1);
      if (t == Then::not_exact) throw engine::StreamNotExact("streaming is not exact for this Schedule: op 7");
      if (t == Then::shortcut_breaks) throw engine::ShortcutNotExact("route 3 -> 9 crosses a spine");
      StreamedSimulation s;
      s.report.critical_path_traced = t == Then::traced;
      s.report.step_time_s = one ? 1.0 : 2.0;
      return s;
    });
  }
};

TEST(StreamChoice, NeverStreamsWhenOff) {
  Scripted r{{Then::traced}};
  const StreamChoice c = r.run(StreamWhen::never, false, facts(30 * GB, 30 * GB));
  EXPECT_FALSE(c.run);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(c.note, "");
}

TEST(StreamChoice, PreferredStreamsWhereTheWindowFitsAndSaysWhy) {
  Scripted fits{{Then::traced}};
  StreamChoice c = fits.run(StreamWhen::preferred, false, facts(5 * GB, 5 * GB));
  ASSERT_TRUE(c.run);
  EXPECT_THAT(fits.calls, ElementsAre(false));
  EXPECT_THAT(c.note, HasSubstr("less time and memory"));

  Scripted big{{Then::traced}};
  c = big.run(StreamWhen::preferred, true, facts(30 * GB, 90 * GB));
  ASSERT_TRUE(c.run);
  EXPECT_TRUE(c.one_replica);
  EXPECT_THAT(big.calls, ElementsAre(true));
  EXPECT_EQ(c.note, "the whole step needs ~30.0 GB (100 ops), this machine has 10.0 GB");

  Scripted window_too_big{{Then::traced}};
  c = window_too_big.run(StreamWhen::preferred, false, facts(5 * GB, 5 * GB, 11 * GB, 11 * GB));
  EXPECT_FALSE(c.run);
  EXPECT_TRUE(window_too_big.calls.empty());
}

TEST(StreamChoice, IfNeededStreamsOnlyWhereTheWholeStepDoesNotFit) {
  Scripted fits{{Then::traced}};
  EXPECT_FALSE(fits.run(StreamWhen::if_needed, false, facts(5 * GB, 5 * GB)).run);
  EXPECT_TRUE(fits.calls.empty());

  Scripted big{{Then::traced}};
  const StreamChoice c = big.run(StreamWhen::if_needed, false, facts(30 * GB, 30 * GB));
  ASSERT_TRUE(c.run);
  EXPECT_THAT(big.calls, ElementsAre(false));
}

TEST(StreamChoice, AnUntracedCriticalPathRunsWholeWhereThatFits) {
  Scripted fits{{Then::untraced}};
  StreamChoice c = fits.run(StreamWhen::preferred, false, facts(5 * GB, 5 * GB));
  EXPECT_FALSE(c.run);
  EXPECT_THAT(c.note, HasSubstr("could not trace the critical path"));

  // Too large whole, or streaming insisted on: the streamed figures stand, without the path.
  Scripted big{{Then::untraced}};
  c = big.run(StreamWhen::preferred, false, facts(30 * GB, 30 * GB));
  ASSERT_TRUE(c.run);
  EXPECT_FALSE(c.run->report.critical_path_traced);

  Scripted on{{Then::untraced}};
  c = on.run(StreamWhen::always, false, facts(5 * GB, 5 * GB));
  ASSERT_TRUE(c.run);
  EXPECT_EQ(c.note, "asked for (--stream on)");
}

TEST(StreamChoice, NotExactRunsWholeWhereThatFitsElseSaysWhy) {
  Scripted fits{{Then::not_exact}};
  StreamChoice c = fits.run(StreamWhen::preferred, false, facts(5 * GB, 5 * GB));
  EXPECT_FALSE(c.run);
  EXPECT_EQ(c.note, "streaming is not exact for this Schedule: op 7 (so it was)");

  Scripted big{{Then::not_exact}};
  EXPECT_THROW(big.run(StreamWhen::preferred, false, facts(30 * GB, 30 * GB)), ConfigError);
  Scripted on{{Then::not_exact}};
  EXPECT_THROW(on.run(StreamWhen::always, false, facts(5 * GB, 5 * GB)), ConfigError);
  Scripted sweep{{Then::not_exact}};
  EXPECT_THROW(sweep.run(StreamWhen::if_needed, false, facts(30 * GB, 30 * GB)), ConfigError);
}

TEST(StreamChoice, ALeftShortcutRunsTheFullStepWholeWhereItFitsElseStreamed) {
  // The full step fits whole: the whole path proves and refuses the shortcut itself.
  Scripted fits{{Then::shortcut_breaks}};
  StreamChoice c = fits.run(StreamWhen::preferred, true, facts(2 * GB, 8 * GB));
  EXPECT_FALSE(c.run);
  EXPECT_THAT(fits.calls, ElementsAre(true));

  // It does not (or streaming was asked for): the full step streamed, and why it left.
  for (StreamWhen when : {StreamWhen::preferred, StreamWhen::if_needed, StreamWhen::always}) {
    Scripted big{{Then::shortcut_breaks, Then::traced}};
    c = big.run(when, true, facts(when == StreamWhen::if_needed ? 12 * GB : 2 * GB, 40 * GB));
    ASSERT_TRUE(c.run) << int(when);
    EXPECT_FALSE(c.one_replica);
    EXPECT_EQ(c.run->report.step_time_s, 2.0);
    EXPECT_THAT(big.calls, ElementsAre(true, false));
    EXPECT_EQ(c.shortcut_left, "route 3 -> 9 crosses a spine");
  }

  // The full step's streamed run does not fit either: one line with its estimate.
  Scripted none{{Then::shortcut_breaks}};
  try {
    none.run(StreamWhen::always, true, facts(2 * GB, 40 * GB, 1 * GB, 12 * GB));
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& x) {
    EXPECT_THAT(x.what(), HasSubstr("this streamed simulation needs ~12.0 GB (20 ops), this machine has 10.0 GB"));
  }
}

}  // namespace
}  // namespace rm::pipeline
