// The Schedule's file format: versioned JSON ({"format": "ringmaster.schedule",
// "version": 2}), gzipped when the path ends in ".gz". Ops are stored as
// templates (the structure of a run of ops, e.g. one layer's forward) and
// segments (instances of a template with their own first id, layer, phase,
// outside dependencies and only the cost and descriptor columns that differ),
// with buffers, token sets and descriptors in tables of their own, so a full
// training step of 10^5..10^6 ops stays a few MB. docs/schedule-format.md
// documents every field.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "sim/schedule/schedule.hpp"

namespace rm::schedule {

inline constexpr int kScheduleFormatVersion = 2;

// Deterministic: the same Schedule gives the same text.
std::string to_schedule_json(const Schedule& s);
// Structure only (format, version, fields, ids); run validate() for the rest.
// `name` (a file name) prefixes error messages.
Schedule from_schedule_json(const nlohmann::json& j, const std::string& name);

// What a measured Timeline names the Schedule it ran by: FNV-1a (64 bits, hex) of
// to_schedule_json, so two files with the same Schedule give the same hash.
std::string schedule_hash(const Schedule& s);

// Atomic write; read_schedule also validates. Throw ScheduleError / ConfigError.
void write_schedule(const Schedule& s, const std::string& path);
Schedule read_schedule(const std::string& path);

}  // namespace rm::schedule
