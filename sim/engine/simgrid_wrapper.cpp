#include "sim/engine/simgrid_wrapper.hpp"

#include <cmath>
#include <stdexcept>
#include <unordered_map>

#include <simgrid/kernel/Timer.hpp>
#include <simgrid/kernel/resource/Action.hpp>
#include <simgrid/s4u.hpp>
#include <xbt/config.hpp>
#include <xbt/log.h>

namespace rm::engine::sg {

namespace s4u = simgrid::s4u;
namespace kr = simgrid::kernel::resource;

struct Simulation::Impl {
  Mode mode = Mode::alarm;
  std::unique_ptr<s4u::Engine> engine;
  s4u::NetZone* zone = nullptr;
  std::vector<s4u::Host*> hosts;
  std::vector<s4u::Link*> links;
  bool sealed = false;
  double precision = 1e-9;  // SimGrid's surf/precision, read once the engine is up

  // Transfers in flight, in slots reused through a free list; found by their
  // kernel activity when SimGrid reports their end.
  struct Slot {
    s4u::CommPtr comm;
    int64_t tag = 0;
  };
  std::vector<Slot> slots;
  std::vector<int32_t> free_slots;
  std::unordered_map<const void*, int32_t> slot_of;
  size_t in_flight = 0;
  std::vector<int32_t> ended_slots;  // this step, in SimGrid's end order
  std::vector<int64_t> ended_tags;

  bool failed = false;
  s4u::ActorPtr driver;
  bool waiting = false;
  double alarm = -1;
  simgrid::kernel::timer::Timer* timer = nullptr;
  double timer_date = -1;

  std::vector<s4u::ActivityPtr> pending;  // Mode::wait_any, in start order
  std::vector<int64_t> pending_tags;      // parallel to pending

  void seal() {
    if (!sealed) zone->seal(), sealed = true;
  }
  bool due(double date) const { return date >= 0 && std::fabs(date - s4u::Engine::get_clock()) < precision; }
};

Simulation::Simulation(Mode mode) : impl_(std::make_unique<Impl>()) {
  impl_->mode = mode;
  xbt_log_control_set("root.thresh:critical");
  impl_->engine = std::make_unique<s4u::Engine>("ringmaster");
  s4u::Engine::set_config("network/model:CM02");
  s4u::Engine::set_config("network/crosstraffic:0");
  s4u::Engine::set_config("network/latency-factor:1");
  s4u::Engine::set_config("network/bandwidth-factor:1");
  s4u::Engine::set_config("network/weight-S:0");
  s4u::Engine::set_config("network/TCP-gamma:0");
  impl_->precision = simgrid::config::get_value<double>("surf/precision");
  // Routes are listed per GPU pair the schedule uses, as bypass routes of an
  // empty zone: a sparse map, where a full zone holds a hosts x hosts table.
  // (Zones per node under a fabric zone do not fit: SimGrid 3.32 sums a
  // route's latency between zones before the parts inside them, not in link
  // order, and routes between zones are one per zone pair, while rails and
  // ECMP spines make a route depend on the GPU pair; see docs/simgrid.md.)
  impl_->zone = s4u::create_empty_zone("ringmaster");

  Impl* im = impl_.get();
  // A transfer's action turns FINISHED while SimGrid updates the network
  // model, in the order it ends them. NetworkAction is only declared in the
  // installed headers; it derives from Action alone, so the reference is one.
  s4u::Link::on_communication_state_change_cb([im](kr::NetworkAction& na, kr::Action::State) {
    const auto& a = reinterpret_cast<const kr::Action&>(na);
    if (a.get_state() != kr::Action::State::FINISHED && a.get_state() != kr::Action::State::FAILED) return;
    const auto it = im->slot_of.find(a.get_activity());
    if (it == im->slot_of.end()) return;
    if (a.get_state() == kr::Action::State::FAILED) im->failed = true;  // thrown by wait, not inside SimGrid
    im->ended_slots.push_back(it->second);
    im->slot_of.erase(it);
  });
  // After each clock step: wake the driver if anything of its ended.
  s4u::Engine::on_time_advance_cb([im](double) {
    if (im->waiting && (!im->ended_slots.empty() || im->due(im->alarm))) {
      im->waiting = false;
      im->driver->resume();
    }
  });
}

Simulation::~Simulation() {
  if (impl_->timer != nullptr) impl_->timer->remove();
}

int Simulation::add_host(const std::string& name, double flops_per_s) {
  impl_->hosts.push_back(impl_->zone->create_host(name, flops_per_s)->seal());
  return static_cast<int>(impl_->hosts.size()) - 1;
}

int Simulation::add_link(const std::string& name, double bytes_per_s, double latency_s, bool shared) {
  s4u::Link* l = impl_->zone->create_link(name, bytes_per_s)->set_latency(latency_s);
  if (!shared) l->set_sharing_policy(s4u::Link::SharingPolicy::FATPIPE);
  impl_->links.push_back(l->seal());
  return static_cast<int>(impl_->links.size()) - 1;
}

void Simulation::add_route(int src, int dst, const std::vector<int>& links) {
  std::vector<s4u::LinkInRoute> route;
  route.reserve(links.size());
  for (int l : links) route.emplace_back(impl_->links[static_cast<size_t>(l)]);
  impl_->zone->add_bypass_route(impl_->hosts[static_cast<size_t>(src)]->get_netpoint(),
                                impl_->hosts[static_cast<size_t>(dst)]->get_netpoint(), nullptr, nullptr, route);
}

void Simulation::spawn(const std::string& name, int host, std::function<void()> body) {
  impl_->seal();
  impl_->driver = s4u::Actor::create(name, impl_->hosts[static_cast<size_t>(host)], std::move(body));
}

void Simulation::run() {
  impl_->seal();
  impl_->engine->run();
}

double Simulation::now() const { return s4u::Engine::get_clock(); }

void Simulation::start_transfer(int src, int dst, double bytes, int64_t tag) {
  Impl& im = *impl_;
  if (im.mode == Mode::wait_any) {
    im.pending.push_back(s4u::Comm::sendto_async(im.hosts[static_cast<size_t>(src)],
                                                 im.hosts[static_cast<size_t>(dst)],
                                                 static_cast<uint64_t>(std::llround(bytes))));
    im.pending_tags.push_back(tag);
    return;
  }
  int32_t slot;
  if (!im.free_slots.empty()) {
    slot = im.free_slots.back();
    im.free_slots.pop_back();
  } else {
    slot = static_cast<int32_t>(im.slots.size());
    im.slots.emplace_back();
  }
  Impl::Slot& s = im.slots[static_cast<size_t>(slot)];
  s.comm = s4u::Comm::sendto_async(im.hosts[static_cast<size_t>(src)], im.hosts[static_cast<size_t>(dst)],
                                   static_cast<uint64_t>(std::llround(bytes)));
  s.tag = tag;
  im.slot_of.emplace(s.comm->get_impl(), slot);
  ++im.in_flight;
}

size_t Simulation::transfers_in_flight() const { return impl_->in_flight; }

// The timer is kernel state; the driver touches it between clock steps from
// its own context, which SimGrid runs sequentially with the kernel (no
// parallel contexts), so no simcall is needed.
void Simulation::set_alarm(double date) {
  Impl& im = *impl_;
  im.alarm = date;
  if (im.timer != nullptr && im.timer_date == date) return;
  if (im.timer != nullptr) im.timer->remove(), im.timer = nullptr;
  if (date < 0) return;
  im.timer_date = date;
  im.timer = simgrid::kernel::timer::Timer::set(date, [&im] { im.timer = nullptr; });
}

bool Simulation::due(double date) const { return impl_->due(date); }

const std::vector<int64_t>& Simulation::wait() {
  Impl& im = *impl_;
  im.ended_slots.clear();
  im.waiting = true;
  s4u::this_actor::suspend();
  if (im.failed) throw std::runtime_error("simgrid: a transfer failed");
  im.ended_tags.clear();
  for (int32_t slot : im.ended_slots) {
    Impl::Slot& s = im.slots[static_cast<size_t>(slot)];
    im.ended_tags.push_back(s.tag);
    s.comm = nullptr;
    im.free_slots.push_back(slot);
    --im.in_flight;
  }
  return im.ended_tags;
}

void Simulation::start_execute(int host, double flops, int64_t tag) {
  Impl& im = *impl_;
  if (im.mode != Mode::wait_any) throw std::logic_error("simgrid: executions only in Mode::wait_any");
  im.pending.push_back(s4u::this_actor::exec_init(flops)->set_host(im.hosts[static_cast<size_t>(host)])->start());
  im.pending_tags.push_back(tag);
}

size_t Simulation::activities_in_flight() const { return impl_->pending.size(); }

int64_t Simulation::wait_any() {
  Impl& im = *impl_;
  const ssize_t i = s4u::Activity::wait_any(im.pending);
  if (i < 0 || static_cast<size_t>(i) >= im.pending.size())
    throw std::runtime_error("simgrid: wait_any returned no activity");
  const int64_t tag = im.pending_tags[static_cast<size_t>(i)];
  im.pending.erase(im.pending.begin() + i);
  im.pending_tags.erase(im.pending_tags.begin() + i);
  return tag;
}

}  // namespace rm::engine::sg
