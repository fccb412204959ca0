// ringmaster-run: executes an exported Schedule (docs/runtime.md). Work in progress.
#include <cstdio>
int main() {
  std::fputs("ringmaster-run: not built yet\n", stderr);
  return 2;
}
