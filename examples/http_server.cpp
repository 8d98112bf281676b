// An HTTP/1.1 server on cyan::net, with requests parsed by llhttp: a fixed page at "/", fast
// enough to hold its own against nginx, and an example of a server that faces clients it
// cannot trust.
//
//   http_server [--port N] [--host H] [--threads N] [--grace-ms N] [--body-size N]
//               [--max-header-bytes N] [--max-body-bytes N] [--request-timeout-ms N]
//               [--idle-timeout-ms N] [--max-connections N]
//               [--tls-cert FILE --tls-key FILE [--tls-session-tickets 0|1]]
//
// GET and HEAD of "/" (a query string aside) answer 200 with the page: a built-in HTML page,
// or with --body-size N a generated text body of exactly N bytes, at most the machine's memory
// (HEAD: the same headers, no body). Another path answers 404; another method 405 with "Allow:
// GET, HEAD". Every response carries Date (IMF-fixdate, kept per thread and rewritten once a
// second) and Content-Length.
//
// Connections are HTTP/1.1 keep-alive, and pipelined requests are answered in order, the
// answers to what one read brought written together; HTTP/1.0 closes after the response unless
// the request says "Connection: keep-alive", and "Connection: close" closes. A
// cyan::net::tcp_server gives each handler thread (--threads, default: the cores) its own
// reuse_port listener, and a connection stays on the thread that accepted it.
//
// Limits, each answered and then closed (the server ends its sending side and drops what the
// client still sends for up to a second, so the client can read the answer):
//   --max-header-bytes     request line and headers larger than this (8 KiB): 431; the request
//                          line alone larger: 414, as nginx;
//   --max-body-bytes       a body larger than this (1 MiB), by Content-Length or chunks: 413;
//   malformed              anything llhttp (strict) rejects, obs-fold, an empty header name, two
//                          Transfer-Encodings or one in an HTTP/1.0 request: 400;
//   transfer coding        a Transfer-Encoding other than "chunked" alone: 501, as nginx;
//   version                other than HTTP/1.0 and 1.1 (HTTP/2.0, HTTP/1.2, ...): 505, as nginx;
//   --request-timeout-ms   a request not complete this long after its first byte (10 s): 408;
//   --idle-timeout-ms      a keep-alive connection without a request this long (60 s): closed;
//   --max-connections      connections beyond this many (10000): 503, then closed;
//   --tls-cert, --tls-key  HTTPS (ALPN http/1.1): a handshake within --request-timeout-ms, then
//                          everything as above; a closing answer ends with close_notify;
//   --tls-session-tickets  1 (default): clients resume with tickets; 0: every handshake full.
//
// Prints "listening on <endpoint>"; SIGINT / SIGTERM shut it down gracefully (tcp_server's
// stop()): idle connections close at once (each holds the server's idle guard while it waits
// for a request), a request in flight is answered (with "Connection: close"), the rest close
// after --grace-ms; the exit status is then 0.

#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <exception>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "cyan/dispatch.h"
#include "cyan/net.h"
#include "http/connection.h"
#include "http/responses.h"
#include "server/server_support.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::task;
using cyan::examples::command_line;
using cyan::examples::error_report;
using cyan::examples::http::connection;
using cyan::examples::http::connection_header;
using cyan::examples::http::connection_settings;
using cyan::examples::http::is_quiet;
using cyan::examples::http::kLingerLimit;
using cyan::examples::http::linger;
using cyan::examples::http::status;
using cyan::examples::http::thread_state;
using cyan::examples::http::tls_connection;
using cyan::net::tcp_server;
using cyan::net::tcp_socket;
using cyan::net::tls_context;
using cyan::net::tls_stream;

constexpr std::string_view kPage =
    "<!DOCTYPE html>\n"
    "<html>\n"
    "<head>\n"
    "<title>cyan</title>\n"
    "</head>\n"
    "<body>\n"
    "<h1>cyan</h1>\n"
    "<p>This page comes from cyan's http_server example: C++20 coroutines on handler threads,\n"
    "one listener per thread, requests parsed by llhttp.</p>\n"
    "</body>\n"
    "</html>\n";

// The command line's settings. Read-only once the server runs.
struct server_settings {
  connection_settings connections;
  std::size_t max_connections = 0;
  std::string page;
  std::string page_type;
  tls_context tls;  // empty: plain HTTP
};

// What every connection needs: the settings, one thread_state per handler thread (by the
// server's thread index), and the count against --max-connections.
struct server_context {
  server_context(server_settings s, std::size_t threads) : settings(std::move(s)) {
    for (std::size_t i = 0; i < threads; ++i) {
      states.push_back(std::make_unique<thread_state>(settings.page, settings.page_type));
    }
  }
  server_settings settings;
  std::vector<std::unique_ptr<thread_state>> states;  // one per handler thread
  // Connections being served, against --max-connections. Relaxed: a count that publishes nothing.
  std::atomic<std::size_t> open_connections{ 0 };
};

// One place under --max-connections, given back when the connection's task is destroyed
// (also when it never ran). Move-only.
class connection_slot {
 public:
  // A place, or an empty slot when all are taken.
  static connection_slot take(std::atomic<std::size_t>& open, std::size_t limit) noexcept {
    if (open.fetch_add(1, std::memory_order_relaxed) >= limit) {
      open.fetch_sub(1, std::memory_order_relaxed);
      return connection_slot(nullptr);
    }
    return connection_slot(&open);
  }
  connection_slot(connection_slot&& other) noexcept : open_(std::exchange(other.open_, nullptr)) {}
  connection_slot& operator=(connection_slot&&) = delete;
  ~connection_slot() {
    if (open_ != nullptr) {
      open_->fetch_sub(1, std::memory_order_relaxed);
    }
  }
  [[nodiscard]] explicit operator bool() const noexcept { return open_ != nullptr; }

 private:
  explicit connection_slot(std::atomic<std::size_t>* open) noexcept : open_(open) {}
  std::atomic<std::size_t>* open_;
};

// Beyond --max-connections: 503, then the connection closes.
template <typename Stream>
task<> refuse(Stream& socket, thread_state* home) {
  std::string out;
  home->responses.refresh(std::time(nullptr));
  home->responses.append_head(out, status::service_unavailable, connection_header::close);
  out.append(home->responses.body(status::service_unavailable));
  std::array<std::byte, 4096> scratch;
  try {
    co_await socket.write_all(cyan::net::buffer(out), kLingerLimit);
  } catch (const std::system_error&) {
    co_return;
  }
  co_await linger(socket, scratch, kLingerLimit);
}

// The handshake of a --tls-cert connection, within the request timeout; null when it fails
// (said on stderr unless the client only went away or was too slow).
task<std::optional<tls_stream>> handshake(tcp_socket socket, const server_context& context) {
  std::optional<tls_stream> stream;
  try {
    stream.emplace(co_await tls_stream::accept(std::move(socket), context.settings.tls,
                                               context.settings.connections.request_timeout));
  } catch (const std::system_error& e) {
    if (!is_quiet(e) && e.code() != cyan::net::error::end_of_stream) {
      std::fprintf(stderr, "http_server: TLS handshake: %s\n", e.what());
    }
  }
  co_return stream;
}

// One connection, on the server's thread that accepted it: served, or refused beyond
// --max-connections (the slot is given back when the task ends); over TLS after its handshake.
task<> serve(tcp_socket socket, tcp_server& server, server_context& context) {
  thread_state* home = nullptr;
  for (std::size_t i = 0; i < server.threads().size(); ++i) {
    if (server.threads()[i]->is_current()) {
      home = context.states[i].get();
    }
  }
  const connection_slot slot =
      connection_slot::take(context.open_connections, context.settings.max_connections);
  if (context.settings.tls) {
    std::optional<tls_stream> stream = co_await handshake(std::move(socket), context);
    if (!stream) {
      co_return;
    }
    if (!slot) {
      co_await refuse(*stream, home);
      co_return;
    }
    tls_connection served(std::move(*stream), *home, context.settings.connections, server);
    co_await served.run();
    co_return;
  }
  if (!slot) {
    co_await refuse(socket, home);
    co_return;
  }
  connection served(std::move(socket), *home, context.settings.connections, server);
  co_await served.run();
}

// The machine's physical memory in bytes, or the most a std::uint64_t holds when it cannot tell.
std::uint64_t physical_memory() noexcept {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) {
    return std::numeric_limits<std::uint64_t>::max();
  }
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size);
}

// --body-size N: N bytes of text lines. A body the machine cannot hold is refused by the
// option's name: std::bad_alloc would name nothing, and a sanitizer's allocator aborts instead.
std::string generated_body(std::size_t size) {
  const std::string option = "--body-size " + std::to_string(size);
  if (const std::uint64_t memory = physical_memory(); size > memory) {
    throw std::invalid_argument(option + " is more than this machine's memory (" +
                                std::to_string(memory) + " bytes)");
  }
  std::string body;
  try {
    body.assign(size, '\n');
  } catch (const std::bad_alloc&) {
    throw std::invalid_argument(option + " is more than the memory free for it");
  }
  for (std::size_t i = 0; i < size; ++i) {
    if (i % 64 != 63) {
      body[i] = static_cast<char>('a' + (i / 64 + i % 64) % 26);
    }
  }
  return body;
}

server_settings read_settings(const command_line& cli) {
  server_settings s;
  s.connections.limits.max_header_bytes = static_cast<std::size_t>(cli.number("max-header-bytes"));
  s.connections.limits.max_body_bytes = static_cast<std::uint64_t>(cli.number("max-body-bytes"));
  s.connections.request_timeout = std::chrono::milliseconds(cli.number("request-timeout-ms"));
  s.connections.idle_timeout = std::chrono::milliseconds(cli.number("idle-timeout-ms"));
  s.max_connections = static_cast<std::size_t>(cli.number("max-connections"));
  const auto body_size = static_cast<std::size_t>(cli.number("body-size"));
  s.page = body_size == 0 ? std::string(kPage) : generated_body(body_size);
  s.page_type = body_size == 0 ? "text/html" : "text/plain";
  const std::string certificate = cli.text("tls-cert");
  const std::string key = cli.text("tls-key");
  if (certificate.empty() != key.empty()) {
    throw std::invalid_argument("--tls-cert and --tls-key go together");
  }
  if (!certificate.empty()) {
    s.tls = tls_context::server({ .certificate_chain_file = certificate,
                                  .private_key_file = key,
                                  .alpn = { "http/1.1" },
                                  .session_tickets = cli.number("tls-session-tickets") != 0 });
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  cyan::examples::block_shutdown_signals();
  command_line cli("http_server", "an HTTP/1.1 server on cyan::net and llhttp");
  cli.server_options()
      .option("body-size", "0", "the body of /: N generated bytes (0: the built-in HTML page)")
      .option("max-header-bytes", "8192",
              "largest request line and headers (larger: 431; the request line alone: 414)")
      .option("max-body-bytes", "1048576", "largest request body (larger: 413)")
      .option("request-timeout-ms", "10000", "time for a request to arrive whole (then 408)")
      .option("idle-timeout-ms", "60000", "close a keep-alive connection idle this long")
      .option("max-connections", "10000", "connections served at once (more: 503)")
      .option("tls-cert", "", "serve HTTPS with this PEM certificate chain (and --tls-key)")
      .option("tls-key", "", "the PEM private key of --tls-cert")
      .option("tls-session-tickets", "1", "0: no TLS session tickets (every handshake full)");
  cli.parse(argc, argv);
  try {
    error_report accept_errors("http_server: accept");  // outlives the server: its last count
    tcp_server server(
        { .endpoint = cli.listen_endpoint(),
          .threads = static_cast<std::size_t>(cli.number("threads")),
          .on_accept_error = [&accept_errors](const std::system_error& e) { accept_errors(e); } });
    server_context context(read_settings(cli), server.threads().size());
    server.start([&server, &context](tcp_socket socket) {
      return serve(std::move(socket), server, context);
    });
    return cyan::examples::serve_until_signalled(server,
                                                 std::chrono::milliseconds(cli.number("grace-ms")));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "http_server: %s\n", e.what());
    return 1;
  }
}
