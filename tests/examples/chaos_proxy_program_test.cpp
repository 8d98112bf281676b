// The chaos_proxy program (tests/support/chaos_proxy_main.cpp) in front of echo_server: its
// --faults taken in turn, its figures on one line at SIGTERM, and each bad argument refused
// with a message and exit status 2.

#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "bench/process.h"
#include "loopback_client.h"

namespace {

using namespace std::chrono_literals;
using cyan::bench::child_process;
using cyan::bench::port_of_listening_line;
using cyan::test::connect_to;
using cyan::test::receive;
using cyan::test::send_all;
using cyan::test::stream_end;

// The command line: `program`, then `arguments`.
std::vector<std::string> with_program(const char* program, std::vector<std::string> arguments) {
  arguments.insert(arguments.begin(), program);
  return arguments;
}

// Connection 0 gets "split/split" (every byte its own write, both ways), connection 1
// "reset-after=3" (the echo server gets 3 bytes, then both sides a reset). Connection 0 stays
// open until the proxy stops, so the figures at SIGTERM are exact.
TEST(chaos_proxy_program, takes_its_faults_in_turn_and_prints_its_figures_at_sigterm) {
  child_process echo(with_program(CYAN_PROGRAM_ECHO_SERVER, { "--port", "0", "--threads", "1" }),
                     -1, false, true);
  const unsigned echo_port = port_of_listening_line(echo.read_line(10s));
  ASSERT_NE(echo_port, 0u);
  child_process proxy(with_program(CYAN_PROGRAM_CHAOS_PROXY,
                                   { "--target-port", std::to_string(echo_port), "--faults",
                                     "split/split", "--faults", "reset-after=3" }),
                      -1, false, true);
  const std::string listening = proxy.read_line(10s);
  EXPECT_TRUE(listening.starts_with("listening on 127.0.0.1:")) << listening;
  const unsigned proxy_port = port_of_listening_line(listening);
  ASSERT_NE(proxy_port, 0u);

  const int split = connect_to(proxy_port);
  ASSERT_GE(split, 0);
  ASSERT_TRUE(send_all(split, "hello"));
  stream_end how = stream_end::open;
  EXPECT_EQ(receive(split, 5, 5s, how), "hello");
  EXPECT_EQ(how, stream_end::open);
  // Connected after the first one's echo came back: the second in accept order.
  const int reset = connect_to(proxy_port);
  ASSERT_GE(reset, 0);
  ASSERT_TRUE(send_all(reset, "hello"));
  EXPECT_EQ(receive(reset, 5, 5s, how), "");
  EXPECT_EQ(how, stream_end::reset);

  EXPECT_EQ(proxy.stop(5s), 0);
  EXPECT_EQ(proxy.read_all(5s),
            "STATS accepted=2 bytes_to_server=8 bytes_to_client=5 writes_to_server=6 "
            "writes_to_client=5 resets=1 half_closes=0 stalls=0 server_ends=0 closed=1\n");
  EXPECT_EQ(receive(split, 1, 5s, how), "");  // stopping ended the connection it held
  EXPECT_NE(how, stream_end::open);
  ::close(split);
  ::close(reset);
  EXPECT_EQ(echo.stop(10s), 0);
  EXPECT_EQ(echo.read_all(5s), "");
}

TEST(chaos_proxy_program, refuses_each_bad_argument_with_a_message_and_status_2) {
  struct bad_case {
    std::vector<std::string> arguments;
    std::string message;  // the first line on stderr
  };
  const std::vector<bad_case> cases = {
    { {}, "chaos_proxy: --target-port is required (1-65535)" },
    { { "--target-port", "0" }, "chaos_proxy: --target-port is required (1-65535)" },
    { { "--target-port", "65536" },
      "chaos_proxy: --target-port wants a number up to 65535, not \"65536\"" },
    { { "--target-port" }, "chaos_proxy: --target-port wants a value" },
    { { "--port", "80" }, "chaos_proxy: unknown option \"--port\"" },
    { { "--target-port", "80", "--faults", "split,explode" },
      "chaos_proxy: unknown fault \"explode\"" },
    { { "--target-port", "80", "--faults", "stall" }, "chaos_proxy: unknown fault \"stall\"" },
    { { "--target-port", "80", "--faults", "delay=soon" },
      "chaos_proxy: delay wants a number up to 60000, not \"soon\"" },
    { { "--target-port", "80", "--faults", "/reset-after=-1" },
      "chaos_proxy: reset-after wants a number up to 18446744073709551615, not \"-1\"" },
    { { "--target-port", "80", "--faults", "reset-after=3,stall-after=4" },
      "chaos_proxy: one direction takes one of reset-after, half-close-after and stall-after, "
      "not two" },
    { { "--target-port", "80", "--faults", "split/split/split" },
      "chaos_proxy: --faults takes two directions, TO_SERVER/TO_CLIENT: \"split/split/split\"" },
  };
  for (const bad_case& c : cases) {
    child_process proxy(with_program(CYAN_PROGRAM_CHAOS_PROXY, c.arguments), -1, false, true);
    const std::string output = proxy.read_all(5s);
    EXPECT_EQ(proxy.wait(5s), 2) << c.message;
    EXPECT_TRUE(output.starts_with(c.message + "\nusage: chaos_proxy --target-port N")) << output;
  }
}

TEST(chaos_proxy_program, help_prints_the_usage_and_exits_0) {
  child_process proxy(with_program(CYAN_PROGRAM_CHAOS_PROXY, { "--help" }), -1, false, true);
  const std::string output = proxy.read_all(5s);
  EXPECT_EQ(proxy.wait(5s), 0);
  EXPECT_TRUE(output.starts_with("usage: chaos_proxy --target-port N")) << output;
}

}  // namespace
