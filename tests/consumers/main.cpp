// The program every consumer kind builds: it uses each cyan module through its public header.
#include <cyan/common.h>
#include <cyan/event.h>
#include <cyan/fs.h>
#include <cyan/lockfree.h>
#include <cyan/net.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string_view>
#include <system_error>

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
  auto loop = std::make_shared<cyan::event::loop>();
  bool fired = false;
  cyan::event::timer timer{ loop };
  timer.set_timeout(std::chrono::milliseconds(1));
  timer.set_callback([&] {
    fired = true;
    loop->stop();
  });
  timer.start();
  loop->run();  // links libev
  if (!fired) {
    std::fprintf(stderr, "event timer did not fire\n");
    return 1;
  }
  // cyan::net: an endpoint round trip and a listener on a free loopback port (links the module).
  const auto address = cyan::net::endpoint::parse("127.0.0.1:0");
  auto listener = cyan::net::tcp_listener::bind(address);
  if (listener.local_endpoint().port() == 0 || address.to_string() != "127.0.0.1:0") {
    std::fprintf(stderr, "net listener has no port\n");
    return 1;
  }
  // cyan::fs: a closed file's size() is EBADF (links the module).
  try {
    (void)cyan::fs::file().size();
    std::fprintf(stderr, "fs size() of a closed file did not throw\n");
    return 1;
  } catch (const std::system_error& e) {
    if (e.code() != std::errc::bad_file_descriptor) {
      std::fprintf(stderr, "fs size() of a closed file: %s\n", e.what());
      return 1;
    }
  }
  std::printf("cyan %s consumed\n", CYAN_VERSION_STRING);
  return 0;
}
