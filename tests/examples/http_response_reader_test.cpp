// examples/load/http_response_reader.h: the status line as load_tester reads it, from a server
// on the other end of a socket pair.

#include "load/http_response_reader.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "cyan/dispatch.h"
#include "cyan/net.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::examples::http_protocol_error;
using cyan::examples::http_response_reader;

// The statuses read from `bytes` (then the end of stream), and how reading ended: "end" for
// the end of stream, "protocol" for http_protocol_error, or the system error's message.
struct reading {
  std::vector<int> statuses;
  std::string end;
};

reading read_all(handler_thread& thread, std::string_view bytes) {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  EXPECT_EQ(::write(fds[1], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  ::shutdown(fds[1], SHUT_WR);
  reading out = cyan::dispatch::co_spawn(thread, [&]() -> task<reading> {
                  cyan::net::tcp_socket socket =
                      cyan::net::tcp_socket::adopt(cyan::net::socket_handle(fds[0]));
                  http_response_reader reader;
                  reading r;
                  try {
                    for (int i = 0; i < 10; ++i) {
                      r.statuses.push_back((co_await reader.read(socket, 10s)).status);
                    }
                  } catch (const http_protocol_error&) {
                    r.end = "protocol";
                  } catch (const std::system_error& e) {
                    r.end = e.code() == cyan::net::error::end_of_stream ? "end" : e.what();
                  }
                  co_return r;
                }).get();
  ::close(fds[1]);
  return out;
}

TEST(http_response_reader, statuses_from_100_to_599_are_read_in_order) {
  handler_thread thread;
  const reading r = read_all(thread,
                             "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"
                             "HTTP/1.1 100 Continue\r\n\r\n"
                             "HTTP/1.1 599 Custom\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(r.statuses, (std::vector<int>{ 200, 100, 599 }));
  EXPECT_EQ(r.end, "end");
}

// Found by fuzz_http_response: "050" was read as status 50 (and "-12" as -12): from_chars took
// them. A status is three digits from 100 to 599 (RFC 9110, 15).
TEST(http_response_reader, a_status_outside_100_to_599_or_not_three_digits_is_a_protocol_error) {
  handler_thread thread;
  for (const std::string_view line :
       { "HTTP/1.1 050 Continue", "HTTP/1.1 -12 Minus", "HTTP/1.1 600 Beyond", "HTTP/1.1 099 Low",
         "HTTP/1.1 +20 Plus", "HTTP/1.1 2x0 Letter" }) {
    const reading r = read_all(thread, std::string(line) + "\r\nContent-Length: 0\r\n\r\n");
    EXPECT_EQ(r.statuses, std::vector<int>{}) << line;
    EXPECT_EQ(r.end, "protocol") << line;
  }
}

}  // namespace
