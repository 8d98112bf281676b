// A TCP echo server on cyan::net: whatever a client sends comes back.
//
//   echo_server [--port N] [--host H] [--threads N] [--grace-ms N] [--idle-ms N] [--acceptor]
//
// Two ways to spread the connections over the handler threads:
//   default      one reuse_port listener per thread (the kernel spreads the connections); each
//                connection stays on the thread that accepted it;
//   --acceptor   thread 0 alone accepts and hands each connection to the next of the other
//                threads in turn (release() there, adopt() on the target thread). A unix:
//                --host always works this way (a socket path has only one listener).
//
// Prints "listening on <endpoint>"; SIGINT / SIGTERM shut it down gracefully (see
// server/server_support.h): a connection closes after the chunk it is echoing, the rest after
// --grace-ms; the exit status is then 0.

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
using cyan::examples::server_runtime;
using cyan::net::endpoint;
using cyan::net::socket_handle;
using cyan::net::tcp_listener;
using cyan::net::tcp_socket;

// What one read may take: the frame holds it, so a message costs no allocation.
constexpr std::size_t kChunkSize = 16 * 1024;

// What every task needs. The runtime is the last member, so its destructor joins the tasks
// while the rest is still alive.
struct server_context {
  server_context(unsigned threads, std::chrono::milliseconds idle)
      : idle_limit(idle), runtime(threads) {}
  std::chrono::milliseconds idle_limit;
  server_runtime runtime;
};

// One connection: echo each chunk until the peer ends its side, --idle-ms of silence, or the
// server drains (checked after each echoed chunk).
task<> echo(tcp_socket connection, server_context* context) {
  std::array<std::byte, kChunkSize> buffer;
  try {
    connection.set_nodelay();
    while (const std::size_t n = co_await connection.read_some(buffer, context->idle_limit)) {
      co_await connection.write_all(std::span(buffer.data(), n), context->idle_limit);
      if (context->runtime.draining()) {
        break;
      }
    }
  } catch (const std::system_error& e) {
    if (!cyan::examples::is_disconnect(e)) {
      std::fprintf(stderr, "echo_server: connection: %s\n", e.what());
    }
  }
}

// A connection handed over by the acceptor: the task's body, and so adopt(), runs on the
// target thread, which owns the socket from then on.
task<> adopt_and_echo(socket_handle handle, server_context* context) {
  co_await echo(tcp_socket::adopt(std::move(handle)), context);
}

// Which thread takes the next connection: thread `index`, or in acceptor mode the next of the
// threads after the acceptor in turn (the acceptor itself when it is alone).
class connection_placement {
 public:
  connection_placement(unsigned threads, bool acceptor) : threads_(threads), acceptor_(acceptor) {}
  [[nodiscard]] bool hands_over() const noexcept { return acceptor_ && threads_ > 1; }
  [[nodiscard]] unsigned next() noexcept {
    next_ = next_ % (threads_ - 1) + 1;
    return next_;
  }

 private:
  unsigned threads_;
  bool acceptor_;
  unsigned next_ = 0;
};

// One listener's accept loop, on thread `index`: each connection becomes a task in
// runtime.connections(), on this thread or (acceptor mode) on the one placement picks.
task<> accept_loop(tcp_listener listener, unsigned index, connection_placement placement,
                   server_context* context) {
  server_runtime& runtime = context->runtime;
  error_report accept_errors("echo_server: accept");
  for (;;) {
    try {
      tcp_socket connection = co_await listener.accept();
      if (placement.hands_over()) {
        runtime.connections().spawn(runtime.thread(placement.next()),
                                    adopt_and_echo(connection.release(), context));
      } else {
        runtime.connections().spawn(runtime.thread(index), echo(std::move(connection), context));
      }
    } catch (const std::system_error& e) {
      if (e.code() == std::errc::operation_canceled) {
        co_return;  // shutdown: stop accepting
      }
      accept_errors(e);  // e.g. EMFILE: go on
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  command_line cli("echo_server", "a TCP echo server on cyan::net");
  cli.server_options()
      .option("idle-ms", "60000", "close a connection after this long without data")
      .flag("acceptor", "thread 0 accepts and hands connections to the other threads in turn");
  cli.parse(argc, argv);
  try {
    server_context context(static_cast<unsigned>(cli.number("threads")),
                           std::chrono::milliseconds(cli.number("idle-ms")));
    const endpoint where = cli.listen_endpoint();
    const bool one_listener = cli.is_set("acceptor") || where.is_unix();
    const connection_placement placement(context.runtime.size(), one_listener);
    const endpoint bound = context.runtime.start_listeners(
        where, one_listener, [&context, placement](tcp_listener listener, unsigned index) {
          return accept_loop(std::move(listener), index, placement, &context);
        });
    return context.runtime.run(bound, std::chrono::milliseconds(cli.number("grace-ms")));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "echo_server: %s\n", e.what());
    return 1;
  }
}
