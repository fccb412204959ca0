// Checking and typing the fields of one Kineto trace entry (what each must
// be: docs/kineto.md), and the exact microseconds -> nanoseconds conversion.
#include "traces/kineto_fields.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include <fmt/format.h>

#include "traces/trace_error.hpp"

namespace rm::traces::kineto_raw {

std::string_view type_name(const Val& v) {
  switch (v.t) {
    case Val::none: return "nothing";
    case Val::null: return "null";
    case Val::boolean: return "a boolean";
    case Val::integer:
    case Val::big:
    case Val::floating: return "a number";
    case Val::string: return "a string";
    case Val::compound: return "an object or array";
  }
  return "?";
}

namespace {

// Categories kept, with their modern spelling (PyTorch 1.8-1.9 wrote "Kernel", "Runtime", ...).
struct CatInfo {
  std::string_view name;
  int kind;  // a Kind, or kSync for cuda_sync
};
constexpr int kSync = 99;
const std::unordered_map<std::string_view, CatInfo> kCategories{
    {"kernel", {"kernel", int(Kind::kernel)}},          {"Kernel", {"kernel", int(Kind::kernel)}},
    {"gpu_memcpy", {"gpu_memcpy", int(Kind::memcpy)}},  {"Memcpy", {"gpu_memcpy", int(Kind::memcpy)}},
    {"gpu_memset", {"gpu_memset", int(Kind::memset)}},  {"Memset", {"gpu_memset", int(Kind::memset)}},
    {"cpu_op", {"cpu_op", int(Kind::cpu)}},             {"Operator", {"cpu_op", int(Kind::cpu)}},
    {"cuda_runtime", {"cuda_runtime", int(Kind::cpu)}}, {"Runtime", {"cuda_runtime", int(Kind::cpu)}},
    {"cuda_driver", {"cuda_driver", int(Kind::cpu)}},   {"user_annotation", {"user_annotation", int(Kind::cpu)}},
    {"python_function", {"python_function", int(Kind::cpu)}},
    {"Python", {"python_function", int(Kind::cpu)}},    {"cuda_sync", {"cuda_sync", kSync}},
};

std::string trimmed(std::string_view s) {
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  return std::string(s);
}

// "[0, 1]" (how PyTorch writes "Process Group Ranks") -> {0, 1}; nullopt if not such a list.
std::optional<std::vector<int64_t>> parse_int_list(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (s.size() < 2 || s.front() != '[' || s.back() != ']') return std::nullopt;
  s = s.substr(1, s.size() - 2);
  std::vector<int64_t> out;
  while (true) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    if (s.empty()) return out.empty() ? std::optional(out) : std::nullopt;
    int64_t v = 0;
    bool neg = false;
    if (s.front() == '-') {
      neg = true;
      s.remove_prefix(1);
    }
    size_t n = 0;
    while (n < s.size() && s[n] >= '0' && s[n] <= '9') {
      if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) return std::nullopt;
      v = v * 10 + (s[n] - '0');
      ++n;
    }
    if (n == 0) return std::nullopt;
    out.push_back(neg ? -v : v);
    s.remove_prefix(n);
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    if (s.empty()) return out;
    if (s.front() != ',') return std::nullopt;
    s.remove_prefix(1);
  }
}

// Checked conversions of one entry's slots; `field` names the key in messages.
class EventReader {
 public:
  EventReader(const Slots& s, RawFile& out) : s_(s), out_(out) {}

  [[noreturn]] void bad_event(std::string_view what) const {
    std::string name = s_.ev[e_name].t == Val::string ? s_.ev[e_name].s : "";
    if (name.size() > 80) name = name.substr(0, 77) + "...";
    throw TraceError(fmt::format("{}: traceEvents[{}] (\"{}\"): {}", out_.name, s_.index, name, what));
  }
  std::optional<int64_t> int_of(const Val& v, std::string_view field, int64_t lo, int64_t hi) const {
    if (v.t == Val::none || v.t == Val::null) return std::nullopt;
    int64_t x = 0;
    if (v.t == Val::integer) {
      x = v.i;
    } else if (v.t == Val::floating && v.d == std::floor(v.d) && std::fabs(v.d) < 9e15) {
      x = int64_t(v.d);
    } else if (v.t == Val::big || (v.t == Val::floating && v.d == std::floor(v.d))) {
      bad_event(fmt::format("{}: {} is out of range [{}, {}]", field, v.s, lo, hi));
    } else {
      bad_event(fmt::format("{}: expected an integer, got {}", field, v.t == Val::floating ? v.s : type_name(v)));
    }
    if (x < lo || x > hi) bad_event(fmt::format("{}: {} is out of range [{}, {}]", field, x, lo, hi));
    return x;
  }
  std::optional<std::string> string_of(const Val& v, std::string_view field) const {
    if (v.t == Val::none || v.t == Val::null) return std::nullopt;
    if (v.t != Val::string) bad_event(fmt::format("{}: expected a string, got {}", field, type_name(v)));
    return v.s;
  }
  // pid and tid: integers or strings, kept as written.
  std::string id_text(const Val& v, std::string_view field) const {
    if (v.t == Val::string) return v.s;
    if (v.t == Val::integer) return std::to_string(v.i);
    if (v.t == Val::floating && v.d == std::floor(v.d) && std::fabs(v.d) < 9e15) return std::to_string(int64_t(v.d));
    if (v.t == Val::none) bad_event(fmt::format("missing \"{}\"", field));
    bad_event(fmt::format("{}: expected an integer or a string, got {}", field, type_name(v)));
  }
  int64_t time_ns(const Val& v, std::string_view field) const {
    if (v.t == Val::none) bad_event(fmt::format("missing \"{}\" (microseconds)", field));
    std::optional<int64_t> ns;
    if (v.t == Val::integer) {
      if (std::abs(v.i) < int64_t(9e15)) ns = v.i * 1000;
    } else if (v.t == Val::floating) {
      ns = decimal_us_to_ns(v.s);
    } else {
      bad_event(fmt::format("{}: expected a number (microseconds), got {}", field, type_name(v)));
    }
    if (!ns) bad_event(fmt::format("{}: {} is out of range", field, v.t == Val::integer ? std::to_string(v.i) : v.s));
    return *ns;
  }

  void skip(std::string key) { ++out_.skipped[std::move(key)]; }

  void event() {
    const std::string_view ph = s_.ev[e_ph].t == Val::string ? std::string_view(s_.ev[e_ph].s) : std::string_view();
    const std::string_view cat = s_.ev[e_cat].t == Val::string ? std::string_view(s_.ev[e_cat].s) : std::string_view();
    if (ph == "X") {
      x_event(cat);
    } else if (ph == "M") {
      if (s_.ev[e_name].t == Val::string && s_.ev[e_name].s == "thread_name" && s_.args[a_name].t == Val::string &&
          s_.ev[e_pid].t != Val::none && s_.ev[e_tid].t != Val::none)
        out_.thread_names[id_text(s_.ev[e_pid], "pid") + "/" + id_text(s_.ev[e_tid], "tid")] = trimmed(s_.args[a_name].s);
      else
        skip(fmt::format("ph M {}", s_.ev[e_name].t == Val::string ? s_.ev[e_name].s : "?"));
    } else if ((ph == "s" || ph == "f") && cat == "ac2g") {
      flow(ph == "s");
    } else if (ph.empty()) {
      skip("no ph");
    } else {
      skip(cat.empty() ? fmt::format("ph {}", ph) : fmt::format("ph {} cat {}", ph, cat));
    }
  }

  void x_event(std::string_view cat) {
    const auto it = kCategories.find(cat);
    if (it == kCategories.end()) {
      skip(fmt::format("ph X cat {}", cat.empty() ? "?" : cat));
      return;
    }
    if (it->second.kind == kSync) return sync_event();
    RawEvent e;
    e.index = s_.index;
    e.kind = static_cast<Kind>(it->second.kind);
    e.category = std::string(it->second.name);
    const std::optional<std::string> name = string_of(s_.ev[e_name], "name");
    if (!name) bad_event("missing \"name\"");
    e.start_ns = time_ns(s_.ev[e_ts], "ts");
    e.dur_ns = time_ns(s_.ev[e_dur], "dur");
    if (e.dur_ns < 0) bad_event(fmt::format("dur: expected >= 0, got {}", s_.ev[e_dur].t == Val::integer ? std::to_string(s_.ev[e_dur].i) : s_.ev[e_dur].s));
    e.tid = id_text(s_.ev[e_tid], "tid");
    e.thread = id_text(s_.ev[e_pid], "pid") + "/" + e.tid;
    constexpr int64_t kI64 = std::numeric_limits<int64_t>::max();
    e.correlation = int_of(s_.args[a_correlation], "args.correlation", 0, kI64).value_or(-1);
    if (e.kind != Kind::cpu) {
      std::optional<int64_t> stream = int_of(s_.args[a_stream], "args.stream", 0, kKinetoCpuStreamBase - 1);
      if (!stream) {  // older traces: the tid is the stream, or "stream N"
        std::string_view t = e.tid;
        if (t.substr(0, 7) == "stream ") t.remove_prefix(7);
        const std::string digits = trimmed(t);
        int64_t v = -1;
        if (!digits.empty() && digits.size() < 10 && std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
          v = std::stoll(digits);
        if (v < 0 || v >= kKinetoCpuStreamBase)
          bad_event(fmt::format("no args.stream and tid \"{}\" is not a stream id in [0, {})", e.tid, kKinetoCpuStreamBase));
        stream = v;
      }
      e.stream = int(*stream);
      if (e.kind != Kind::kernel) e.bytes = int_of(s_.args[a_bytes], "args.bytes", 0, kI64).value_or(0);
      if (e.kind == Kind::kernel) nccl_fields(*name, e);
    }
    e.name = *name;
    out_.events.push_back(std::move(e));
  }

  void nccl_fields(const std::string& name, RawEvent& e) {
    const bool has_meta = s_.args[a_collective].t != Val::none;
    const std::string inferred = nccl_kind_from_kernel_name(name);
    if (!has_meta && inferred.empty()) return;
    constexpr int64_t kI64 = std::numeric_limits<int64_t>::max();
    KinetoCollective c;
    if (has_meta) {
      c.kind = nccl_kind_from_collective_name(*string_of(s_.args[a_collective], "args.\"Collective name\""));
    } else {
      c.kind = inferred;
      c.inferred = true;
    }
    c.in_nelems = int_of(s_.args[a_in_nelems], "args.\"In msg nelems\"", -1, kI64).value_or(-1);
    c.out_nelems = int_of(s_.args[a_out_nelems], "args.\"Out msg nelems\"", -1, kI64).value_or(-1);
    c.dtype = string_of(s_.args[a_dtype], "args.dtype").value_or("");
    c.group_size = int(int_of(s_.args[a_group_size], "args.\"Group size\"", 0, std::numeric_limits<int>::max()).value_or(0));
    c.process_group = string_of(s_.args[a_pg_name], "args.\"Process Group Name\"").value_or("");
    const Val& ranks = s_.args[a_pg_ranks];
    std::vector<int64_t> list;
    if (ranks.t == Val::string) {
      auto parsed = parse_int_list(ranks.s);
      if (!parsed) bad_event(fmt::format("args.\"Process Group Ranks\": expected a list of ranks like \"[0, 1]\", got \"{}\"", ranks.s));
      list = std::move(*parsed);
    } else if (ranks.t == Val::compound) {
      list = s_.ev_ranks;
    } else if (ranks.t != Val::none && ranks.t != Val::null) {
      bad_event(fmt::format("args.\"Process Group Ranks\": expected a list of ranks, got {}", type_name(ranks)));
    }
    for (int64_t r : list) {
      if (r < 0 || r > std::numeric_limits<int>::max())
        bad_event(fmt::format("args.\"Process Group Ranks\": rank {} is out of range", r));
      c.group_ranks.push_back(int(r));
    }
    c.bytes = collective_bytes(c);
    e.bytes = c.bytes;
    e.nccl = std::move(c);
  }

  // A cuda_sync event's stream; -1 (none) is also written as 4294967295, its unsigned 32-bit form.
  int sync_stream(const Val& v, std::string_view field) const {
    if (v.t == Val::integer && v.i == 4294967295) return -1;
    return int(int_of(v, field, -1, kKinetoCpuStreamBase - 1).value_or(-1));
  }

  void sync_event() {
    constexpr int64_t kI64 = std::numeric_limits<int64_t>::max();
    RawSync s;
    s.index = s_.index;
    s.kind = string_of(s_.args[a_sync_kind], "args.cuda_sync_kind").value_or(string_of(s_.ev[e_name], "name").value_or(""));
    s.correlation = int_of(s_.args[a_correlation], "args.correlation", 0, kI64).value_or(-1);
    s.stream = sync_stream(s_.args[a_stream], "args.stream");
    s.wait_on_stream = sync_stream(s_.args[a_wait_stream], "args.wait_on_stream");
    s.record_correlation = int_of(s_.args[a_wait_record], "args.wait_on_cuda_event_record_corr_id", -1, kI64).value_or(-1);
    out_.syncs.push_back(std::move(s));
  }

  void flow(bool start) {
    const Val& id = s_.ev[e_id];
    if (id.t != Val::integer || s_.ev[e_ts].t == Val::none || s_.ev[e_pid].t == Val::none || s_.ev[e_tid].t == Val::none) {
      skip(fmt::format("ph {} cat ac2g without id, ts, pid or tid", start ? "s" : "f"));
      return;
    }
    RawFlow f;
    f.start = start;
    f.id = id.i;
    f.thread = id_text(s_.ev[e_pid], "pid") + "/" + id_text(s_.ev[e_tid], "tid");
    f.ts_ns = time_ns(s_.ev[e_ts], "ts");
    out_.flows.push_back(std::move(f));
  }

  [[noreturn]] void bad_header(std::string_view field, std::string_view what) const {
    throw TraceError(fmt::format("{}: {}: {}", out_.name, field, what));
  }
  int64_t header_int(const Val& v, std::string_view field, int64_t lo, int64_t hi, int64_t dflt) const {
    if (v.t == Val::none) return dflt;
    if (v.t != Val::integer) bad_header(field, fmt::format("expected an integer, got {}", v.t == Val::big ? v.s : type_name(v)));
    if (v.i < lo || v.i > hi) bad_header(field, fmt::format("{} is out of range [{}, {}]", v.i, lo, hi));
    return v.i;
  }

  void distributed_info() {
    constexpr int64_t kInt = std::numeric_limits<int>::max();
    out_.has_distributed_info = true;
    out_.rank = int(header_int(s_.dist[d_rank], "distributedInfo.rank", 0, kInt, 0));
    out_.world_size = int(header_int(s_.dist[d_world], "distributedInfo.world_size", 1, kInt, 0));
    if (s_.dist[d_backend].t == Val::string) out_.backend = s_.dist[d_backend].s;
    if (out_.world_size > 0 && out_.rank >= out_.world_size)
      bad_header("distributedInfo.rank", fmt::format("{} is not below world_size {}", out_.rank, out_.world_size));
  }
  void pg_config() {
    PgConfig p;
    if (s_.pg[p_name].t == Val::string) p.name = s_.pg[p_name].s;
    if (s_.pg[p_desc].t == Val::string) p.desc = s_.pg[p_desc].s;
    p.size = header_int(s_.pg[p_size], "distributedInfo.pg_config[].pg_size", 0, std::numeric_limits<int>::max(), 0);
    p.ranks = s_.pg_ranks;
    out_.pg_config.push_back(std::move(p));
  }

 private:
  const Slots& s_;
  RawFile& out_;
};

}  // namespace

void take_event(const Slots& s, RawFile& out) { EventReader(s, out).event(); }
void take_distributed_info(const Slots& s, RawFile& out) { EventReader(s, out).distributed_info(); }
void take_pg_config(const Slots& s, RawFile& out) { EventReader(s, out).pg_config(); }

std::optional<int64_t> decimal_us_to_ns(std::string_view text) {
  std::string_view s = text;
  bool neg = false;
  if (!s.empty() && (s.front() == '-' || s.front() == '+')) {
    neg = s.front() == '-';
    s.remove_prefix(1);
  }
  std::string digits;
  int point = -1;  // digits before the decimal point
  size_t i = 0;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') {
      if (digits.size() < 64) digits.push_back(c);
      else if (point < 0) return std::nullopt;  // absurdly long integer part
    } else if (c == '.' && point < 0) {
      point = int(digits.size());
    } else {
      break;
    }
  }
  if (digits.empty()) return std::nullopt;
  if (point < 0) point = int(digits.size());
  while (point > 0 && digits.size() > 1 && digits.front() == '0') {  // leading zeros of the integer part
    digits.erase(digits.begin());
    --point;
  }
  int64_t exp = 0;
  if (i < s.size()) {
    if (s[i] != 'e' && s[i] != 'E') return std::nullopt;
    ++i;
    bool eneg = false;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) eneg = s[i++] == '-';
    if (i >= s.size()) return std::nullopt;
    for (; i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9' || exp > 10000) return std::nullopt;
      exp = exp * 10 + (s[i] - '0');
    }
    if (eneg) exp = -exp;
  }
  // The value is 0.DIGITS x 10^(point + exp) microseconds; nanoseconds shift it by 3.
  const int64_t whole = point + exp + 3;  // digits that make the integer part of the nanoseconds
  if (whole > 19) {
    if (std::all_of(digits.begin(), digits.end(), [](char c) { return c == '0'; })) return 0;
    return std::nullopt;
  }
  int64_t ns = 0;
  for (int64_t k = 0; k < whole; ++k) {
    const int d = k < int64_t(digits.size()) ? digits[size_t(k)] - '0' : 0;
    if (ns > (std::numeric_limits<int64_t>::max() - d) / 10) return std::nullopt;
    ns = ns * 10 + d;
  }
  // Round half up on the first digit past the nanosecond (none when the value is below 0.01 ns).
  if (whole >= 0 && whole < int64_t(digits.size()) && digits[size_t(whole)] >= '5') {
    if (ns == std::numeric_limits<int64_t>::max()) return std::nullopt;
    ++ns;
  }
  return neg ? -ns : ns;
}

}  // namespace rm::traces::kineto_raw
