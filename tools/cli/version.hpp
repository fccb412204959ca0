// What `ringmaster --version` prints: the CMake project version and the git
// revision the binary was built from ("unknown" outside a git checkout;
// "-dirty" when tracked files had changes). Defined in a source that
// cmake/version_info.cmake generates at build time.
#pragma once

namespace rm::cli {

extern const char* const kVersion;
extern const char* const kGitRevision;

}  // namespace rm::cli
