// The edges one Kineto file implies (docs/kineto.md, "Edges"): stream order on
// each CUDA stream, CPU launch -> GPU event by correlation id (ac2g flows as a
// fallback), and sync edges from cuda_sync events — or, in traces without
// them, from the names of the blocking runtime calls and the record/wait
// pattern on each CPU thread. Launch order on a
// stream is correlation order: CUPTI numbers runtime calls in call order.
#include <algorithm>
#include <set>
#include <tuple>
#include <unordered_map>

#include "traces/kineto_raw.hpp"

namespace rm::traces::kineto_raw {

namespace {

bool is_runtime(const RawEvent& e) { return e.category == "cuda_runtime" || e.category == "cuda_driver"; }

// GPU events of each stream in launch (correlation) order, for "the last op
// launched on S before call c" and "the first op launched on S after call c".
class LaunchOrder {
 public:
  explicit LaunchOrder(const RawFile& f) : f_(f) {
    for (size_t i = 0; i < f.events.size(); ++i) {
      const RawEvent& e = f.events[i];
      if (e.kind != Kind::cpu && e.correlation >= 0) by_stream_[e.stream].push_back({e.correlation, i});
    }
    for (auto& [stream, v] : by_stream_) std::sort(v.begin(), v.end());
  }
  // Index of the last GPU event on `stream` launched before correlation `c`; -1: none.
  int64_t last_before(int stream, int64_t c) const {
    const auto it = by_stream_.find(stream);
    if (it == by_stream_.end()) return -1;
    const auto& v = it->second;
    auto pos = std::lower_bound(v.begin(), v.end(), std::pair<int64_t, size_t>{c, 0});
    return pos == v.begin() ? -1 : int64_t(std::prev(pos)->second);
  }
  int64_t first_after(int stream, int64_t c) const {
    const auto it = by_stream_.find(stream);
    if (it == by_stream_.end()) return -1;
    const auto& v = it->second;
    auto pos = std::upper_bound(v.begin(), v.end(), std::pair<int64_t, size_t>{c, f_.events.size()});
    return pos == v.end() ? -1 : int64_t(pos->second);
  }
  std::vector<int> streams() const {
    std::vector<int> s;
    for (const auto& [stream, v] : by_stream_) s.push_back(stream);
    return s;
  }

 private:
  const RawFile& f_;
  std::map<int, std::vector<std::pair<int64_t, size_t>>> by_stream_;
};

int64_t end_ns(const RawEvent& e) { return e.start_ns + e.dur_ns; }

// cudaStreamWaitEvent without a cuda_sync event names neither stream. The
// pattern PyTorch issues (DDP, FSDP, NCCL work) is: launch on stream A,
// cudaEventRecord, cudaStreamWaitEvent, launch on stream B, all from one CPU
// thread; so the thread's last GPU op launched before the record is taken as
// the awaited one (the last launched before the wait when the thread has no
// cudaEventRecord call, as in older traces) and its first launched after the
// wait as the waiter. Kept
// only when the streams differ and the recorded times agree (the waiter
// started after the awaited op ended).
template <class Sync>
void wait_events_by_thread(const RawFile& f, const std::unordered_map<int64_t, size_t>& call_of, const Sync& sync) {
  const auto& ev = f.events;
  // Per CPU thread, in correlation order: launches (the GPU event) and the two calls of interest.
  struct Item {
    int64_t correlation;
    int what;      // 0 launch, 1 cudaEventRecord, 2 cudaStreamWaitEvent
    size_t index;  // the GPU event (launch) or the call
  };
  std::map<std::string, std::vector<Item>> on_thread;
  for (size_t i = 0; i < ev.size(); ++i) {
    const RawEvent& e = ev[i];
    if (e.correlation < 0) continue;
    if (e.kind != Kind::cpu) {
      const auto it = call_of.find(e.correlation);
      if (it != call_of.end()) on_thread[ev[it->second].thread].push_back({e.correlation, 0, i});
    } else if (e.category == "cuda_runtime" && (e.name == "cudaEventRecord" || e.name == "cudaStreamWaitEvent")) {
      on_thread[e.thread].push_back({e.correlation, e.name == "cudaEventRecord" ? 1 : 2, i});
    }
  }
  for (auto& [thread, items] : on_thread) {
    std::stable_sort(items.begin(), items.end(),
                     [](const Item& a, const Item& b) { return a.correlation < b.correlation; });
    int64_t last_launch = -1, awaited = -1;  // GPU event indices
    bool recorded = false;                   // a cudaEventRecord seen on this thread
    for (size_t k = 0; k < items.size(); ++k) {
      const Item& it = items[k];
      if (it.what == 0) {
        last_launch = int64_t(it.index);
      } else if (it.what == 1) {
        awaited = last_launch;
        recorded = true;
      } else {
        const int64_t src = recorded ? awaited : last_launch;
        if (src < 0) continue;
        for (size_t n = k + 1; n < items.size(); ++n)
          if (items[n].what == 0) {
            const RawEvent& a = ev[size_t(src)];
            const RawEvent& b = ev[items[n].index];
            if (a.stream != b.stream && end_ns(a) <= b.start_ns) sync(src, int64_t(items[n].index));
            break;
          }
      }
    }
  }
}

}  // namespace

FileEdges infer_file_edges(const RawFile& f, const std::vector<int64_t>& ops) {
  FileEdges out;
  const auto& ev = f.events;

  // Stream order: consecutive GPU events of a stream by start (file order on ties).
  std::map<int, std::vector<size_t>> on_stream;
  for (size_t i = 0; i < ev.size(); ++i)
    if (ev[i].kind != Kind::cpu) on_stream[ev[i].stream].push_back(i);
  for (auto& [stream, v] : on_stream) {
    std::stable_sort(v.begin(), v.end(), [&](size_t a, size_t b) { return ev[a].start_ns < ev[b].start_ns; });
    for (size_t k = 1; k < v.size(); ++k) out.stream.push_back({ops[v[k - 1]], ops[v[k]], EdgeKind::stream});
  }

  // Launch: the runtime (else driver) call with the GPU event's correlation id.
  std::unordered_map<int64_t, size_t> call_of;
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < ev.size(); ++i)
      if (ev[i].correlation >= 0 && ev[i].category == (pass == 0 ? "cuda_runtime" : "cuda_driver"))
        call_of.try_emplace(ev[i].correlation, i);
  std::vector<bool> launched(ev.size(), false);
  for (size_t i = 0; i < ev.size(); ++i) {
    if (ev[i].kind == Kind::cpu || ev[i].correlation < 0) continue;
    const auto it = call_of.find(ev[i].correlation);
    if (it == call_of.end()) continue;
    out.launch.push_back({ops[it->second], ops[i], EdgeKind::launch});
    launched[i] = true;
  }
  // Fallback: an ac2g flow from a runtime call's start to a GPU event's start.
  std::map<std::pair<std::string, int64_t>, size_t> call_at, gpu_at;
  for (size_t i = 0; i < ev.size(); ++i) {
    if (is_runtime(ev[i])) call_at.try_emplace({ev[i].thread, ev[i].start_ns}, i);
    else if (ev[i].kind != Kind::cpu && !launched[i]) gpu_at.try_emplace({ev[i].thread, ev[i].start_ns}, i);
  }
  if (!gpu_at.empty()) {
    std::map<int64_t, std::pair<const RawFlow*, const RawFlow*>> flows;  // id -> (s, f)
    for (const RawFlow& fl : f.flows) {
      auto& slot = flows[fl.id];
      (fl.start ? slot.first : slot.second) = &fl;
    }
    for (const auto& [id, sf] : flows) {
      if (!sf.first || !sf.second) continue;
      const auto c = call_at.find({sf.first->thread, sf.first->ts_ns});
      const auto g = gpu_at.find({sf.second->thread, sf.second->ts_ns});
      if (c == call_at.end() || g == gpu_at.end() || launched[g->second]) continue;
      out.launch.push_back({ops[c->second], ops[g->second], EdgeKind::launch});
      launched[g->second] = true;
    }
  }
  std::sort(out.launch.begin(), out.launch.end(),
            [](const Edge& a, const Edge& b) { return std::tie(a.to, a.from) < std::tie(b.to, b.from); });

  // Sync edges, deduplicated, in the order found.
  const LaunchOrder order(f);
  std::set<std::pair<int64_t, int64_t>> seen;
  auto sync = [&](int64_t from_index, int64_t to_index) {
    if (from_index < 0 || to_index < 0) return;
    const int64_t a = ops[size_t(from_index)], b = ops[size_t(to_index)];
    if (seen.insert({a, b}).second) out.sync.push_back({a, b, EdgeKind::sync});
  };
  auto call = [&](int64_t correlation) -> int64_t {
    const auto it = call_of.find(correlation);
    return it == call_of.end() ? -1 : int64_t(it->second);
  };
  if (!f.syncs.empty()) {
    for (const RawSync& s : f.syncs) {
      if (s.kind == "Stream Wait Event") {  // cudaStreamWaitEvent: the next op on s.stream waits
        if (s.stream == s.wait_on_stream) continue;
        sync(order.last_before(s.wait_on_stream, s.record_correlation), order.first_after(s.stream, s.correlation));
      } else if (s.kind == "Event Sync") {  // cudaEventSynchronize / cudaEventQuery on a recorded event
        const int64_t src = order.last_before(s.wait_on_stream, s.record_correlation), dst = call(s.correlation);
        // A query does not block: it says the event had completed only if the op ended before it returned.
        if (src >= 0 && dst >= 0 && ev[size_t(dst)].name == "cudaEventQuery" &&
            end_ns(ev[size_t(src)]) > end_ns(ev[size_t(dst)]))
          continue;
        sync(src, dst);
      } else if (s.kind == "Stream Sync") {
        sync(order.last_before(s.stream, s.correlation), call(s.correlation));
      } else if (s.kind == "Context Sync") {
        for (int stream : order.streams()) sync(order.last_before(stream, s.correlation), call(s.correlation));
      } else {
        ++out.skipped["cuda_sync " + (s.kind.empty() ? std::string("?") : s.kind)];
      }
    }
    return out;
  }
  // No cuda_sync events: the blocking calls by name. cudaDeviceSynchronize waits
  // for every stream; a stream or event synchronize for one we cannot name, so
  // the GPU op it most plausibly waited for is taken: of the last op launched
  // on each stream before the call, the one that ended last before it returned.
  for (size_t i = 0; i < ev.size(); ++i) {
    const RawEvent& c = ev[i];
    if (c.category != "cuda_runtime" || c.correlation < 0) continue;
    const bool device = c.name == "cudaDeviceSynchronize";
    if (!device && c.name != "cudaStreamSynchronize" && c.name != "cudaEventSynchronize") continue;
    int64_t best = -1;
    for (int stream : order.streams()) {
      const int64_t g = order.last_before(stream, c.correlation);
      if (g < 0) continue;
      if (device) sync(g, int64_t(i));
      else if (end_ns(ev[size_t(g)]) <= end_ns(c) && (best < 0 || end_ns(ev[size_t(g)]) > end_ns(ev[size_t(best)])))
        best = g;
    }
    if (!device) sync(best, int64_t(i));
  }
  wait_events_by_thread(f, call_of, sync);
  return out;
}

}  // namespace rm::traces::kineto_raw
