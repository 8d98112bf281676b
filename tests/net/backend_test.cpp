// The backend choice: CYAN_NET_BACKEND decides what current_backend() reports, and where
// io_uring is blocked (a seccomp filter, as containers' default profiles have) `auto` falls
// back to epoll silently and `io_uring` fails the first socket operation saying why. The
// blocked cases run in child processes (death-test style "threadsafe" re-executes the binary,
// so CYAN_NET_BACKEND is read afresh there) that install the filter first.

#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>

#include "cyan/dispatch.h"
#include "cyan/net.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::net::backend;
using cyan::net::endpoint;
using cyan::net::tcp_listener;
using cyan::net::tcp_socket;

// What this run of the suite was asked for (ctest runs it with io_uring and with epoll).
backend expected_backend() {
  const char* value = std::getenv("CYAN_NET_BACKEND");
  return value != nullptr && std::string_view(value) == "epoll" ? backend::epoll
                                                                : backend::io_uring;
}

backend backend_of(handler_thread& h) {
  return co_spawn(h, []() -> task<backend> { co_return cyan::net::current_backend(); }).get();
}

// Makes io_uring_setup fail with EPERM in this process, as Docker's default profile does.
void block_io_uring() {
  sock_filter program[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog filter{ static_cast<unsigned short>(sizeof program / sizeof program[0]), program };
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &filter) != 0) {
    std::fprintf(stderr, "seccomp: %s\n", std::strerror(errno));
    std::exit(2);
  }
}

// A round trip of `text` over loopback between two handler threads; the echoed text.
std::string echo_once(const std::string& text) {
  handler_thread server;
  handler_thread client;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  const endpoint address = listener.local_endpoint();
  auto served = co_spawn(server, [&]() -> task<> {
    tcp_socket connection = co_await listener.accept(5s);
    std::byte buffer[64];
    const std::size_t n = co_await connection.read_some(buffer, 5s);
    co_await connection.write_all(std::span<const std::byte>(buffer, n), 5s);
  });
  std::string echoed = co_spawn(client, [&]() -> task<std::string> {
                         tcp_socket s = co_await tcp_socket::connect(address, 5s);
                         co_await s.write_all(cyan::net::buffer(text), 5s);
                         std::string back(text.size(), '\0');
                         co_await s.read_exact(std::as_writable_bytes(std::span(back)), 5s);
                         co_return back;
                       }).get();
  served.get();
  return echoed;
}

[[noreturn]] void auto_falls_back_when_blocked() {
  ::setenv("CYAN_NET_BACKEND", "auto", 1);
  block_io_uring();
  handler_thread h;
  if (backend_of(h) != backend::epoll) {
    std::fprintf(stderr, "blocked: auto did not fall back to epoll\n");
    std::exit(1);
  }
  if (echo_once("through epoll") != "through epoll") {
    std::fprintf(stderr, "blocked: the echo over the fallback differs\n");
    std::exit(1);
  }
  std::fprintf(stderr, "blocked: fell back\n");
  std::exit(0);
}

[[noreturn]] void io_uring_fails_saying_why_when_blocked() {
  ::setenv("CYAN_NET_BACKEND", "io_uring", 1);
  block_io_uring();
  handler_thread h;
  const std::string what = co_spawn(h, []() -> task<std::string> {
                             try {
                               auto listener = tcp_listener::bind(endpoint::loopback_v4());
                               (void)co_await listener.accept(1s);
                             } catch (const std::system_error& e) {
                               if (e.code() != std::errc::operation_not_permitted) {
                                 co_return std::string("wrong code: ") + e.what();
                               }
                               co_return e.what();
                             }
                             co_return "no error";
                           }).get();
  std::fprintf(stderr, "blocked: %s\n", what.c_str());
  std::exit(what.find("seccomp") != std::string::npos ? 0 : 1);
}

TEST(backend, current_backend_is_the_one_asked_for) {
  handler_thread h;
  EXPECT_EQ(backend_of(h), expected_backend());
  EXPECT_EQ(cyan::net::to_string(backend::io_uring), "io_uring");
  EXPECT_EQ(cyan::net::to_string(backend::epoll), "epoll");
}

TEST(backend_death, auto_falls_back_to_epoll_where_seccomp_blocks_io_uring) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(auto_falls_back_when_blocked(), ::testing::ExitedWithCode(0), "blocked: fell back");
}

TEST(backend_death, io_uring_where_seccomp_blocks_it_fails_the_first_operation_saying_why) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(io_uring_fails_saying_why_when_blocked(), ::testing::ExitedWithCode(0),
              "io_uring_setup failed \\(blocked: a seccomp filter");
}

}  // namespace
