// Allocator tuning for the ringmaster executable and the benchmarks that must
// measure what it gets: freed memory kept in the heap, and the heap backed by
// transparent huge pages.
#pragma once

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#if defined(__GLIBC__)
#include <malloc.h>
#include <unistd.h>
#endif

namespace rm::cli {

// A run builds and frees arrays of tens to hundreds of MB phase after phase
// (Schedule, run plan, Timeline, edges). glibc maps each large block afresh
// and unmaps it when freed, so every phase faults its pages in again (a fifth
// of a default step's time). Kept in the heap instead, freed memory is reused;
// peak memory moves by about 2% either way (measured on the default step and a
// cp = 512 layer). Where glibc refuses a setting, nothing changes but speed.
inline void keep_freed_memory() {
#if defined(__GLIBC__)
  constexpr int kNever = 1 << 30;  // bytes: above any single allocation the run makes
  mallopt(M_MMAP_THRESHOLD, kNever);
  mallopt(M_TRIM_THRESHOLD, kNever);
#endif
}

// For a command whose threads cooperate on one run (simulate: generation,
// engine and report preparation side by side) rather than one run each. glibc
// gives each thread an arena of its own, whose memory it backs with 4 KB
// pages even where the main heap has huge pages; in the main arena instead,
// the default step ran 10-30% faster (a Schedule file's ring ~2x). Not for
// sweep and plan, whose workers would then all queue for one heap lock.
inline void one_heap_for_all_threads() {
#if defined(__GLIBC__)
  mallopt(M_ARENA_MAX, 1);
#endif
}

// The value the heap tunable is given; a test reads it back from a child.
inline constexpr const char* kHugePageTunables = "glibc.malloc.hugetlb=1";

// Whether this glibc knows the tunable (glibc.malloc.hugetlb came in 2.35).
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
inline constexpr bool kGlibcHasHugePageTunable = true;
#else
inline constexpr bool kGlibcHasHugePageTunable = false;
#endif

// Whether the program runs under valgrind, whose exec'd child would run unchecked.
inline bool under_valgrind() {
  const char* preload = std::getenv("LD_PRELOAD");
  return preload != nullptr && std::strstr(preload, "vgpreload") != nullptr;
}

// Whether the kernel hands out transparent huge pages to a region that asks
// (its mode is "always" or "madvise", not "never").
inline bool transparent_huge_pages_on() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  if (!std::getline(in, modes)) return false;
  return modes.find("[never]") == std::string::npos;
}

// Every first touch of a 4 KB page is a fault, and on the virtual machines we
// measure on a fault costs several microseconds in the hypervisor: a third of
// a run's CPU time went to them, and the analytic engine read 2-3M ops/s
// instead of 6-10M. glibc backs its heap with transparent huge pages (a fault
// per 2 MB) only when asked through its tunable, which it reads once at
// program start, so the program re-executes itself once with the tunable set.
// Call first thing in main; it returns only where it does not re-execute:
// GLIBC_TUNABLES already set (the user's choice, empty to opt out, or ours
// after the exec), a glibc without the tunable, the kernel's huge pages off,
// or a run under valgrind.
inline void back_heap_with_huge_pages([[maybe_unused]] char** argv) {
#if defined(__GLIBC__)
  if (!kGlibcHasHugePageTunable || std::getenv("GLIBC_TUNABLES") != nullptr || under_valgrind() ||
      !transparent_huge_pages_on())
    return;
  // The file itself, not /proc/self/exe: the process takes its name from the
  // path (`ps`, `top` would show "exe").
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return;
  self[n] = '\0';
  if (setenv("GLIBC_TUNABLES", kHugePageTunables, 1) != 0) return;
  execv(self, argv);
  unsetenv("GLIBC_TUNABLES");  // the exec failed: run with the heap as it is
#endif
}

}  // namespace rm::cli
