// Runs the real ringmaster binary in a shell and captures what it printed.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

namespace rm::test {

struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

inline std::string slurp(const std::string& path) {
  std::string s;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    std::array<char, 4096> buf;
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) s.append(buf.data(), n);
    std::fclose(f);
  }
  return s;
}

// A fresh folder under the system temp folder, unique to this process.
inline std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

// args are passed through the shell as written (quote them yourself).
inline CliResult run_cli(const std::string& args, const std::string& workdir = ".") {
  static int counter = 0;
  const std::string errfile = "/tmp/rm_cli_err_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
  const std::string cmd = "cd '" + workdir + "' && '" + std::string(RINGMASTER_BIN) + "' " + args + " 2>" + errfile;
  CliResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = slurp(errfile);
  std::remove(errfile.c_str());
  return r;
}

}  // namespace rm::test
