// The client side of echo_server, on cyan::net: sends each line of stdin (with its '\n') and
// prints what comes back.
//
//   echo_client --port N [--host H]
//
// For each line: "Received: <line>". Exits 0 at the end of stdin once every echo arrived; an
// error (connection refused, reset, the stream ending early, 5 s without an answer) goes to
// stderr with exit status 1.
//
// The socket lives on one handler thread; the main thread reads stdin (a blocking getline is
// fine there) and runs one task per line on that thread, waiting for it. Writing a line and
// reading its echo before the next one keeps at most one line in flight, so however large the
// input, neither side can fill the other's buffers and stall.

#include <chrono>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>

#include "cyan/dispatch.h"
#include "cyan/net.h"
#include "server/server_support.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::net::endpoint;
using cyan::net::tcp_socket;

// How long the server may take to accept, or to echo one line.
constexpr auto kTimeout = 5s;

task<tcp_socket> connect(endpoint server) {
  tcp_socket socket = co_await tcp_socket::connect(server, kTimeout);
  socket.set_nodelay();
  co_return socket;
}

// Sends `line` and returns its echo: exactly as many bytes as were sent. `socket` belongs to
// the caller, which waits for this task.
task<std::string> echo_line(tcp_socket& socket, std::string line) {
  co_await socket.write_all(cyan::net::buffer(line), kTimeout);
  std::string back(line.size(), '\0');
  co_await socket.read_exact(cyan::net::buffer(back), kTimeout);
  co_return back;
}

void print_received(std::string echoed) {
  if (!echoed.empty() && echoed.back() == '\n') {
    echoed.pop_back();
  }
  std::fputs("Received: ", stdout);
  std::fwrite(echoed.data(), 1, echoed.size(), stdout);
  std::fputc('\n', stdout);
}

}  // namespace

int main(int argc, char** argv) {
  cyan::examples::command_line cli("echo_client", "sends stdin line by line to an echo server");
  cli.option("host", "127.0.0.1", "the server's address (or unix:/path)")
      .option("port", "0", "the server's TCP port (required unless --host is unix:)");
  cli.parse(argc, argv);
  try {
    const endpoint server = cli.listen_endpoint();
    if (!server.is_unix() && server.port() == 0) {
      throw std::invalid_argument("--port is required");
    }
    handler_thread network;
    tcp_socket socket = co_spawn(network, connect(server)).get();
    for (std::string line; std::getline(std::cin, line);) {
      line += '\n';
      print_received(co_spawn(network, echo_line(socket, std::move(line))).get());
    }
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "echo_client: %s\n", e.what());
    return 1;
  }
}
