// back_heap_with_huge_pages re-executes the program once with glibc's heap
// tunable set, and not at all where the tunable is already set. The test
// forks, and the child calls it with argv naming this very test, so the
// re-executed image runs this test again in child mode and reports by its
// exit status what environment it got.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "tools/cli/allocator_tuning.hpp"

namespace {

constexpr const char* kChildMark = "RM_ALLOCATOR_TUNING_TEST_CHILD";
constexpr int kNotReexecuted = 3;
constexpr int kWrongTunables = 4;

// Forks; the child sets GLIBC_TUNABLES to `tunables` (unset when null) and
// calls the function with argv that re-runs `test`. Returns the child's exit status.
int run_child(const char* tunables, const std::string& test) {
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (tunables == nullptr) unsetenv("GLIBC_TUNABLES");
    else setenv("GLIBC_TUNABLES", tunables, 1);
    setenv(kChildMark, "1", 1);
    std::string self = "/proc/self/exe", filter = "--gtest_filter=" + test;
    char* argv[] = {self.data(), filter.data(), nullptr};
    rm::cli::back_heap_with_huge_pages(argv);
    _exit(kNotReexecuted);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

TEST(AllocatorTuning, ReexecutesOnceWithTheHeapTunableSet) {
  if (std::getenv(kChildMark) != nullptr) {  // the re-executed image
    const char* t = std::getenv("GLIBC_TUNABLES");
    _exit(t != nullptr && std::string_view(t) == rm::cli::kHugePageTunables ? 0 : kWrongTunables);
  }
  if (!rm::cli::kGlibcHasHugePageTunable) GTEST_SKIP() << "this glibc has no malloc.hugetlb tunable";
  if (!rm::cli::transparent_huge_pages_on()) GTEST_SKIP() << "the kernel's transparent huge pages are off";
  if (rm::cli::under_valgrind()) GTEST_SKIP() << "under valgrind, which the function does not re-execute";
  EXPECT_EQ(run_child(nullptr, "AllocatorTuning.ReexecutesOnceWithTheHeapTunableSet"), 0);
}

TEST(AllocatorTuning, LeavesTunablesTheUserSetAlone) {
  if (std::getenv(kChildMark) != nullptr) _exit(0);  // re-executed: what must not happen
  EXPECT_EQ(run_child("", "AllocatorTuning.LeavesTunablesTheUserSetAlone"), kNotReexecuted);
  EXPECT_EQ(run_child("glibc.malloc.arena_max=1", "AllocatorTuning.LeavesTunablesTheUserSetAlone"), kNotReexecuted);
}

}  // namespace
