#include "http/connection.h"

#include <cstdio>
#include <ctime>
#include <system_error>
#include <utility>

#include "server/server_support.h"

namespace cyan::examples::http {

namespace {

// Output is written once this much has gathered, before the rest of the input is parsed: what
// bounds a connection's output buffer when a client pipelines many requests at once.
constexpr std::size_t kFlushBytes = 64 * 1024;
// The interim answer to "Expect: 100-continue": send the body.
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace

bool is_quiet(const std::system_error& e) {
  return is_disconnect(e) || e.code() == std::errc::timed_out ||
         e.code() == net::tls_error::truncated;
}

dispatch::task<> linger(net::tcp_socket& socket, std::span<std::byte> scratch,
                        std::chrono::steady_clock::duration limit) {
  try {
    socket.shutdown_send();
    const auto until = std::chrono::steady_clock::now() + limit;
    for (auto left = limit; left >= left.zero(); left = until - std::chrono::steady_clock::now()) {
      if (co_await socket.read_some(scratch, left) == 0) {
        break;
      }
    }
  } catch (const std::system_error&) {
    // Whatever ended it, the socket closes next.
  }
}

dispatch::task<> linger(net::tls_stream& stream, std::span<std::byte> /*scratch*/,
                        std::chrono::steady_clock::duration limit) {
  try {
    (void)co_await stream.shutdown(limit);
  } catch (const std::system_error&) {
    // Whatever ended it, the socket closes next.
  }
}

template <typename Stream>
basic_connection<Stream>::basic_connection(Stream socket, thread_state& home,
                                           const connection_settings& settings,
                                           net::tcp_server& server)
    : socket_(std::move(socket)),
      home_(home),
      settings_(settings),
      server_(server),
      parser_(settings.limits) {
  out_.reserve(4096);
}

// A connection's life:
//   1. exchange   read, answer, write, again (see exchange());
//   2. time out   a request not complete by its deadline gets 408;
//   3. close      after an answer that closes: linger, then close (the socket's destructor).
template <typename Stream>
dispatch::task<> basic_connection<Stream>::run() {
  bool timed_out = false;
  try {
    tcp_of(socket_).set_nodelay();
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
      home_.responses.refresh(std::time(nullptr));  // the last read may be long ago
      respond_error(status::request_timeout);
      co_await socket_.write_all(net::buffer(out_), settings_.idle_timeout);
    }
  } catch (const std::system_error&) {
    co_return;  // the client is gone
  }
  if (closing_ && socket_.is_open()) {
    // While draining, only what has arrived: the shutdown is not to wait; a drain that begins
    // meanwhile closes it (the guard).
    const auto idle = server_.idle(tcp_of(socket_));
    co_await linger(socket_, input_, linger_limit());
  }
}

// The requests of a connection, in turn:
//   1. read     wait for bytes: up to --idle-timeout-ms between requests, up to the deadline
//               of the request in progress (a timeout throws); between requests it holds the
//               server's idle guard, so a read waiting for the next request ends when draining;
//   2. answer   parse them, appending each request's response to out_ (answer());
//   3. write    out_ (and a large body), all the answers at once; then on to (2) with what is
//               left of the input, or to (1) when it is all parsed, after "100 Continue" when
//               the request in progress waits for it (Expect: 100-continue).
// Ends after a response that closes, at end of stream, or when the server drains between two
// requests with none on its way (the read ends with operation_canceled).
template <typename Stream>
dispatch::task<> basic_connection<Stream>::exchange() {
  for (;;) {
    // Between requests, the guard (on the stream: what TLS holds counts) is the drain's look
    // at the connection, at once or when it begins: closed unless a request has begun to come.
    std::optional<net::tcp_server::idle_guard> idle;
    if (!parser_.in_request()) {
      idle.emplace(server_.idle(socket_));
    }
    reading_ = true;
    const std::size_t n = co_await socket_.read_some(input_, read_limit());
    reading_ = false;
    idle.reset();
    if (n == 0) {
      co_return;
    }
    unparsed_ = std::string_view(reinterpret_cast<const char*>(input_.data()), n);
    home_.responses.refresh(std::time(nullptr));
    while (answer()) {
      if (large_body_.empty()) {
        co_await socket_.write_all(net::buffer(out_), settings_.idle_timeout);
      } else {
        // One element type for the array: the page is const, so out_ goes as const bytes too.
        co_await socket_.write_all(
            std::array{ net::buffer(std::as_const(out_)), net::buffer(large_body_) },
            settings_.idle_timeout);
        large_body_ = {};
      }
      out_.clear();
      if (closing_) {
        co_return;
      }
    }
    if (parser_.continue_expected()) {
      parser_.continue_sent();
      co_await socket_.write_all(net::buffer(kContinue), settings_.idle_timeout);
    }
    note_request_start();
  }
}

// How long to keep reading after the answer that closes: nothing more is expected when the
// client asked to close after a request that arrived whole, with nothing after it (as nginx:
// the close_notify or end of stream goes out at once, no wait for the client's); otherwise the
// client may still be sending (an error mid-request, bytes pipelined after), and closing with
// them unread would reset the connection before the client reads the answer: kLingerLimit.
template <typename Stream>
std::chrono::nanoseconds basic_connection<Stream>::linger_limit() const {
  const bool client_done = client_closes_ && unparsed_.empty() && !parser_.in_request();
  if (server_.draining() || client_done) {
    return clock_type::duration::zero();
  }
  return kLingerLimit;
}

// Between requests the idle timeout; within one, what is left until its deadline.
template <typename Stream>
std::chrono::nanoseconds basic_connection<Stream>::read_limit() const {
  if (!parser_.in_request()) {
    return settings_.idle_timeout;
  }
  return deadline_ - clock_type::now();
}

// A request that began in the bytes just parsed gets its deadline now.
template <typename Stream>
void basic_connection<Stream>::note_request_start() {
  if (parser_.in_request() && deadline_of_ != parser_.requests_begun()) {
    deadline_of_ = parser_.requests_begun();
    deadline_ = clock_type::now() + settings_.request_timeout;
  }
}

// Parses what is left of the input, appending a response per request, until the output should
// be written before parsing on (a response that closes, a large body, kFlushBytes gathered) or
// the input is all parsed. Returns whether there is output to write.
template <typename Stream>
bool basic_connection<Stream>::answer() {
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

template <typename Stream>
void basic_connection<Stream>::respond(const request& r) {
  const status s = r.method == request::verb::other ? status::method_not_allowed
                   : r.root                         ? status::ok
                                                    : status::not_found;
  client_closes_ = !r.keep_alive;
  closing_ = client_closes_ || server_.draining();
  const connection_header connection = closing_     ? connection_header::close
                                       : r.http_1_0 ? connection_header::keep_alive
                                                    : connection_header::implied;
  const bool with_body = r.method != request::verb::head;
  const std::string_view body = home_.responses.body(s);
  const bool inline_body = body.size() <= kInlineBodyLimit;
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

template <typename Stream>
void basic_connection<Stream>::respond_error(status s) {
  closing_ = true;
  client_closes_ = false;
  home_.responses.append_head(out_, s, connection_header::close);
  out_.append(home_.responses.body(s));
}

template class basic_connection<net::tcp_socket>;
template class basic_connection<net::tls_stream>;

}  // namespace cyan::examples::http
