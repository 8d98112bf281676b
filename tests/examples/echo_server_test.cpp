// echo_server and echo_client run as a user runs them: lines in, "Received:" lines out.

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "bench/process.h"

namespace {

using namespace std::chrono_literals;
using cyan::bench::child_process;
using cyan::bench::port_of_listening_line;

// Starts echo_server with `extra` options on a free port; returns its port (0: it did not say
// "listening on").
unsigned start_server(child_process& server) {
  return port_of_listening_line(server.read_line(10s));
}

std::string run_client(unsigned port, const std::string& input) {
  child_process client({ CYAN_PROGRAM_ECHO_CLIENT, "--port", std::to_string(port) }, -1, true);
  EXPECT_TRUE(client.write_input(input));
  client.close_input();
  std::string output = client.read_all(20s);
  EXPECT_EQ(client.wait(10s), 0);
  return output;
}

TEST(EchoServer, ClientLinesComeBackExactlyInOrder) {
  child_process server({ CYAN_PROGRAM_ECHO_SERVER, "--port", "0", "--threads", "2" }, -1);
  const unsigned port = start_server(server);
  ASSERT_NE(port, 0u);
  std::string input;
  std::string expected;
  for (int i = 0; i < 200; ++i) {
    const std::string line =
        "line " + std::to_string(i) + std::string(static_cast<std::size_t>(i % 17), 'x');
    input += line + "\n";
    expected += "Received: " + line + "\n";
  }
  EXPECT_EQ(run_client(port, input), expected);
  EXPECT_EQ(server.stop(10s), 0);
}

TEST(EchoServer, AcceptorModeServesSeveralClients) {
  child_process server({ CYAN_PROGRAM_ECHO_SERVER, "--port", "0", "--threads", "2", "--acceptor" },
                       -1);
  const unsigned port = start_server(server);
  ASSERT_NE(port, 0u);
  for (int client = 0; client < 4; ++client) {
    const std::string tag = "client " + std::to_string(client);
    EXPECT_EQ(run_client(port, tag + " a\n" + tag + " b\n"),
              "Received: " + tag + " a\nReceived: " + tag + " b\n");
  }
  EXPECT_EQ(server.stop(10s), 0);
}

TEST(EchoClient, RefusedConnectionExitsNonZeroWithNothingReceived) {
  // A port that was free a moment ago: bind, read the port, close.
  child_process server({ CYAN_PROGRAM_ECHO_SERVER, "--port", "0", "--threads", "1" }, -1);
  const unsigned port = start_server(server);
  ASSERT_NE(port, 0u);
  ASSERT_EQ(server.stop(10s), 0);
  child_process client({ CYAN_PROGRAM_ECHO_CLIENT, "--port", std::to_string(port) }, -1, true);
  (void)client.write_input("hello\n");
  client.close_input();
  EXPECT_EQ(client.read_all(20s), "");
  EXPECT_EQ(client.wait(10s), 1);
}

}  // namespace
