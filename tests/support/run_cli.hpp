// Runs the real ringmaster binary in a shell and captures what it printed.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

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

// Runs the CLI in `workdir` and expects a refusal: exit code 2, nothing on
// standard output, one line on standard error, which it returns.
inline std::string expect_one_line_refusal(const std::string& args, const std::string& workdir) {
  const auto r = run_cli(args, workdir);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  return r.err;
}

}  // namespace rm::test
