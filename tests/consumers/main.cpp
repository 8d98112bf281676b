// The program every consumer kind builds: it uses each cyan module through its public header.
#include <cyan/common.h>
#include <cyan/lockfree.h>

#include <cstdio>
#include <string_view>

int main() {
  if (cyan::version() != std::string_view(CYAN_VERSION_STRING)) {
    std::fprintf(stderr, "header/library version mismatch\n");
    return 1;
  }
  cyan::lockfree::queue<int> queue;
  queue.push(41);
  int value = 0;
  if (!queue.try_pop(value) || value + 1 != 42) {
    std::fprintf(stderr, "lockfree queue returned %d\n", value);
    return 1;
  }
  std::printf("cyan %s consumed\n", CYAN_VERSION_STRING);
  return 0;
}
