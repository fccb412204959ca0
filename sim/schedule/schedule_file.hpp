// The Schedule's file format: versioned JSON ({"format": "ringmaster.schedule",
// "version": 2}), gzipped when the path ends in ".gz". Ops are stored as
// templates (the structure of a run of ops, e.g. one layer's forward) and
// segments (instances of a template with their own first id, layer, phase,
// outside dependencies and only the cost and descriptor columns that differ),
// with buffers, token sets and descriptors in tables of their own, so a full
// training step of 10^5..10^6 ops stays a few MB. docs/schedule-format.md
// documents every field.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "sim/schedule/schedule.hpp"

namespace rm::schedule {

inline constexpr int kScheduleFormatVersion = 2;

// Deterministic: the same Schedule gives the same text.
std::string to_schedule_json(const Schedule& s);
// Called with the file's op_count and rank count once the segments are known
// to cover every op, before the ops are allocated: a caller that knows the
// memory a run will need refuses there (pipeline::load_schedule_file does).
using OpCountCheck = std::function<void(int64_t ops, int64_t ranks)>;

// Structure only (format, version, fields, ids); run validate() for the rest.
// `name` (a file name) prefixes error messages.
Schedule from_schedule_json(const nlohmann::json& j, const std::string& name, const OpCountCheck& before_allocating = {});

// What a measured Timeline names the Schedule it ran by: FNV-1a (64 bits, hex) of
// to_schedule_json, so two files with the same Schedule give the same hash.
std::string schedule_hash(const Schedule& s);

// Atomic write; read_schedule also validates. Throw ScheduleError / ConfigError.
// The text is parsed by traces/json_text.hpp (its depth and key limits hold).
void write_schedule(const Schedule& s, const std::string& path);
Schedule read_schedule(const std::string& path, const OpCountCheck& before_allocating = {});
// read_schedule on text already read; `name` stands for the file in messages.
Schedule parse_schedule_text(std::string_view text, const std::string& name, const OpCountCheck& before_allocating = {});

}  // namespace rm::schedule
