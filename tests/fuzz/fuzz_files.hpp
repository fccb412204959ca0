// What the harnesses that read files share: a scratch folder of their own
// (made once, per process, under TMPDIR) where an input is written before the
// reader under test opens it, as the CLI would, and the split of one input
// into several files at NUL bytes (no JSON text holds one raw).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <string>
#include <string_view>
#include <vector>

#include "tests/fuzz/fuzz_input.hpp"

namespace rm::fuzz {

// Removed when the process exits normally (a crash leaves it for the input's post-mortem).
inline const std::string& scratch_dir() {
  static const struct Scratch {
    std::string path;
    Scratch() {
      const char* base = std::getenv("TMPDIR");
      path = std::string(base && *base ? base : "/tmp") + "/rm-fuzz-XXXXXX";
      if (!mkdtemp(path.data())) finding("cannot make a scratch folder");
    }
    ~Scratch() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  } dir;
  return dir.path;
}

// Writes `bytes` to scratch_dir()/name and returns the path.
inline std::string write_scratch(const std::string& name, std::string_view bytes) {
  const std::string path = scratch_dir() + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) finding("cannot write a scratch file");
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) finding("short scratch write");
  std::fclose(f);
  return path;
}

// The parts of `text` between NUL bytes, at most `most` (the last keeps the rest).
inline std::vector<std::string_view> split_at_nul(std::string_view text, size_t most) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < most) {
    const size_t nul = text.find('\0');
    if (nul == std::string_view::npos) break;
    parts.push_back(text.substr(0, nul));
    text.remove_prefix(nul + 1);
  }
  parts.push_back(text);
  return parts;
}

}  // namespace rm::fuzz
