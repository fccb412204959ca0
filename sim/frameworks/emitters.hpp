// The emitters behind frameworks::emit(), one file each, and what they share:
// a record of the changes that turn a layout into the nearest one a framework runs.
#pragma once

#include <string>
#include <type_traits>
#include <vector>

#include "sim/frameworks/framework.hpp"

namespace rm::frameworks {

// Collects the nearest layout and the reason for each change.
class Nearest {
 public:
  Nearest(const Experiment& e, std::string framework) : p(e.parallel), framework_(std::move(framework)) {}
  Parallel p;  // starts as the given layout
  std::vector<std::string> changes;
  // Sets `field` (a member of p) to `to` where it differs, noting "parallel.<key> <to> (was <from>): <why>".
  template <class T>
  void set(T& field, const T& to, const char* key, const std::string& why) {
    if (field == to) return;
    changes.push_back(describe(key, value_text(field), value_text(to), why));
    field = to;
  }
  [[noreturn]] void refuse(const std::string& why) const;
  // What the emitter hands back, before its text: f, the layout it runs (e with p) and the changes.
  Emission emission(Framework f, const Experiment& e) const { return {f, "", with_parallel(e, p), changes}; }
  const std::string& framework() const { return framework_; }

 private:
  static std::string describe(const char* key, const std::string& from, const std::string& to, const std::string& why);
  template <class T>
  static std::string value_text(const T& v) {
    if constexpr (std::is_enum_v<T>) return to_string(v);
    else return std::to_string(v);
  }
  std::string framework_;
};

// Lines of comments that open every emitted text: what it is, the layout and the changes.
std::string comment_header(const std::string& prefix, const std::string& title, const Experiment& runs,
                           const std::vector<std::string>& changes);

Emission emit_experiment(const Experiment& e, const ConfigStore& store);
Emission emit_megatron(const Experiment& e);
Emission emit_te(const Experiment& e);
Emission emit_internevo(const Experiment& e);
Emission emit_yunchang(const Experiment& e);
Emission emit_mtraining(const Experiment& e);

// The layout Megatron-LM and TransformerEngine run (they share the context-parallel code).
Nearest megatron_nearest(const Experiment& e, const std::string& framework);

}  // namespace rm::frameworks
