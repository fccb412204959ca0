#include "sim/engine/simgrid_wrapper.hpp"

#include <cmath>
#include <stdexcept>

#include <simgrid/s4u.hpp>
#include <xbt/log.h>

namespace rm::engine::sg {

namespace s4u = simgrid::s4u;

struct Simulation::Impl {
  std::unique_ptr<s4u::Engine> engine;
  s4u::NetZone* zone = nullptr;
  std::vector<s4u::Host*> hosts;
  std::vector<s4u::Link*> links;
  bool sealed = false;
  std::vector<s4u::ActivityPtr> pending;  // in start order
  std::vector<int64_t> tags;              // parallel to pending
};

Simulation::Simulation() : impl_(std::make_unique<Impl>()) {
  xbt_log_control_set("root.thresh:critical");
  impl_->engine = std::make_unique<s4u::Engine>("ringmaster");
  s4u::Engine::set_config("network/model:CM02");
  s4u::Engine::set_config("network/crosstraffic:0");
  s4u::Engine::set_config("network/latency-factor:1");
  s4u::Engine::set_config("network/bandwidth-factor:1");
  s4u::Engine::set_config("network/weight-S:0");
  s4u::Engine::set_config("network/TCP-gamma:0");
  impl_->zone = s4u::create_full_zone("ringmaster");
}

Simulation::~Simulation() = default;

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
  impl_->zone->add_route(impl_->hosts[static_cast<size_t>(src)]->get_netpoint(),
                         impl_->hosts[static_cast<size_t>(dst)]->get_netpoint(), nullptr, nullptr, route, false);
}

void Simulation::spawn(const std::string& name, int host, std::function<void()> body) {
  if (!impl_->sealed) {
    impl_->zone->seal();
    impl_->sealed = true;
  }
  s4u::Actor::create(name, impl_->hosts[static_cast<size_t>(host)], std::move(body));
}

void Simulation::run() {
  if (!impl_->sealed) {
    impl_->zone->seal();
    impl_->sealed = true;
  }
  impl_->engine->run();
}

double Simulation::now() const { return s4u::Engine::get_clock(); }

void Simulation::start_execute(int host, double flops, int64_t tag) {
  impl_->pending.push_back(s4u::this_actor::exec_init(flops)->set_host(impl_->hosts[static_cast<size_t>(host)])->start());
  impl_->tags.push_back(tag);
}

void Simulation::start_transfer(int src, int dst, double bytes, int64_t tag) {
  impl_->pending.push_back(s4u::Comm::sendto_async(impl_->hosts[static_cast<size_t>(src)],
                                                   impl_->hosts[static_cast<size_t>(dst)],
                                                   static_cast<uint64_t>(std::llround(bytes))));
  impl_->tags.push_back(tag);
}

size_t Simulation::in_flight() const { return impl_->pending.size(); }

int64_t Simulation::wait_next() {
  const ssize_t i = s4u::Activity::wait_any(impl_->pending);
  if (i < 0 || static_cast<size_t>(i) >= impl_->pending.size())
    throw std::runtime_error("simgrid: wait_any returned no activity");
  const auto at = static_cast<size_t>(i);
  const int64_t tag = impl_->tags[at];
  impl_->pending.erase(impl_->pending.begin() + i);
  impl_->tags.erase(impl_->tags.begin() + i);
  return tag;
}

}  // namespace rm::engine::sg
