// An HTTP/1.1 server on cyan::net, with requests parsed by llhttp: a fixed page at "/", fast
// enough to hold its own against nginx, and an example of a server that faces clients it
// cannot trust.
//
//   http_server [--port N] [--host H] [--threads N] [--grace-ms N] [--body-size N]
//               [--max-header-bytes N] [--max-body-bytes N] [--request-timeout-ms N]
//               [--idle-timeout-ms N] [--max-connections N]
//
// GET and HEAD of "/" (a query string aside) answer 200 with the page: a built-in HTML page,
// or with --body-size N a generated text body of exactly N bytes (HEAD: the same headers, no
// body). Another path answers 404; another method 405 with "Allow: GET, HEAD". Every response
// carries Date (IMF-fixdate, kept per thread and rewritten once a second) and Content-Length.
//
// Connections are HTTP/1.1 keep-alive, and pipelined requests are answered in order, the
// answers to what one read brought written together; HTTP/1.0 closes after the response unless
// the request says "Connection: keep-alive", and "Connection: close" closes. Each handler
// thread (--threads, default: the cores) has its own reuse_port listener, and a connection
// stays on the thread that accepted it.
//
// Limits, each answered and then closed (the server ends its sending side and drops what the
// client still sends for up to a second, so the client can read the answer):
//   --max-header-bytes     request line and headers larger than this (8 KiB): 431;
//   --max-body-bytes       a body larger than this (1 MiB), by Content-Length or chunks: 413;
//   malformed              anything llhttp rejects: 400;
//   --request-timeout-ms   a request not complete this long after its first byte (10 s): 408;
//   --idle-timeout-ms      a keep-alive connection without a request this long (60 s): closed;
//   --max-connections      connections beyond this many (10000): 503, then closed.
//
// Prints "listening on <endpoint>"; SIGINT / SIGTERM shut it down gracefully (see
// server/server_support.h): idle connections close at once, a request in flight is answered
// (with "Connection: close"), the rest close after --grace-ms; the exit status is then 0.

#include <sys/ioctl.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <ctime>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "cyan/common/cache_line.h"
#include "cyan/dispatch.h"
#include "cyan/net.h"
#include "http/request_parser.h"
#include "http/responses.h"
#include "server/server_support.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::task;
using cyan::examples::command_line;
using cyan::examples::server_runtime;
using cyan::examples::http::connection_header;
using cyan::examples::http::parse_event;
using cyan::examples::http::request;
using cyan::examples::http::request_limits;
using cyan::examples::http::request_parser;
using cyan::examples::http::response_set;
using cyan::examples::http::status;
using cyan::net::endpoint;
using cyan::net::tcp_listener;
using cyan::net::tcp_socket;
using clock_type = std::chrono::steady_clock;

// What one read takes at most. llhttp parses as the bytes come, so a request need not fit.
constexpr std::size_t kReadBufferSize = 8 * 1024;
// Output is written once this much has gathered, before the rest of the input is parsed: what
// bounds a connection's output buffer when a client pipelines many requests at once.
constexpr std::size_t kFlushBytes = 64 * 1024;
// A connection lets the thread's other work run after this many reads: its reads may all find
// data at once (a client that pipelines without pause) and never give the loop a turn.
constexpr unsigned kReadsBeforeYield = 32;
// After an answer that closes: how long the server keeps reading (and dropping) what the client
// still sends. Closing with unread input resets the connection, and the client may then lose
// the answer before it reads it.
constexpr auto kLingerLimit = 1s;

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
  request_limits limits;
  std::chrono::milliseconds request_timeout{ 0 };
  std::chrono::milliseconds idle_timeout{ 0 };
  std::size_t max_connections = 0;
  std::string page;
  std::string page_type;
};

class http_connection;

// What belongs to one handler thread: its responses (whose Date it rewrites) and its
// connections (for the drain hook). Only that thread touches it once the server runs.
struct alignas(cyan::cache_line_size) thread_state {
  explicit thread_state(const server_settings& settings) : responses(settings.page, settings.page_type) {}
  response_set responses;
  http_connection* connections = nullptr;  // an intrusive list, see http_connection
};

// What every task needs. The runtime is the last member, so its destructor joins the tasks
// while the rest is still alive.
struct server_context {
  server_context(server_settings s, unsigned threads) : settings(std::move(s)), runtime(threads) {
    for (unsigned i = 0; i < runtime.size(); ++i) {
      states.push_back(std::make_unique<thread_state>(settings));
    }
  }
  server_settings settings;
  std::vector<std::unique_ptr<thread_state>> states;  // one per handler thread
  // Connections being served, against --max-connections. Relaxed: a count that publishes nothing.
  std::atomic<std::size_t> open_connections{ 0 };
  server_runtime runtime;
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

// The errors that only mean the client went away, was too slow, or the server is stopping.
bool is_quiet(const std::system_error& e) {
  return cyan::examples::is_disconnect(e) || e.code() == std::errc::timed_out;
}

// After an answer that closes the connection: ends the sending side (the client reads the
// answer, then end of stream) and reads and drops what the client still sends until it closes
// too, or `limit` (zero: only what has arrived).
task<> linger(tcp_socket& socket, std::span<std::byte> scratch, clock_type::duration limit) {
  try {
    socket.shutdown_send();
    const auto until = clock_type::now() + limit;
    for (auto left = limit; left >= left.zero(); left = until - clock_type::now()) {
      if (co_await socket.read_some(scratch, left) == 0) {
        break;
      }
    }
  } catch (const std::system_error&) {
    // Whatever ended it, the socket closes next.
  }
}

// One connection: its buffers, parser and the loop that serves it (see run()). Lives in its
// task's frame; linked into its thread's list from construction to destruction.
class http_connection {
 public:
  http_connection(tcp_socket socket, thread_state& home, server_context& context)
      : socket_(std::move(socket)), home_(home), context_(context), parser_(context.settings.limits) {
    out_.reserve(4096);
    next_ = home_.connections;
    if (next_ != nullptr) {
      next_->previous_ = this;
    }
    home_.connections = this;
  }
  http_connection(const http_connection&) = delete;
  http_connection& operator=(const http_connection&) = delete;
  ~http_connection() {
    (previous_ != nullptr ? previous_->next_ : home_.connections) = next_;
    if (next_ != nullptr) {
      next_->previous_ = previous_;
    }
  }

  task<> run();

  // For the drain hook: closes the connection if it waits for a request and none has begun
  // to arrive, or lingers after its last answer (its pending read then ends with
  // operation_canceled).
  void close_if_idle() noexcept {
    int unread = 0;
    if (lingering_ || (idle_ && ::ioctl(socket_.native_handle(), FIONREAD, &unread) == 0 && unread == 0)) {
      socket_.close();
    }
  }
  [[nodiscard]] http_connection* next() const noexcept { return next_; }

 private:
  task<> exchange();
  [[nodiscard]] std::chrono::nanoseconds read_limit();
  void note_request_start();
  [[nodiscard]] bool answer();
  void respond(const request& r);
  void respond_error(status s);

  tcp_socket socket_;
  thread_state& home_;
  server_context& context_;
  request_parser parser_;
  std::array<std::byte, kReadBufferSize> input_;
  std::string_view unparsed_;  // of input_
  std::string out_;            // the responses to write, reused
  std::string_view large_body_;  // written after out_ (see kInlineBodyLimit)
  std::array<std::span<const std::byte>, 2> pieces_;  // out_ and large_body_, while written
  clock_type::time_point deadline_;  // of the request in progress
  std::uint64_t deadline_of_ = 0;    // which request (by requests_begun()) deadline_ is for
  unsigned reads_ = 0;
  bool idle_ = false;     // reading, between requests
  bool reading_ = false;  // in a read (not a write) when an exception comes
  bool closing_ = false;  // the last response closes the connection
  bool lingering_ = false;
  http_connection* previous_ = nullptr;
  http_connection* next_ = nullptr;
};

// A connection's life:
//   1. exchange   read, answer, write, again (see exchange());
//   2. time out   a request not complete by its deadline gets 408;
//   3. close      after an answer that closes: linger, then close (the socket's destructor).
task<> http_connection::run() {
  bool timed_out = false;
  try {
    socket_.set_nodelay();
    co_await exchange();
  } catch (const std::system_error& e) {
    timed_out = e.code() == std::errc::timed_out && reading_ && parser_.in_request();
    if (!is_quiet(e)) {
      std::fprintf(stderr, "http_server: connection: %s\n", e.what());
    }
  }
  try {
    if (timed_out) {
      out_.clear();
      respond_error(status::request_timeout);
      co_await socket_.write_all(cyan::net::buffer(out_), context_.settings.idle_timeout);
    }
  } catch (const std::system_error&) {
    co_return;  // the client is gone
  }
  if (closing_ && socket_.is_open()) {
    lingering_ = true;  // while draining, only what has arrived: the shutdown is not to wait
    co_await linger(socket_, input_, context_.runtime.draining() ? clock_type::duration::zero() : kLingerLimit);
  }
}

// The requests of a connection, in turn:
//   1. read     wait for bytes: up to --idle-timeout-ms between requests, up to the deadline
//               of the request in progress (a timeout throws); an idle read ends when draining;
//   2. answer   parse them, appending each request's response to out_ (answer());
//   3. write    out_ (and a large body), all the answers at once; then on to (2) with what is
//               left of the input, or to (1) when it is all parsed.
// Ends after a response that closes, at end of stream, or when the server drains between two
// requests.
task<> http_connection::exchange() {
  for (;;) {
    if (!parser_.in_request() && context_.runtime.draining()) {
      co_return;
    }
    if (++reads_ % kReadsBeforeYield == 0) {
      co_await cyan::dispatch::yield();
    }
    idle_ = !parser_.in_request();
    reading_ = true;
    const std::size_t n = co_await socket_.read_some(input_, read_limit());
    reading_ = idle_ = false;
    if (n == 0) {
      co_return;
    }
    unparsed_ = std::string_view(reinterpret_cast<const char*>(input_.data()), n);
    home_.responses.refresh(std::time(nullptr));
    while (answer()) {
      if (large_body_.empty()) {
        co_await socket_.write_all(cyan::net::buffer(out_), context_.settings.idle_timeout);
      } else {
        pieces_ = { cyan::net::buffer(out_), cyan::net::buffer(large_body_) };
        co_await socket_.write_all(std::span(pieces_), context_.settings.idle_timeout);
        large_body_ = {};
      }
      out_.clear();
      if (closing_) {
        co_return;
      }
    }
    note_request_start();
  }
}

// Between requests the idle timeout; within one, what is left until its deadline.
std::chrono::nanoseconds http_connection::read_limit() {
  if (!parser_.in_request()) {
    return context_.settings.idle_timeout;
  }
  return deadline_ - clock_type::now();
}

// A request that began in the bytes just parsed gets its deadline now.
void http_connection::note_request_start() {
  if (parser_.in_request() && deadline_of_ != parser_.requests_begun()) {
    deadline_of_ = parser_.requests_begun();
    deadline_ = clock_type::now() + context_.settings.request_timeout;
  }
}

// Parses what is left of the input, appending a response per request, until the output should
// be written before parsing on (a response that closes, a large body, kFlushBytes gathered) or
// the input is all parsed. Returns whether there is output to write.
bool http_connection::answer() {
  while (!unparsed_.empty()) {
    const parse_event event = parser_.feed(unparsed_);
    if (event == parse_event::error) {
      respond_error(parser_.error_status());
      return true;
    }
    if (event == parse_event::request) {
      respond(parser_.last());
      if (closing_ || !large_body_.empty() || out_.size() >= kFlushBytes) {
        return true;
      }
    }
  }
  return !out_.empty();
}

void http_connection::respond(const request& r) {
  const status s = r.method == request::verb::other ? status::method_not_allowed
                   : r.root                         ? status::ok
                                                    : status::not_found;
  closing_ = !r.keep_alive || context_.runtime.draining();
  const connection_header connection = closing_     ? connection_header::close
                                       : r.http_1_0 ? connection_header::keep_alive
                                                    : connection_header::implied;
  const bool with_body = r.method != request::verb::head;
  const std::string_view body = home_.responses.body(s);
  const bool inline_body = body.size() <= cyan::examples::http::kInlineBodyLimit;
  if (connection == connection_header::implied && with_body && inline_body) {
    home_.responses.append_whole(out_, s);  // the common case: one copy
    return;
  }
  home_.responses.append_head(out_, s, connection);
  if (with_body) {
    if (inline_body) {
      out_.append(body);
    } else {
      large_body_ = body;
    }
  }
}

void http_connection::respond_error(status s) {
  closing_ = true;
  home_.responses.append_head(out_, s, connection_header::close);
  out_.append(home_.responses.body(s));
}

task<> serve(tcp_socket socket, connection_slot, thread_state* home, server_context* context) {
  http_connection connection(std::move(socket), *home, *context);
  co_await connection.run();
}

// Beyond --max-connections: 503, then the connection closes.
task<> refuse(tcp_socket socket, thread_state* home) {
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

// The drain hook: closes the connections of thread `index` that wait idle for a request.
void close_idle_connections(server_context& context, unsigned index) {
  for (http_connection* c = context.states[index]->connections; c != nullptr;) {
    http_connection* next = c->next();
    c->close_if_idle();  // the connection's task ends later, not in here
    c = next;
  }
}

// One listener's accept loop, on thread `index`: each connection becomes a task in
// runtime.connections() on this thread.
task<> accept_loop(tcp_listener listener, unsigned index, server_context* context) {
  server_runtime& runtime = context->runtime;
  thread_state* home = context->states[index].get();
  for (;;) {
    try {
      tcp_socket connection = co_await listener.accept();
      connection_slot slot = connection_slot::take(context->open_connections, context->settings.max_connections);
      if (slot) {
        runtime.connections().spawn(runtime.thread(index), serve(std::move(connection), std::move(slot), home, context));
      } else {
        runtime.connections().spawn(runtime.thread(index), refuse(std::move(connection), home));
      }
    } catch (const std::system_error& e) {
      if (e.code() == std::errc::operation_canceled) {
        co_return;  // shutdown: stop accepting
      }
      std::fprintf(stderr, "http_server: accept: %s\n", e.what());  // e.g. EMFILE: go on
    }
  }
}

// Binds the listeners (the first one picks the port; the others share it with reuse_port; a
// unix: path has one), starts their accept loops and returns the address they listen on.
endpoint start_listening(const endpoint& where, server_context& context) {
  server_runtime& runtime = context.runtime;
  const bool one_listener = where.is_unix();
  const tcp_listener::options settings{ .reuse_port = !one_listener, .remove_stale_socket = true };
  tcp_listener first = tcp_listener::bind(where, settings);
  const endpoint bound = first.local_endpoint();
  const unsigned listeners = one_listener ? 1 : runtime.size();
  for (unsigned index = 0; index < listeners; ++index) {
    tcp_listener listener = index == 0 ? std::move(first) : tcp_listener::bind(bound, settings);
    runtime.listeners().spawn(runtime.thread(index), accept_loop(std::move(listener), index, &context));
  }
  return bound;
}

// --body-size N: N bytes of text lines.
std::string generated_body(std::size_t size) {
  std::string body(size, '\n');
  for (std::size_t i = 0; i < size; ++i) {
    if (i % 64 != 63) {
      body[i] = static_cast<char>('a' + (i / 64 + i % 64) % 26);
    }
  }
  return body;
}

server_settings read_settings(const command_line& cli) {
  server_settings s;
  s.limits.max_header_bytes = static_cast<std::size_t>(cli.number("max-header-bytes"));
  s.limits.max_body_bytes = static_cast<std::uint64_t>(cli.number("max-body-bytes"));
  s.request_timeout = std::chrono::milliseconds(cli.number("request-timeout-ms"));
  s.idle_timeout = std::chrono::milliseconds(cli.number("idle-timeout-ms"));
  s.max_connections = static_cast<std::size_t>(cli.number("max-connections"));
  const auto body_size = static_cast<std::size_t>(cli.number("body-size"));
  s.page = body_size == 0 ? std::string(kPage) : generated_body(body_size);
  s.page_type = body_size == 0 ? "text/html" : "text/plain";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  command_line cli("http_server", "an HTTP/1.1 server on cyan::net and llhttp");
  cli.server_options()
      .option("body-size", "0", "the body of /: N generated bytes (0: the built-in HTML page)")
      .option("max-header-bytes", "8192", "largest request line and headers (larger: 431)")
      .option("max-body-bytes", "1048576", "largest request body (larger: 413)")
      .option("request-timeout-ms", "10000", "time for a request to arrive whole (then 408)")
      .option("idle-timeout-ms", "60000", "close a keep-alive connection idle this long")
      .option("max-connections", "10000", "connections served at once (more: 503)");
  cli.parse(argc, argv);
  try {
    server_context context(read_settings(cli), static_cast<unsigned>(cli.number("threads")));
    context.runtime.on_drain([&context](unsigned index) { close_idle_connections(context, index); });
    const endpoint bound = start_listening(cli.listen_endpoint(), context);
    return context.runtime.run(bound, std::chrono::milliseconds(cli.number("grace-ms")));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "http_server: %s\n", e.what());
    return 1;
  }
}
