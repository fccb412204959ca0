// The streaming half of the Kineto reader: one pass of nlohmann's SAX parser
// over the (gunzipped in chunks) text, filling the slots of
// traces/kineto_fields.hpp for each entry and handing it on. No DOM is built,
// so memory follows the events kept, not the file: a trace of hundreds of MB
// reads in one pass.
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "traces/json_text.hpp"
#include "traces/kineto_fields.hpp"
#include "traces/kineto_input.hpp"
#include "traces/text_file.hpp"
#include "traces/trace_error.hpp"

namespace rm::traces::kineto_raw {

namespace {

// Where a value goes: the containers of interest, everything else ignored.
enum class Ctx : uint8_t { top, events, event, args, int_array, dist, pg_list, pg, ignored };

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
                                     s_.index, k));
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
      for (auto& v : s_.pg) v.clear();
      s_.pg_ranks.clear();
      return push(Ctx::pg);
    }
    return mark_and_push(Ctx::ignored);
  }
  bool end_object() {
    const Ctx c = stack_.back().ctx;
    stack_.pop_back();
    if (c == Ctx::event) {
      take_event(s_, out_);
      for (auto& v : s_.ev) v.clear();
      for (auto& v : s_.args) v.clear();
      ++s_.index;
    } else if (c == Ctx::dist) {
      take_distributed_info(s_, out_);
    } else if (c == Ctx::pg) {
      take_pg_config(s_, out_);
    }
    return true;
  }
  bool start_array(std::size_t) {
    if (stack_.empty()) return push(Ctx::events);  // a bare array of events
    const Frame& f = stack_.back();
    if (f.ctx == Ctx::top && f.key == t_events) return mark_and_push(Ctx::events);
    if (f.ctx == Ctx::args && f.key == a_pg_ranks) {
      int_array_ = &s_.ev_ranks;
      s_.ev_ranks.clear();
      return mark_and_push(Ctx::int_array);
    }
    if (f.ctx == Ctx::dist && f.key == d_pg_config) return mark_and_push(Ctx::pg_list);
    if (f.ctx == Ctx::pg && f.key == p_ranks) {
      int_array_ = &s_.pg_ranks;
      return mark_and_push(Ctx::int_array);
    }
    return mark_and_push(Ctx::ignored);
  }
  bool end_array() {
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    throw TraceError(fmt::format("{}: not valid JSON at byte {} ({})", out_.name, position, json_error_reason(e.what())));
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
    if (stack_.empty()) return nullptr;  // a scalar as the whole text: refused as "no traceEvents" at the end
    Frame& f = stack_.back();
    if (f.key < 0) return nullptr;
    switch (f.ctx) {
      case Ctx::top: return &top_[size_t(f.key)];
      case Ctx::event: return &s_.ev[size_t(f.key)];
      case Ctx::args: return &s_.args[size_t(f.key)];
      case Ctx::dist: return &s_.dist[size_t(f.key)];
      case Ctx::pg: return &s_.pg[size_t(f.key)];
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
    if (int_array_ == &s_.pg_ranks)
      throw TraceError(fmt::format("{}: distributedInfo.pg_config[].ranks: expected integers, got {}", out_.name, got));
    throw TraceError(fmt::format("{}: traceEvents[{}]: args.\"Process Group Ranks\": expected integers, got {}",
                                 out_.name, s_.index, got));
  }

 public:
  // Read once parsing is done: Kineto writes "baseTimeNanoseconds" after the
  // events, so times are rebased at the end.
  const Val& base() const { return top_[t_base]; }
  int64_t events_seen() const { return s_.index; }

 private:
  RawFile& out_;
  std::vector<Frame> stack_;
  bool saw_events_ = false;
  std::array<Val, kTopSlots> top_;
  Slots s_;
  std::vector<int64_t>* int_array_ = nullptr;
};

RawFile parse(InputBuf& buf, const std::string& name) {
  RawFile out;
  out.name = name;
  Handler h(out);
  nlohmann::json::sax_parse(InputIter(&buf), InputIter(), &h, nlohmann::json::input_format_t::json, true);
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
  out.trace_events = h.events_seen();
  return out;
}

}  // namespace

RawFile read_raw_file(const std::string& path) {
  const int fd = open_input_file(path);  // a regular file only: a FIFO would block, a device never end
  std::unique_ptr<FILE, int (*)(FILE*)> f(::fdopen(fd, "rb"), &std::fclose);
  if (!f) {
    const int err = errno;
    ::close(fd);
    throw TraceError(fmt::format("{}: cannot open file ({})", path, std::strerror(err)));
  }
  InputBuf buf(f.get(), {}, path, kMaxInputBytes);
  return parse(buf, path);
}

RawFile read_raw_text(std::string_view text, const std::string& name) {
  InputBuf buf(nullptr, text, name, kMaxInputBytes);
  return parse(buf, name);
}

}  // namespace rm::traces::kineto_raw
