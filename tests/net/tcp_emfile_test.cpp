// tcp_listener::accept() when the process is out of descriptors (EMFILE), in a child process.
//
// UndefinedBehaviorSanitizer's vptr check probes memory through a pipe(), which fails while the
// descriptor table is full, and then reports valid objects (the std::system_error being thrown)
// as invalid, unless it has checked their types before. So the first check is skipped under
// UBSan (the asan lane; the debug and tsan lanes run it), and the second runs its steps once
// with descriptors to spare before it fills the table.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stop_token>
#include <system_error>
#include <thread>
#include <vector>

#include "cyan/dispatch.h"
#include "cyan/net.h"
#include "support/cpu_time.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::net::endpoint;
using cyan::net::tcp_listener;
using cyan::net::tcp_socket;

// Ends the child, failed at `step` of `check`.
[[noreturn]] void fail_child(const char* check, const char* step) {
  std::fprintf(stderr, "%s: %s\n", check, step);
  std::_Exit(1);
}

// The thread's io_uring ring (when that is the backend) is set up before the table fills, as a
// server's is before it runs out of descriptors: setting it up needs descriptors too.
void set_up_backend(handler_thread& h) {
  co_spawn(h, []() -> task<> {
    (void)cyan::net::current_backend();
    co_return;
  }).get();
}

// RLIMIT_NOFILE at 256, so that filling the descriptor table is quick.
template <typename Fail>
void lower_descriptor_limit(Fail fail) {
  ::rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = std::min<::rlim_t>(limit.rlim_max, 256);
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    fail("setrlimit");
  }
}

// The EMFILE check in the child: exits 0 when every step held, else prints the step and exits 1.
[[noreturn]] void check_accept_out_of_descriptors() {
  const auto fail = [](const char* step) { fail_child("emfile", step); };
  lower_descriptor_limit(fail);
  std::atomic<int> accepted{ 0 };
  std::atomic<int> refused{ 0 };  // accept() calls that threw EMFILE
  std::atomic<bool> other_error{ false };
  std::stop_source stop;
  {
    handler_thread h;
    set_up_backend(h);
    auto listener = tcp_listener::bind(endpoint::loopback_v4());
    const endpoint address = listener.local_endpoint();
    auto server = co_spawn(
        h,
        [&]() -> task<> {
          std::vector<tcp_socket> kept;
          for (int round = 0; round < 1000 && !stop.get_token().stop_requested(); ++round) {
            try {
              kept.push_back(co_await listener.accept(10s));
              accepted.fetch_add(1);
            } catch (const std::system_error& e) {
              const std::error_code code = e.code();
              if (code == std::errc::too_many_files_open ||
                  code == std::errc::too_many_files_open_in_system) {
                refused.fetch_add(1);
              } else if (code != std::errc::operation_canceled) {
                other_error = true;
              }
            }
          }
        },
        stop.get_token());
    // Clients made before the table is full: connect() needs no new descriptor.
    const int first_client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int second_client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    std::vector<int> fillers;
    for (int fd;
         fillers.size() < 100'000 && (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) {
      fillers.push_back(fd);
    }
    if (errno != EMFILE) {
      fail("filling the table did not end in EMFILE");
    }
    if (::connect(first_client, address.data(), address.size()) != 0) {
      fail("first connect");
    }
    for (int i = 0; i < 500 && refused.load() == 0; ++i) {
      std::this_thread::sleep_for(10ms);  // bounded poll of the server's counter
    }
    if (refused.load() == 0) {
      fail("accept() did not report EMFILE");
    }
    // The listener must not spin meanwhile: under 10% of a core over 300 ms.
    const auto cpu_before = cyan::test::cpu_time(CLOCK_PROCESS_CPUTIME_ID);
    std::this_thread::sleep_for(300ms);
    const auto cpu_used = cyan::test::cpu_time(CLOCK_PROCESS_CPUTIME_ID) - cpu_before;
    if (cpu_used > 30ms) {
      std::fprintf(stderr, "emfile: %lld us of CPU in 300 ms\n",
                   static_cast<long long>(cpu_used.count() / 1000));
      fail("the listener spins while out of descriptors");
    }
    for (const int fd : fillers) {
      ::close(fd);
    }
    if (::connect(second_client, address.data(), address.size()) != 0) {
      fail("second connect");
    }
    for (int i = 0; i < 500 && accepted.load() == 0; ++i) {
      std::this_thread::sleep_for(10ms);
    }
    if (accepted.load() != 1) {
      fail("the connection after descriptors were freed was not accepted");
    }
    stop.request_stop();
    server.get();
    ::close(first_client);
    ::close(second_client);
  }
  if (other_error) {
    fail("accept() threw something other than EMFILE");
  }
  std::fprintf(stderr, "emfile: refused %d, accepted %d\n", refused.load(), accepted.load());
  std::exit(0);
}

// In a child process with RLIMIT_NOFILE lowered to 256 and every descriptor taken: accept()
// throws EMFILE without spinning, the listener stays usable, and the next connection after
// descriptors are freed is accepted.
TEST(tcp_death, accept_out_of_descriptors_reports_emfile_without_spinning_and_recovers) {
#ifdef CYAN_TEST_UBSAN
  GTEST_SKIP() << "UBSan's vptr check cannot run with the descriptor table full";
#endif
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(check_accept_out_of_descriptors(), ::testing::ExitedWithCode(0),
              "emfile: refused [1-9]");
}

// The codes of the two accepts of check_close_during_back_off(): the first with a connection
// waiting, the second while another task closes the listener. With `fill_table`, the table is
// full but for the listener's own socket, so the listener has no spare and the first accept
// fails with EMFILE; the second then backs off for 50 ms, and close() comes during that wait.
struct back_off_codes {
  std::error_code first;
  std::error_code second;
};

template <typename Fail>
back_off_codes accept_then_close(bool fill_table, Fail fail) {
  back_off_codes codes;
  handler_thread h;
  set_up_backend(h);
  const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  std::vector<int> fillers;
  while (fill_table && fillers.size() < 100'000) {
    const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      break;
    }
    fillers.push_back(fd);
  }
  if (fill_table && (errno != EMFILE || fillers.empty())) {
    fail("filling the table did not end in EMFILE");
  }
  if (fill_table) {
    ::close(fillers.back());  // one left: the listener's socket takes it, its spare cannot open
    fillers.pop_back();
  }
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  const endpoint address = listener.local_endpoint();
  if (::connect(client, address.data(), address.size()) != 0) {
    fail("connect");
  }
  const auto code_of = [](auto&& operation) -> task<std::error_code> {
    try {
      (void)co_await operation;
    } catch (const std::system_error& e) {
      co_return e.code();
    }
    co_return std::error_code{};
  };
  co_spawn(h, [&]() -> task<> {
    codes.first = co_await code_of(listener.accept(5s));
    // Runs once the next accept() below waits (in its back-off, with the table full).
    co_spawn(
        h,
        [&]() -> task<> {
          listener.close();
          co_return;
        },
        cyan::dispatch::detached);
    codes.second = co_await code_of(listener.accept(5s));
  }).get();
  for (const int fd : fillers) {
    ::close(fd);
  }
  ::close(client);
  return codes;
}

// The back-off check in the child: close() during accept's back-off after EMFILE must end the
// accept with operation_canceled, not let it touch the freed listener. Exits 0 when every step
// held, else prints the step and exits 1. The same steps run first with descriptors to spare,
// so that UBSan's vptr check has seen every type before the table is full (with the table
// full, a check of a type not seen yet fails: it probes memory through a pipe()).
[[noreturn]] void check_close_during_back_off() {
  const auto fail = [](const char* step) { fail_child("back-off", step); };
  lower_descriptor_limit(fail);
  const back_off_codes warm_up = accept_then_close(false, fail);
  if (warm_up.first || warm_up.second != std::errc::operation_canceled) {
    fail("with descriptors to spare, close() did not cancel the waiting accept");
  }
  const back_off_codes full = accept_then_close(true, fail);
  if (full.first != std::errc::too_many_files_open) {
    std::fprintf(stderr, "back-off: first accept: %s\n", full.first.message().c_str());
    fail("the first accept did not report EMFILE");
  }
  if (full.second != std::errc::operation_canceled) {
    std::fprintf(stderr, "back-off: second accept: %s\n", full.second.message().c_str());
    fail("the accept closed during its back-off did not end with operation_canceled");
  }
  std::fprintf(stderr, "back-off: cancelled\n");
  std::exit(0);
}

// In a child process (RLIMIT_NOFILE 256, table full): tcp_listener::close() while accept()
// backs off after EMFILE ends that accept with operation_canceled.
TEST(tcp_death, close_during_the_emfile_back_off_cancels_the_accept) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(check_close_during_back_off(), ::testing::ExitedWithCode(0), "back-off: cancelled");
}

}  // namespace
