// The streaming half of the Kineto reader: one pass of nlohmann's SAX parser
// over the (gunzipped in chunks) text, keeping only the fields
// traces/kineto_raw.hpp names. No DOM is built, so memory follows the events
// kept, not the file: a trace of hundreds of MB reads in one pass.
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <istream>
#include <limits>
#include <memory>
#include <streambuf>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "traces/json_text.hpp"
#include "traces/kineto_raw.hpp"
#include "traces/text_file.hpp"
#include "traces/trace_error.hpp"

namespace rm::traces::kineto_raw {

namespace {

std::string mib(int64_t bytes) { return fmt::format("{} MiB", bytes >> 20); }

// Bytes from a file or from memory, gunzipped when they start with the gzip
// magic, handed to the parser in chunks; at most `limit` bytes of text.
class InputBuf : public std::streambuf {
 public:
  InputBuf(FILE* file, std::string_view memory, std::string name, int64_t limit)
      : file_(file), memory_(memory), name_(std::move(name)), limit_(limit) {}
  ~InputBuf() override {
    if (gzip_) inflateEnd(&z_);
  }
  InputBuf(const InputBuf&) = delete;
  InputBuf& operator=(const InputBuf&) = delete;
  int64_t text_bytes() const { return total_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    if (!started_) start();
    const size_t n = gzip_ ? inflate_some() : plain_some();
    if (n == 0) return traits_type::eof();
    total_ += int64_t(n);
    if (total_ > limit_)
      throw TraceError(fmt::format("{}: {} more than the {} limit for this input", name_,
                                   gzip_ ? "decompresses to" : "is", mib(limit_)));
    return traits_type::to_int_type(*gptr());
  }

 private:
  size_t read_raw(char* dst, size_t n) {
    if (!file_) {
      const size_t k = std::min(n, memory_.size());
      std::memcpy(dst, memory_.data(), k);
      memory_.remove_prefix(k);
      return k;
    }
    const size_t k = std::fread(dst, 1, n, file_);
    if (k < n && std::ferror(file_)) throw TraceError(fmt::format("{}: read error", name_));
    return k;
  }

  void start() {
    started_ = true;
    in_len_ = read_raw(in_.data(), in_.size());
    gzip_ = in_len_ >= 2 && static_cast<unsigned char>(in_[0]) == 0x1f && static_cast<unsigned char>(in_[1]) == 0x8b;
    if (gzip_) {
      if (inflateInit2(&z_, 15 + 16) != Z_OK) throw TraceError(fmt::format("{}: cannot start gunzip", name_));
      z_.next_in = reinterpret_cast<Bytef*>(in_.data());
      z_.avail_in = static_cast<uInt>(in_len_);
    }
  }

  size_t plain_some() {
    if (pending_plain_) {  // the first chunk, read to look for the gzip magic
      pending_plain_ = false;
      if (in_len_ > 0) {
        setg(in_.data(), in_.data(), in_.data() + in_len_);
        return in_len_;
      }
    }
    const size_t k = read_raw(in_.data(), in_.size());
    setg(in_.data(), in_.data(), in_.data() + k);
    return k;
  }

  size_t inflate_some() {
    if (ended_) return 0;
    z_.next_out = reinterpret_cast<Bytef*>(out_.data());
    z_.avail_out = static_cast<uInt>(out_.size());
    while (z_.avail_out == out_.size()) {  // until some output or the end
      if (z_.avail_in == 0) {
        in_len_ = read_raw(in_.data(), in_.size());
        if (in_len_ == 0) throw TraceError(fmt::format("{}: truncated gzip data", name_));
        z_.next_in = reinterpret_cast<Bytef*>(in_.data());
        z_.avail_in = static_cast<uInt>(in_len_);
      }
      const int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        ended_ = true;
        char extra;
        if (z_.avail_in > 0 || read_raw(&extra, 1) > 0)
          throw TraceError(fmt::format("{}: bytes after the end of the gzip stream (expected one gzip member)", name_));
        break;
      }
      if (rc != Z_OK && rc != Z_BUF_ERROR) throw TraceError(fmt::format("{}: corrupt gzip data", name_));
    }
    const size_t n = out_.size() - z_.avail_out;
    setg(out_.data(), out_.data(), out_.data() + n);
    return n;
  }

  FILE* file_;
  std::string_view memory_;
  std::string name_;
  int64_t limit_;
  bool started_ = false, gzip_ = false, ended_ = false, pending_plain_ = true;
  z_stream z_{};
  std::array<char, 1 << 16> in_{};
  size_t in_len_ = 0;
  std::array<char, 1 << 18> out_{};
  int64_t total_ = 0;
};

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

// Where a value goes: the containers of interest, everything else ignored.
enum class Ctx : uint8_t { top, events, event, args, int_array, dist, pg_list, pg, ignored };

enum EvSlot : int { e_ph, e_cat, e_name, e_pid, e_tid, e_ts, e_dur, e_id, e_args, kEvSlots };
enum ArgSlot : int {
  a_stream, a_correlation, a_bytes, a_collective, a_in_nelems, a_out_nelems, a_dtype, a_group_size,
  a_pg_name, a_pg_ranks, a_sync_kind, a_wait_stream, a_wait_record, a_name, kArgSlots
};
enum TopSlot : int { t_events, t_dist, t_base, kTopSlots };
enum DistSlot : int { d_rank, d_world, d_backend, d_pg_config, kDistSlots };
enum PgSlot : int { p_name, p_desc, p_size, p_ranks, kPgSlots };

using KeyMap = std::unordered_map<std::string, int>;
const KeyMap kEvKeys{{"ph", e_ph}, {"cat", e_cat}, {"name", e_name}, {"pid", e_pid}, {"tid", e_tid},
                     {"ts", e_ts}, {"dur", e_dur}, {"id", e_id},     {"args", e_args}};
const KeyMap kArgKeys{{"stream", a_stream},
                      {"correlation", a_correlation},
                      {"bytes", a_bytes},
                      {"Collective name", a_collective},
                      {"In msg nelems", a_in_nelems},
                      {"Out msg nelems", a_out_nelems},
                      {"dtype", a_dtype},
                      {"Group size", a_group_size},
                      {"Process Group Name", a_pg_name},
                      {"Process Group Ranks", a_pg_ranks},
                      {"cuda_sync_kind", a_sync_kind},
                      {"wait_on_stream", a_wait_stream},
                      {"wait_on_cuda_event_record_corr_id", a_wait_record},
                      {"name", a_name}};
const KeyMap kTopKeys{{"traceEvents", t_events}, {"distributedInfo", t_dist}, {"baseTimeNanoseconds", t_base}};
const KeyMap kDistKeys{{"rank", d_rank}, {"world_size", d_world}, {"backend", d_backend}, {"pg_config", d_pg_config}};
const KeyMap kPgKeys{{"pg_name", p_name}, {"pg_desc", p_desc}, {"pg_size", p_size}, {"ranks", p_ranks}};

int lookup(const KeyMap& m, const std::string& k) {
  const auto it = m.find(k);
  return it == m.end() ? -1 : it->second;
}

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
  s = std::string_view(s.data(), s.size());
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

class Handler {
 public:
  using json = nlohmann::json;
  Handler(RawFile& out) : out_(out) {}

  bool null() { return put(Val::null); }
  bool boolean(bool b) {
    Val* v = slot();
    if (v) {
      v->t = Val::boolean;
      v->i = b;
    }
    return true;
  }
  bool number_integer(json::number_integer_t x) {
    if (in_int_array()) return push_int(x);
    Val* v = slot();
    if (v) {
      v->t = Val::integer;
      v->i = x;
    }
    return true;
  }
  bool number_unsigned(json::number_unsigned_t x) {
    if (x <= uint64_t(std::numeric_limits<int64_t>::max())) return number_integer(int64_t(x));
    if (in_int_array()) return bad_array("a number out of range");
    Val* v = slot();
    if (v) {
      v->t = Val::big;
      v->s = std::to_string(x);
    }
    return true;
  }
  bool number_float(json::number_float_t x, const std::string& text) {
    if (!std::isfinite(x)) throw TraceError(fmt::format("{}: a number is out of range ({})", out_.name, text));
    if (in_int_array()) {
      if (x != std::floor(x) || std::fabs(x) > 9e15) return bad_array("a number that is not an integer");
      return push_int(int64_t(x));
    }
    Val* v = slot();
    if (v) {
      v->t = Val::floating;
      v->d = x;
      v->s = text;
    }
    return true;
  }
  bool string(std::string& s) {
    if (in_int_array()) return bad_array("a string");
    Val* v = slot();
    if (v) {
      v->t = Val::string;
      v->s.swap(s);
    }
    return true;
  }
  bool binary(json::binary_t&) { return true; }  // never produced by JSON text

  bool key(std::string& k) {
    Frame& f = stack_.back();
    switch (f.ctx) {
      case Ctx::top: f.key = lookup(kTopKeys, k); break;
      case Ctx::event: f.key = lookup(kEvKeys, k); break;
      case Ctx::args: f.key = lookup(kArgKeys, k); break;
      case Ctx::dist: f.key = lookup(kDistKeys, k); break;
      case Ctx::pg: f.key = lookup(kPgKeys, k); break;
      case Ctx::events:
      case Ctx::int_array:
      case Ctx::pg_list:
      case Ctx::ignored: f.key = -1; break;
    }
    if (f.key < 0) return true;
    if (Val* v = slot(); v && v->t != Val::none) {
      if (f.ctx == Ctx::event || f.ctx == Ctx::args)
        throw TraceError(fmt::format("{}: traceEvents[{}]: key \"{}\" appears twice in one object", out_.name,
                                     event_index_, k));
      throw TraceError(fmt::format("{}: key \"{}\" appears twice in one object", out_.name, k));
    }
    return true;
  }

  bool start_object(std::size_t) {
    if (stack_.empty()) return push(Ctx::top);
    const Frame& f = stack_.back();
    if (f.ctx == Ctx::events) return push(Ctx::event);
    if (f.ctx == Ctx::event && f.key == e_args) return mark_and_push(Ctx::args);
    if (f.ctx == Ctx::top && f.key == t_dist) return mark_and_push(Ctx::dist);
    if (f.ctx == Ctx::pg_list) {
      for (auto& v : pg_) v.clear();
      pg_ranks_.clear();
      return push(Ctx::pg);
    }
    return mark_and_push(Ctx::ignored);
  }
  bool end_object() {
    const Ctx c = stack_.back().ctx;
    stack_.pop_back();
    if (c == Ctx::event) finish_event();
    else if (c == Ctx::dist) finish_dist();
    else if (c == Ctx::pg) finish_pg();
    return true;
  }
  bool start_array(std::size_t) {
    if (stack_.empty()) return push(Ctx::events);  // a bare array of events
    const Frame& f = stack_.back();
    if (f.ctx == Ctx::top && f.key == t_events) return mark_and_push(Ctx::events);
    if (f.ctx == Ctx::args && f.key == a_pg_ranks) {
      int_array_ = &ev_ranks_;
      ev_ranks_.clear();
      return mark_and_push(Ctx::int_array);
    }
    if (f.ctx == Ctx::dist && f.key == d_pg_config) return mark_and_push(Ctx::pg_list);
    if (f.ctx == Ctx::pg && f.key == p_ranks) {
      int_array_ = &pg_ranks_;
      return mark_and_push(Ctx::int_array);
    }
    return mark_and_push(Ctx::ignored);
  }
  bool end_array() {
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    std::string msg = e.what();
    const auto close = msg.find("] ");
    if (close != std::string::npos) msg = msg.substr(close + 2);
    throw TraceError(fmt::format("{}: not valid JSON at byte {} ({})", out_.name, position, msg));
  }

  void finish() {
    if (!saw_events_)
      throw TraceError(fmt::format("{}: no \"traceEvents\" array (expected a PyTorch profiler trace)", out_.name));
  }

 private:
  struct Frame {
    Ctx ctx;
    int key = -1;
  };

  bool push(Ctx c) {
    if (c == Ctx::events) saw_events_ = true;
    if (stack_.size() >= size_t(kMaxJsonDepth))
      throw TraceError(fmt::format("{}: nested deeper than {} levels", out_.name, kMaxJsonDepth));
    stack_.push_back({c, -1});
    return true;
  }
  // A container as the value of a tracked key: the key has a value now (for
  // duplicate detection and type errors), then the container is entered.
  bool mark_and_push(Ctx c) {
    if (Val* v = slot()) v->t = Val::compound;
    return push(c);
  }
  Val* slot() {
    Frame& f = stack_.back();
    if (f.key < 0) return nullptr;
    switch (f.ctx) {
      case Ctx::top: return &top_[size_t(f.key)];
      case Ctx::event: return &ev_[size_t(f.key)];
      case Ctx::args: return &args_[size_t(f.key)];
      case Ctx::dist: return &dist_[size_t(f.key)];
      case Ctx::pg: return &pg_[size_t(f.key)];
      case Ctx::events:
      case Ctx::int_array:
      case Ctx::pg_list:
      case Ctx::ignored: return nullptr;
    }
    return nullptr;
  }
  bool put(Val::T t) {
    if (in_int_array()) return bad_array("null");
    if (Val* v = slot()) v->t = t;
    return true;
  }
  bool in_int_array() const { return !stack_.empty() && stack_.back().ctx == Ctx::int_array; }
  bool push_int(int64_t x) {
    int_array_->push_back(x);
    return true;
  }
  bool bad_array(std::string_view got) {
    if (int_array_ == &pg_ranks_)
      throw TraceError(fmt::format("{}: distributedInfo.pg_config[].ranks: expected integers, got {}", out_.name, got));
    throw TraceError(fmt::format("{}: traceEvents[{}]: args.\"Process Group Ranks\": expected integers, got {}",
                                 out_.name, event_index_, got));
  }

  // --- checked conversions; `what` names the field in messages ---
  [[noreturn]] void bad_event(std::string_view what) const {
    std::string name = ev_[e_name].t == Val::string ? ev_[e_name].s : "";
    if (name.size() > 80) name = name.substr(0, 77) + "...";
    throw TraceError(fmt::format("{}: traceEvents[{}] (\"{}\"): {}", out_.name, event_index_, name, what));
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

  void finish_event() {
    const std::string_view ph = ev_[e_ph].t == Val::string ? std::string_view(ev_[e_ph].s) : std::string_view();
    const std::string_view cat = ev_[e_cat].t == Val::string ? std::string_view(ev_[e_cat].s) : std::string_view();
    if (ph == "X") {
      x_event(cat);
    } else if (ph == "M") {
      if (ev_[e_name].t == Val::string && ev_[e_name].s == "thread_name" && args_[a_name].t == Val::string &&
          ev_[e_pid].t != Val::none && ev_[e_tid].t != Val::none)
        out_.thread_names[id_text(ev_[e_pid], "pid") + "/" + id_text(ev_[e_tid], "tid")] = trimmed(args_[a_name].s);
      else
        skip(fmt::format("ph M {}", ev_[e_name].t == Val::string ? ev_[e_name].s : "?"));
    } else if ((ph == "s" || ph == "f") && cat == "ac2g") {
      flow(ph == "s");
    } else if (ph.empty()) {
      skip("no ph");
    } else {
      skip(cat.empty() ? fmt::format("ph {}", ph) : fmt::format("ph {} cat {}", ph, cat));
    }
    for (auto& v : ev_) v.clear();
    for (auto& v : args_) v.clear();
    ++event_index_;
  }

  void x_event(std::string_view cat) {
    const auto it = kCategories.find(cat);
    if (it == kCategories.end()) {
      skip(fmt::format("ph X cat {}", cat.empty() ? "?" : cat));
      return;
    }
    if (it->second.kind == kSync) return sync_event();
    RawEvent e;
    e.index = event_index_;
    e.kind = static_cast<Kind>(it->second.kind);
    e.category = std::string(it->second.name);
    const std::optional<std::string> name = string_of(ev_[e_name], "name");
    if (!name) bad_event("missing \"name\"");
    e.start_ns = time_ns(ev_[e_ts], "ts");
    e.dur_ns = time_ns(ev_[e_dur], "dur");
    if (e.dur_ns < 0) bad_event(fmt::format("dur: expected >= 0, got {}", ev_[e_dur].t == Val::integer ? std::to_string(ev_[e_dur].i) : ev_[e_dur].s));
    e.tid = id_text(ev_[e_tid], "tid");
    e.thread = id_text(ev_[e_pid], "pid") + "/" + e.tid;
    constexpr int64_t kI64 = std::numeric_limits<int64_t>::max();
    e.correlation = int_of(args_[a_correlation], "args.correlation", 0, kI64).value_or(-1);
    if (e.kind != Kind::cpu) {
      std::optional<int64_t> stream = int_of(args_[a_stream], "args.stream", 0, kKinetoCpuStreamBase - 1);
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
      if (e.kind != Kind::kernel) e.bytes = int_of(args_[a_bytes], "args.bytes", 0, kI64).value_or(0);
      if (e.kind == Kind::kernel) nccl_fields(*name, e);
    }
    e.name = *name;
    out_.events.push_back(std::move(e));
  }

  void nccl_fields(const std::string& name, RawEvent& e) {
    const bool has_meta = args_[a_collective].t != Val::none;
    const std::string inferred = nccl_kind_from_kernel_name(name);
    if (!has_meta && inferred.empty()) return;
    constexpr int64_t kI64 = std::numeric_limits<int64_t>::max();
    KinetoCollective c;
    if (has_meta) {
      c.kind = nccl_kind_from_collective_name(*string_of(args_[a_collective], "args.\"Collective name\""));
    } else {
      c.kind = inferred;
      c.inferred = true;
    }
    c.in_nelems = int_of(args_[a_in_nelems], "args.\"In msg nelems\"", -1, kI64).value_or(-1);
    c.out_nelems = int_of(args_[a_out_nelems], "args.\"Out msg nelems\"", -1, kI64).value_or(-1);
    c.dtype = string_of(args_[a_dtype], "args.dtype").value_or("");
    c.group_size = int(int_of(args_[a_group_size], "args.\"Group size\"", 0, std::numeric_limits<int>::max()).value_or(0));
    c.process_group = string_of(args_[a_pg_name], "args.\"Process Group Name\"").value_or("");
    const Val& ranks = args_[a_pg_ranks];
    std::vector<int64_t> list;
    if (ranks.t == Val::string) {
      auto parsed = parse_int_list(ranks.s);
      if (!parsed) bad_event(fmt::format("args.\"Process Group Ranks\": expected a list of ranks like \"[0, 1]\", got \"{}\"", ranks.s));
      list = std::move(*parsed);
    } else if (ranks.t == Val::compound) {
      list = ev_ranks_;
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
    s.index = event_index_;
    s.kind = string_of(args_[a_sync_kind], "args.cuda_sync_kind").value_or(string_of(ev_[e_name], "name").value_or(""));
    s.correlation = int_of(args_[a_correlation], "args.correlation", 0, kI64).value_or(-1);
    s.stream = sync_stream(args_[a_stream], "args.stream");
    s.wait_on_stream = sync_stream(args_[a_wait_stream], "args.wait_on_stream");
    s.record_correlation = int_of(args_[a_wait_record], "args.wait_on_cuda_event_record_corr_id", -1, kI64).value_or(-1);
    out_.syncs.push_back(std::move(s));
  }

  void flow(bool start) {
    const Val& id = ev_[e_id];
    if (id.t != Val::integer || ev_[e_ts].t == Val::none || ev_[e_pid].t == Val::none || ev_[e_tid].t == Val::none) {
      skip(fmt::format("ph {} cat ac2g without id, ts, pid or tid", start ? "s" : "f"));
      return;
    }
    RawFlow f;
    f.start = start;
    f.id = id.i;
    f.thread = id_text(ev_[e_pid], "pid") + "/" + id_text(ev_[e_tid], "tid");
    f.ts_ns = time_ns(ev_[e_ts], "ts");
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

  void finish_dist() {
    constexpr int64_t kInt = std::numeric_limits<int>::max();
    out_.has_distributed_info = true;
    out_.rank = int(header_int(dist_[d_rank], "distributedInfo.rank", 0, kInt, 0));
    out_.world_size = int(header_int(dist_[d_world], "distributedInfo.world_size", 1, kInt, 0));
    if (dist_[d_backend].t == Val::string) out_.backend = dist_[d_backend].s;
    if (out_.world_size > 0 && out_.rank >= out_.world_size)
      bad_header("distributedInfo.rank", fmt::format("{} is not below world_size {}", out_.rank, out_.world_size));
  }
  void finish_pg() {
    PgConfig p;
    if (pg_[p_name].t == Val::string) p.name = pg_[p_name].s;
    if (pg_[p_desc].t == Val::string) p.desc = pg_[p_desc].s;
    p.size = header_int(pg_[p_size], "distributedInfo.pg_config[].pg_size", 0, std::numeric_limits<int>::max(), 0);
    p.ranks = pg_ranks_;
    out_.pg_config.push_back(std::move(p));
  }

 public:
  // Called once the top-level "baseTimeNanoseconds" may have been seen: Kineto
  // writes it after the events, so times are rebased at the end.
  const Val& base() const { return top_[t_base]; }
  int64_t events_seen() const { return event_index_; }

 private:
  RawFile& out_;
  std::vector<Frame> stack_;
  bool saw_events_ = false;
  std::array<Val, kTopSlots> top_;
  std::array<Val, kEvSlots> ev_;
  std::array<Val, kArgSlots> args_;
  std::array<Val, kDistSlots> dist_;
  std::array<Val, kPgSlots> pg_;
  std::vector<int64_t> ev_ranks_, pg_ranks_;
  std::vector<int64_t>* int_array_ = nullptr;
  int64_t event_index_ = 0;
};

RawFile parse(InputBuf& buf, const std::string& name) {
  RawFile out;
  out.name = name;
  Handler h(out);
  std::istream in(&buf);
  nlohmann::json::sax_parse(in, &h, nlohmann::json::input_format_t::json, true);
  h.finish();
  // baseTimeNanoseconds may come before or after the events: apply it now.
  const Val& base = h.base();
  if (base.t != Val::none) {
    if (base.t != Val::integer || base.i < 0)
      throw TraceError(fmt::format("{}: baseTimeNanoseconds: expected an integer >= 0, got {}", name,
                                   base.t == Val::big || base.t == Val::floating ? base.s : std::string(type_name(base))));
    out.base_ns = base.i;
    const auto shift = [&](int64_t& ns, int64_t index) {
      if (ns > std::numeric_limits<int64_t>::max() - out.base_ns)
        throw TraceError(fmt::format("{}: traceEvents[{}]: ts + baseTimeNanoseconds is out of range", name, index));
      ns += out.base_ns;
    };
    for (RawEvent& e : out.events) shift(e.start_ns, e.index);
    for (RawFlow& f : out.flows) shift(f.ts_ns, 0);
  }
  out.json_bytes = buf.text_bytes();
  return out;
}

}  // namespace

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

RawFile read_raw_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw TraceError(fmt::format("{}: is a directory, expected a file", path));
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw TraceError(fmt::format("{}: cannot open file ({})", path, std::strerror(errno)));
  InputBuf buf(f.get(), {}, path, kMaxInputBytes);
  return parse(buf, path);
}

RawFile read_raw_text(std::string_view text, const std::string& name) {
  InputBuf buf(nullptr, text, name, kMaxInputBytes);
  return parse(buf, name);
}

}  // namespace rm::traces::kineto_raw
