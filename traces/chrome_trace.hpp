// The Timeline's file format: Chrome Trace Event JSON that Perfetto and
// chrome://tracing open. One process per rank (pid), one thread per stream
// (tid), "X" slices with ts/dur in microseconds and args.op = Schedule op id,
// "M" events naming ranks and streams, "s"/"f" flow events drawing each p2p
// edge as an arrow, and "otherData" naming the source and holding the edges.
// docs/timeline-format.md documents every field.
#pragma once

#include <string>
#include <string_view>

#include "traces/timeline.hpp"

namespace rm::traces {

// Deterministic: the same Timeline gives the same text, events in canonical order.
std::string to_chrome_json(const Timeline& t);

// Parses our own output (edges from otherData.edges) and plain Chrome traces
// ("X" slices, "M" names); other phases, flows included, are skipped. `name` is used in error messages.
Timeline from_chrome_json(std::string_view text, const std::string& name);

// Files; ".gz" paths are gzipped. Writes are atomic. Throw TraceError.
void write_chrome_trace(const Timeline& t, const std::string& path);
Timeline read_chrome_trace(const std::string& path);

}  // namespace rm::traces
