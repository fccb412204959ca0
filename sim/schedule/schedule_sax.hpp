// The Schedule file's one-pass reader: a tokenizer over the text that fills
// the Schedule as it goes, with no DOM (nlohmann's tree of a 7 MB file costs
// more than the rest of reading it). It makes every check the DOM reader
// (schedule_read.cpp) makes, but names no fault: for any text it does not
// read in full (a fault, or a form it does not take: escapes or non-ASCII in a
// string, a number int64_t does not hold, unknown keys, `count` after a
// column, segments before templates) it gives nullopt, and
// parse_schedule_text reads that text through the DOM, which names the fault.
// So the DOM reader stays the definition: what this reader returns, the DOM
// reader returns too (tests/sim/schedule_read_test.cpp).
#pragma once

#include <optional>
#include <string_view>

#include "sim/schedule/schedule.hpp"
#include "sim/schedule/schedule_file.hpp"

namespace rm::schedule {

// Structure only, as from_schedule_json; calls before_allocating as it does.
std::optional<Schedule> read_schedule_one_pass(std::string_view text, const OpCountCheck& before_allocating = {});

}  // namespace rm::schedule
