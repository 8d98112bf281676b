// Helper program for fork_test: uses the global pool (and leaves its workers busy), then forks
// a child that does what argv[1] says and returns from main. The parent waits for the child
// (at most 10 s, then kills it) and prints how it ended. Expected output, in order:
//   "<what the child printed>\n" and "child exited 0\n", then the parent's "parent ran 64 of 64\n".
// Modes of the child:
//   plain           uses nothing of cyan: prints "plain";
//   global_pool     runs 100 tasks with async() and one async_awaitable() on the global pool
//                   (the parent's is not there: the child gets its own): "ran 101 of 101";
//   handler_thread  on a handler_thread of its own, a listener on 127.0.0.1 and a connection to
//                   it that echoes 5 bytes (on the backend CYAN_NET_BACKEND chooses):
//                   "echoed 5 bytes".

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <thread>
#include <vector>

#include "cyan/dispatch.h"
#include "cyan/net.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::task;

constexpr int kParentTasks = 64;
constexpr int kChildTasks = 100;

std::atomic<int> parent_ran{ 0 };
std::atomic<int> child_ran{ 0 };

// About 20 ms of work: the parent's workers are in the middle of tasks when it forks.
void parent_work() {
  const auto until = std::chrono::steady_clock::now() + 20ms;
  while (std::chrono::steady_clock::now() < until) {
  }
  parent_ran.fetch_add(1, std::memory_order_relaxed);
}

int child_global_pool() {
  std::vector<cyan::dispatch::future<void>> done;
  for (int i = 0; i < kChildTasks; ++i) {
    done.push_back(
        cyan::dispatch::async_awaitable([] { child_ran.fetch_add(1, std::memory_order_relaxed); }));
  }
  for (auto& each : done) {
    each.get();
  }
  cyan::dispatch::async([] { child_ran.fetch_add(1, std::memory_order_relaxed); });
  // The last task runs by the drain at exit at the latest; it is counted here, after a wait
  // bounded in time, so that the line says whether it ran.
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (child_ran.load() < kChildTasks + 1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
  }
  std::printf("ran %d of %d\n", child_ran.load(), kChildTasks + 1);
  return 0;
}

task<std::size_t> echo_once() {
  cyan::net::tcp_listener listener = cyan::net::tcp_listener::bind(
      cyan::net::endpoint::loopback_v4(0), { .reuse_port = false, .backlog = 4 });
  cyan::net::tcp_socket client =
      co_await cyan::net::tcp_socket::connect(listener.local_endpoint(), 5s);
  cyan::net::tcp_socket server = co_await listener.accept();
  constexpr std::string_view kHello = "hello";
  co_await client.write_all(cyan::net::buffer(kHello), 5s);
  std::array<std::byte, 5> got{};
  co_await server.read_exact(got, 5s);
  co_await server.write_all(got, 5s);
  std::array<std::byte, 5> back{};
  co_await client.read_exact(back, 5s);
  co_return std::memcmp(back.data(), kHello.data(), back.size()) == 0 ? back.size() : 0;
}

int child_handler_thread() {
  cyan::dispatch::handler_thread thread;
  const std::size_t echoed = cyan::dispatch::co_spawn(thread, &echo_once).get();
  std::printf("echoed %zu bytes\n", echoed);
  return 0;
}

int child_main(std::string_view mode) {
  if (mode == "plain") {
    std::printf("plain\n");
    return 0;
  }
  if (mode == "global_pool") {
    return child_global_pool();
  }
  if (mode == "handler_thread") {
    return child_handler_thread();
  }
  std::printf("unknown mode\n");
  return 2;
}

// Waits for `child` at most 10 s (then kills it) and says how it ended.
void wait_for(pid_t child) {
  const int handle = static_cast<int>(::syscall(SYS_pidfd_open, child, 0));
  pollfd exited{ .fd = handle, .events = POLLIN, .revents = 0 };
  if (handle < 0 || ::poll(&exited, 1, 10'000) != 1) {
    ::kill(child, SIGKILL);
    std::printf("child hung: killed after 10 s\n");
  }
  if (handle >= 0) {
    ::close(handle);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  if (WIFEXITED(status)) {
    std::printf("child exited %d\n", WEXITSTATUS(status));
  } else if (WIFSIGNALED(status)) {
    std::printf("child killed by signal %d\n", WTERMSIG(status));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fork_child plain|global_pool|handler_thread\n");
    return 2;
  }
  std::vector<cyan::dispatch::future<void>> parent_tasks;
  for (int i = 0; i < kParentTasks; ++i) {
    parent_tasks.push_back(cyan::dispatch::async_awaitable(&parent_work));
  }
  std::fflush(stdout);  // the child must not print the parent's buffered output again
  const pid_t child = ::fork();
  if (child < 0) {
    std::perror("fork");
    return 2;
  }
  if (child == 0) {
    const int status = child_main(argv[1]);
    std::fflush(stdout);
    return status;  // returns from main: exit() runs the atexit handlers, the pool's drain among
                    // them
  }
  wait_for(child);
  for (auto& each : parent_tasks) {
    each.get();
  }
  std::printf("parent ran %d of %d\n", parent_ran.load(), kParentTasks);
  return 0;
}
