// An echo server spread over handler threads (one listener per thread with reuse_port: the
// kernel spreads the connections) and clients that check what comes back. The server stops
// with a stop request: every pending accept and read ends with operation_canceled.
//
//   net_echo [clients]     127.0.0.1 only; prints one line per client and a summary

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "cyan/dispatch.h"
#include "cyan/net.h"

using namespace std::chrono_literals;
using cyan::dispatch::async_scope;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::net::endpoint;
using cyan::net::tcp_listener;
using cyan::net::tcp_socket;

// One connection: echo until the client ends its side, or 30 s of silence.
task<> echo(tcp_socket connection) {
  std::byte buffer[4096];
  try {
    while (const std::size_t n = co_await connection.read_some(buffer, 30s)) {
      co_await connection.write_all(std::span(buffer, n), 30s);
    }
  } catch (const std::system_error& e) {
    if (e.code() != std::errc::operation_canceled) {
      std::fprintf(stderr, "connection: %s\n", e.what());
    }
  }
}

// One thread's listener: each connection becomes a task on this thread, owned by `scope`.
task<> serve(handler_thread& home, tcp_listener listener, async_scope& scope) {
  for (;;) {
    try {
      scope.spawn(home, echo(co_await listener.accept()));
    } catch (const std::system_error& e) {
      if (e.code() == std::errc::operation_canceled) {
        co_return;  // stopped
      }
      std::fprintf(stderr, "accept: %s\n", e.what());  // e.g. EMFILE: the listener goes on
    }
  }
}

// A client: sends three lines, reads each back, checks it.
task<bool> client(endpoint server, int id) {
  tcp_socket s = co_await tcp_socket::connect(server, 5s);
  for (int line = 0; line < 3; ++line) {
    const std::string text =
        "client " + std::to_string(id) + " line " + std::to_string(line) + "\n";
    co_await s.write_all(cyan::net::buffer(text), 5s);
    std::string back(text.size(), '\0');
    co_await s.read_exact(cyan::net::buffer(back), 5s);
    if (back != text) {
      co_return false;
    }
  }
  co_return true;
}

int main(int argc, char** argv) {
  const int clients = argc > 1 ? std::atoi(argv[1]) : 8;
  const unsigned threads = std::max(2u, std::thread::hardware_concurrency());

  std::vector<std::unique_ptr<handler_thread>> servers;
  auto first = tcp_listener::bind(endpoint::loopback_v4(0), { .reuse_port = true });
  const endpoint address = first.local_endpoint();  // the port the kernel picked
  std::printf("listening on %s with %u threads\n", address.to_string().c_str(), threads);

  async_scope scope;  // every listener and connection task; its stop ends them all
  for (unsigned i = 0; i < threads; ++i) {
    servers.push_back(std::make_unique<handler_thread>());
    auto listener = i == 0 ? std::move(first) : tcp_listener::bind(address, { .reuse_port = true });
    scope.spawn(*servers.back(), serve(*servers.back(), std::move(listener), scope));
  }

  handler_thread client_thread;
  std::vector<cyan::dispatch::future<bool>> results;
  for (int id = 0; id < clients; ++id) {
    results.push_back(co_spawn(client_thread, client(address, id)));
  }
  int good = 0;
  for (int id = 0; id < clients; ++id) {
    const bool ok = results[static_cast<std::size_t>(id)].get();
    std::printf("client %d: %s\n", id, ok ? "echoed" : "MISMATCH");
    good += ok ? 1 : 0;
  }

  scope.request_stop();  // pending accepts and reads end with operation_canceled
  scope.join_blocking();
  std::printf("%d of %d clients echoed\n", good, clients);
  return good == clients ? EXIT_SUCCESS : EXIT_FAILURE;
}
