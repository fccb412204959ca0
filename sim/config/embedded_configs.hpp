// The configs/ folder compiled into the binary (see configs/CMakeLists.txt):
// the defaults every command falls back to when no file on disk overrides them.
#pragma once

#include <span>
#include <string_view>

namespace rm {

struct EmbeddedConfig {
  std::string_view path;  // relative to configs/, e.g. "clusters/h200-1x8.json"
  std::string_view text;
};

std::span<const EmbeddedConfig> embedded_configs();

}  // namespace rm
