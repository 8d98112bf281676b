// A TCP echo server on cyan::net: whatever a client sends comes back.
//
//   echo_server [--port N] [--host H] [--threads N] [--grace-ms N] [--idle-ms N] [--acceptor]
//
// A cyan::net::tcp_server spreads the connections over the handler threads:
//   default      one reuse_port listener per thread (the kernel spreads the connections); each
//                connection stays on the thread that accepted it;
//   --acceptor   thread 0 alone accepts and hands each connection to the next of the other
//                threads in turn. A unix: --host always works this way (a socket path has only
//                one listener).
//
// Prints "listening on <endpoint>"; SIGINT / SIGTERM shut it down gracefully (tcp_server's
// stop(): no more accepting, a connection closes after the chunk it is echoing, the rest after
// --grace-ms); the exit status is then 0.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <system_error>

#include "cyan/dispatch.h"
#include "cyan/net.h"
#include "server/server_support.h"

namespace {

using cyan::dispatch::task;
using cyan::examples::command_line;
using cyan::examples::error_report;
using cyan::net::tcp_server;
using cyan::net::tcp_socket;

// What one read may take: the frame holds it, so a message costs no allocation.
constexpr std::size_t kChunkSize = 16 * 1024;

// One connection: echo each chunk until the peer ends its side, --idle-ms of silence, or the
// server drains (checked after each echoed chunk).
task<> echo(tcp_socket connection, const tcp_server& server, std::chrono::milliseconds idle) {
  std::array<std::byte, kChunkSize> buffer;
  try {
    connection.set_nodelay();
    while (const std::size_t n = co_await connection.read_some(buffer, idle)) {
      co_await connection.write_all(std::span(buffer.data(), n), idle);
      if (server.draining()) {
        break;
      }
    }
  } catch (const std::system_error& e) {
    // --idle-ms ending a silent connection (or a write the client does not take) is how it
    // ends, not an error.
    if (!cyan::examples::is_disconnect(e) && e.code() != std::errc::timed_out) {
      std::fprintf(stderr, "echo_server: connection: %s\n", e.what());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  cyan::examples::block_shutdown_signals();
  command_line cli("echo_server", "a TCP echo server on cyan::net");
  cli.server_options()
      .option("idle-ms", "60000", "close a connection after this long without data")
      .flag("acceptor", "thread 0 accepts and hands connections to the other threads in turn");
  cli.parse(argc, argv);
  try {
    error_report accept_errors("echo_server: accept");  // outlives the server: its last count
    tcp_server server(
        { .endpoint = cli.listen_endpoint(),
          .threads = static_cast<std::size_t>(cli.number("threads")),
          .distribution = cli.is_set("acceptor") ? tcp_server::distribution::acceptor
                                                 : tcp_server::distribution::reuse_port,
          .on_accept_error = [&accept_errors](const std::system_error& e) { accept_errors(e); } });
    const std::chrono::milliseconds idle(cli.number("idle-ms"));
    server.start([&server, idle](tcp_socket connection) {
      return echo(std::move(connection), server, idle);
    });
    return cyan::examples::serve_until_signalled(server,
                                                 std::chrono::milliseconds(cli.number("grace-ms")));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "echo_server: %s\n", e.what());
    return 1;
  }
}
