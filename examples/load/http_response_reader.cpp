#include "load/http_response_reader.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <span>
#include <string>
#include <system_error>

#include "cyan/net/error.h"

namespace cyan::examples {

namespace {

constexpr std::string_view kEndOfHead = "\r\n\r\n";

std::string_view trim(std::string_view text) noexcept {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) {
    return {};
  }
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

bool equals_ignoring_case(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool contains_ignoring_case(std::string_view text, std::string_view word) noexcept {
  for (std::size_t at = 0; at + word.size() <= text.size(); ++at) {
    if (equals_ignoring_case(text.substr(at, word.size()), word)) {
      return true;
    }
  }
  return false;
}

[[noreturn]] void throw_end_of_stream() {
  throw std::system_error(make_error_code(net::error::end_of_stream), "response cut short");
}

// "HTTP/1.x NNN reason": the status, and whether the version keeps connections by default. The
// status is three digits from 100 to 599 (RFC 9110, 15: others are invalid); from_chars alone
// would also take "-12" and "050".
http_response parse_status_line(std::string_view line) {
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  const bool well_formed = line.size() >= 12 && line.substr(0, 7) == "HTTP/1." &&
                           (line[7] == '0' || line[7] == '1') && line[8] == ' ' && digit(line[9]) &&
                           digit(line[10]) && digit(line[11]);
  const int status =
      well_formed ? (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0') : 0;
  if (!well_formed || status < 100 || status > 599) {
    throw http_protocol_error("malformed status line: " + std::string(line.substr(0, 80)));
  }
  return { status, line[7] == '1' };
}

}  // namespace

http_response_reader::http_response_reader(std::size_t header_capacity)
    : buffer_(header_capacity) {}

std::string_view http_response_reader::buffered() const noexcept {
  return { buffer_.data() + begin_, end_ - begin_ };
}

void http_response_reader::compact() noexcept {
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
}

dispatch::task<http_response> http_response_reader::read(net::tcp_socket& socket,
                                                         std::chrono::milliseconds limit) {
  const std::size_t head_size = co_await read_head(socket, limit);
  head parsed = parse_head(buffered().substr(0, head_size));
  begin_ += head_size;
  co_await skip_body(socket, parsed, limit);
  co_return parsed.response;
}

// Reads until the buffer holds a whole status line and headers; returns their size, the
// blank line included.
dispatch::task<std::size_t> http_response_reader::read_head(net::tcp_socket& socket,
                                                            std::chrono::milliseconds limit) {
  for (;;) {
    if (const auto at = buffered().find(kEndOfHead); at != std::string_view::npos) {
      co_return at + kEndOfHead.size();
    }
    compact();
    if (end_ == buffer_.size()) {
      throw http_protocol_error("response head larger than " + std::to_string(buffer_.size()) +
                                " bytes");
    }
    const std::size_t n =
        co_await socket.read_some(std::as_writable_bytes(std::span(buffer_).subspan(end_)), limit);
    if (n == 0) {
      throw_end_of_stream();
    }
    end_ += n;
  }
}

http_response_reader::head http_response_reader::parse_head(std::string_view text) {
  auto line_end = text.find("\r\n");
  head parsed{ parse_status_line(text.substr(0, line_end)) };
  for (text.remove_prefix(line_end + 2); (line_end = text.find("\r\n")) > 0;
       text.remove_prefix(line_end + 2)) {
    const std::string_view line = text.substr(0, line_end);
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) {
      throw http_protocol_error("malformed header: " + std::string(line.substr(0, 80)));
    }
    const std::string_view name = trim(line.substr(0, colon));
    const std::string_view value = trim(line.substr(colon + 1));
    if (equals_ignoring_case(name, "content-length")) {
      const auto [end, status] =
          std::from_chars(value.data(), value.data() + value.size(), parsed.content_length);
      if (status != std::errc{} || end != value.data() + value.size()) {
        throw http_protocol_error("malformed Content-Length: " + std::string(value));
      }
      parsed.has_length = true;
    } else if (equals_ignoring_case(name, "connection")) {
      parsed.response.keep_alive =
          contains_ignoring_case(value, "keep-alive") ||
          (parsed.response.keep_alive && !contains_ignoring_case(value, "close"));
    } else if (equals_ignoring_case(name, "transfer-encoding") &&
               !equals_ignoring_case(value, "identity")) {
      throw http_protocol_error("unsupported Transfer-Encoding: " + std::string(value));
    }
  }
  return parsed;
}

// Drops the body: Content-Length bytes, none for 1xx / 204 / 304, or (no length) everything
// until the server closes.
dispatch::task<> http_response_reader::skip_body(net::tcp_socket& socket, head& parsed,
                                                 std::chrono::milliseconds limit) {
  const int status = parsed.response.status;
  if (status / 100 == 1 || status == 204 || status == 304) {
    co_return;
  }
  const bool until_close = !parsed.has_length;
  if (until_close) {
    parsed.response.keep_alive = false;
  }
  std::size_t remaining = parsed.content_length;
  for (;;) {
    const std::size_t taken = until_close ? end_ - begin_ : std::min(remaining, end_ - begin_);
    begin_ += taken;
    remaining -= until_close ? 0 : taken;
    if (!until_close && remaining == 0) {
      co_return;
    }
    begin_ = end_ = 0;
    end_ = co_await socket.read_some(std::as_writable_bytes(std::span(buffer_)), limit);
    if (end_ == 0) {
      if (until_close) {
        co_return;
      }
      throw_end_of_stream();
    }
  }
}

}  // namespace cyan::examples
