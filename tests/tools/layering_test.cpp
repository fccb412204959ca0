// The build enforces DESIGN.md's dependency table: sim/CMakeLists.txt links
// each sim/ folder's library only to the folders it may use, and this test
// holds every #include to those link lines (the one place the table lives),
// so a header that crosses the table fails here even when nothing links it.
// Also: traces/ and kernels/ use nothing of ours, sim/ never uses tools/ or
// kernels/, and ringmaster_schedule (what the runtime links) stays free of
// Boost and SimGrid. runtime/ uses ringmaster_schedule, ringmaster_sparsity (a
// static pattern's indices), kernels/ and traces/ — never the engines.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// folder -> the sim folders (and "traces") its library links, directly.
using Links = std::map<std::string, std::set<std::string>>;

Links parse_links(const std::string& cmake) {
  Links links;
  std::map<std::string, std::string> folder_of{{"ringmaster_traces", "traces"}};
  const std::regex call(R"(ringmaster_sim_library\(\s*(\w+)\s+(\w+)([^)]*)\))");
  std::vector<std::pair<std::string, std::string>> deps;  // (folder, dependency text)
  for (auto it = std::sregex_iterator(cmake.begin(), cmake.end(), call); it != std::sregex_iterator(); ++it) {
    folder_of[(*it)[1]] = (*it)[2];
    deps.emplace_back((*it)[2], (*it)[3]);
  }
  const std::regex token(R"(ringmaster_\w+)");
  for (const auto& [folder, text] : deps) {
    auto& l = links[folder];
    for (auto it = std::sregex_iterator(text.begin(), text.end(), token); it != std::sregex_iterator(); ++it)
      if (auto f = folder_of.find(it->str()); f != folder_of.end()) l.insert(f->second);
  }
  return links;
}

std::set<std::string> closure(const Links& links, const std::string& folder) {
  std::set<std::string> out{folder};
  std::vector<std::string> todo{folder};
  while (!todo.empty()) {
    const std::string f = todo.back();
    todo.pop_back();
    auto it = links.find(f);
    if (it == links.end()) continue;
    for (const auto& d : it->second)
      if (out.insert(d).second) todo.push_back(d);
  }
  return out;
}

// One source file: its path relative to the source root and its text.
struct Source {
  std::string path;
  std::string text;
};

// "sim/engine/x.cpp" includes "sim/schedule/y.hpp" -> "schedule"; "traces/..." -> "traces";
// other parts by their top folder ("tools", "kernels", "runtime").
std::vector<std::string> included_parts(const std::string& text) {
  std::vector<std::string> out;
  const std::regex inc(R"(#include\s+"(\w+)/(\w+)?)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), inc); it != std::sregex_iterator(); ++it) {
    const std::string top = (*it)[1];
    out.push_back(top == "sim" ? (*it)[2].str() : top);
  }
  return out;
}

// Every include of a file that its part may not use, as "path: includes part".
std::vector<std::string> violations(const Links& links, const std::vector<Source>& files) {
  std::vector<std::string> out;
  for (const Source& f : files) {
    const fs::path p(f.path);
    const std::string top = p.begin()->string();
    std::set<std::string> allowed;
    bool sim = false;
    if (top == "sim") {
      sim = true;
      allowed = closure(links, std::next(p.begin())->string());
    } else if (top == "traces") {
      allowed = {"traces"};
    } else if (top == "kernels") {
      allowed = {"kernels"};
    } else if (top == "runtime") {
      sim = true;  // its sim/ includes resolve to folders, like sim's own
      allowed = closure(links, "schedule");
      for (const auto& part : closure(links, "sparsity")) allowed.insert(part);
      allowed.insert({"kernels", "traces", "runtime"});
    } else {
      continue;
    }
    for (const std::string& part : included_parts(f.text)) {
      const bool ok = sim ? allowed.count(part) > 0 : part == top;
      if (!ok) out.push_back(f.path + ": includes " + part);
    }
    const bool heavy_free = sim && (allowed.count("topology") == 0 && allowed.count("engine") == 0);
    if (top == "runtime" && (f.text.find("#include <simgrid/") != std::string::npos ||
                             f.text.find("#include <boost/") != std::string::npos))
      out.push_back(f.path + ": includes Boost or SimGrid");
    if (top != "runtime" && heavy_free && (f.text.find("#include <boost/") != std::string::npos ||
                       f.text.find("#include <simgrid/") != std::string::npos))
      out.push_back(f.path + ": includes Boost or SimGrid");
  }
  return out;
}

std::vector<Source> project_sources(const fs::path& root) {
  std::vector<Source> out;
  for (const char* part : {"sim", "traces", "kernels", "runtime"})
    for (const auto& e : fs::recursive_directory_iterator(root / part)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".cpp" && ext != ".hpp" && ext != ".cu" && ext != ".cuh")) continue;
      out.push_back({fs::relative(e.path(), root).string(), read_file(e.path())});
    }
  return out;
}

const fs::path kRoot = RINGMASTER_SOURCE_DIR;

TEST(Layering, EveryIncludeFollowsTheLinkLinesOfSimCMakeLists) {
  const Links links = parse_links(read_file(kRoot / "sim/CMakeLists.txt"));
  ASSERT_GE(links.size(), 8u) << "sim/CMakeLists.txt: expected one ringmaster_sim_library line per folder";
  const auto sources = project_sources(kRoot);
  ASSERT_GT(sources.size(), 50u);
  const auto bad = violations(links, sources);
  std::string all;
  for (const auto& v : bad) all += v + "\n";
  EXPECT_TRUE(bad.empty()) << all;
}

TEST(Layering, TheScheduleLibraryLinksNeitherBoostNorSimGrid) {
  const Links links = parse_links(read_file(kRoot / "sim/CMakeLists.txt"));
  const auto deps = closure(links, "schedule");
  EXPECT_EQ(deps.count("topology"), 0u);  // Boost.Graph
  EXPECT_EQ(deps.count("engine"), 0u);    // SimGrid
  const std::string cmake = read_file(kRoot / "sim/CMakeLists.txt");
  const std::regex line(R"(ringmaster_sim_library\(\s*ringmaster_schedule\s+schedule([^)]*)\))");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(cmake, m, line));
  EXPECT_EQ(m[1].str().find("Boost"), std::string::npos);
  EXPECT_EQ(m[1].str().find("SIMGRID"), std::string::npos);
}

// The checker itself: a crossing include, a kernels file using traces, and
// Boost in the schedule folder are each caught; allowed includes are not.
TEST(Layering, TheCheckerCatchesEachKindOfViolation) {
  const Links links = parse_links(
      "ringmaster_sim_library(ringmaster_config config ringmaster_configs)\n"
      "ringmaster_sim_library(ringmaster_schedule schedule ringmaster_config)\n"
      "ringmaster_sim_library(ringmaster_topology topology ringmaster_config Boost::boost)\n"
      "ringmaster_sim_library(ringmaster_engine engine ringmaster_schedule ringmaster_topology\n"
      "                       ringmaster_traces)\n");
  const std::vector<Source> files{
      {"sim/engine/a.cpp", "#include \"sim/config/x.hpp\"\n#include \"traces/timeline.hpp\"\n"},  // ok (transitive)
      {"sim/schedule/b.cpp", "#include \"sim/topology/t.hpp\"\n"},                               // crosses
      {"sim/schedule/c.cpp", "#include <boost/graph/adjacency_list.hpp>\n"},                     // heavy
      {"sim/config/d.cpp", "#include \"tools/cli/x.hpp\"\n"},                                    // tools
      {"kernels/e.cpp", "#include \"traces/timeline.hpp\"\n"},                                   // kernels
      {"traces/f.cpp", "#include \"traces/g.hpp\"\n"},                                           // ok
      {"runtime/g.cpp", "#include \"sim/schedule/s.hpp\"\n#include \"kernels/k.hpp\"\n"},             // ok
      {"runtime/h.cpp", "#include \"sim/engine/e.hpp\"\n"},                                     // the engines
  };
  const auto bad = violations(links, files);
  EXPECT_EQ(bad, (std::vector<std::string>{"sim/schedule/b.cpp: includes topology",
                                           "sim/schedule/c.cpp: includes Boost or SimGrid",
                                           "sim/config/d.cpp: includes tools", "kernels/e.cpp: includes traces",
                                           "runtime/h.cpp: includes engine"}));
}

}  // namespace
