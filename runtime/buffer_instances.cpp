#include "runtime/buffer_instances.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

namespace rm::runtime {

using schedule::Instances;

int copies_of(const schedule::Buffer& b, int layers) {
  switch (b.instances) {
    case Instances::one: return 1;
    case Instances::per_layer: return std::max(1, layers);
    case Instances::per_pass: return 2;
  }
  return 1;
}

int layer_count(const schedule::Schedule& s) {
  int most = -1;
  for (const auto& op : s.ops) most = std::max(most, int(op.layer));
  return most + 1;
}

BufferInstances::BufferInstances(const schedule::Schedule& s) : layers_(layer_count(s)) {
  // per_pass: the n-th distinct (layer, phase) that uses a buffer, in op id order, uses copy n mod 2.
  struct PassState {
    int layer = -2;
    int phase = -1;
    int n = -1;
  };
  std::vector<PassState> pass(s.buffers.size());
  begin_.reserve(s.ops.size() + 1);
  begin_.push_back(0);
  for (const auto& op : s.ops) {
    if (const schedule::Access* a = s.access_of(op)) {
      auto add = [&](int b) {
        const schedule::Buffer& buf = s.buffers.at(size_t(b));
        int c = 0;
        switch (buf.instances) {
          case Instances::one: c = 0; break;
          case Instances::per_layer: c = op.layer; break;  // -1: every layer's copy
          case Instances::per_pass: {
            PassState& p = pass[size_t(b)];
            if (p.layer != op.layer || p.phase != int(op.phase)) p = {op.layer, int(op.phase), p.n + 1};
            c = p.n % 2;
            break;
          }
        }
        buffer_.push_back(b);
        copy_.push_back(c);
      };
      for (int b : a->reads) add(b);
      for (int b : a->writes) add(b);
    }
    begin_.push_back(int64_t(buffer_.size()));
  }
}

int BufferInstances::copy(schedule::OpId op, int buffer) const {
  if (op < 0 || size_t(op) + 1 >= begin_.size()) throw std::out_of_range("op " + std::to_string(op) + " is not in the Schedule");
  for (int64_t i = begin_[size_t(op)]; i < begin_[size_t(op) + 1]; ++i)
    if (buffer_[size_t(i)] == buffer) return copy_[size_t(i)];
  throw std::out_of_range("op " + std::to_string(op) + " does not access buffer " + std::to_string(buffer));
}

}  // namespace rm::runtime
