// One traceEvents entry (and the distributedInfo block) as the SAX parser
// collected it: the scalars of the keys read, untyped, by slot. take_event()
// checks and types them into what a RawFile keeps (traces/kineto_fields.cpp);
// the parser itself (traces/kineto_read.cpp) only fills slots. Internal.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "traces/kineto_raw.hpp"

namespace rm::traces::kineto_raw {

// One JSON scalar as the parser handed it; numbers keep their text so times
// convert exactly.
struct Val {
  enum T : uint8_t { none, null, boolean, integer, big, floating, string, compound } t = none;
  int64_t i = 0;
  double d = 0;
  std::string s;  // a string's value, or a number's text
  void clear() {
    t = none;
    s.clear();
  }
};

std::string_view type_name(const Val& v);

enum EvSlot : int { e_ph, e_cat, e_name, e_pid, e_tid, e_ts, e_dur, e_id, e_args, kEvSlots };
enum ArgSlot : int {
  a_stream, a_correlation, a_bytes, a_collective, a_in_nelems, a_out_nelems, a_dtype, a_group_size,
  a_pg_name, a_pg_ranks, a_sync_kind, a_wait_stream, a_wait_record, a_name, kArgSlots
};
enum TopSlot : int { t_events, t_dist, t_base, kTopSlots };
enum DistSlot : int { d_rank, d_world, d_backend, d_pg_config, kDistSlots };
enum PgSlot : int { p_name, p_desc, p_size, p_ranks, kPgSlots };

struct Slots {
  std::array<Val, kEvSlots> ev;
  std::array<Val, kArgSlots> args;
  std::vector<int64_t> ev_ranks;  // args."Process Group Ranks" written as an array
  std::array<Val, kDistSlots> dist;
  std::array<Val, kPgSlots> pg;
  std::vector<int64_t> pg_ranks;
  int64_t index = 0;  // the entry's position in traceEvents
};

// The entry in `s` -> an event, sync record, flow or thread name of `out`, or
// a count in out.skipped. Throws TraceError naming out.name and the entry.
void take_event(const Slots& s, RawFile& out);
// distributedInfo (s.dist) and one of its pg_config entries (s.pg, s.pg_ranks).
void take_distributed_info(const Slots& s, RawFile& out);
void take_pg_config(const Slots& s, RawFile& out);

}  // namespace rm::traces::kineto_raw
