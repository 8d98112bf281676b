#pragma once

// HTTP/1.x requests read from a connection's byte stream with llhttp, one complete request at a
// time (pipelined ones in turn), with the limits of http_server: the size of the header section
// and of the body.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include <llhttp.h>

#include "http/responses.h"

namespace cyan::examples::http {

/// What a request may carry at most.
struct request_limits {
  /// Request line and headers, up to the blank line (the request line alone over it: 414).
  std::size_t max_header_bytes = 8 * 1024;
  std::uint64_t max_body_bytes = 1024 * 1024;
};

/// What a complete request asks for: all that http_server answers by.
struct request {
  enum class verb : std::uint8_t { get, head, other };
  verb method = verb::other;
  bool root = false;        ///< the path is "/" (a query string aside)
  bool keep_alive = false;  ///< another request may follow on the connection
  bool http_1_0 = false;    ///< HTTP/1.0 (a keep-alive answer then says so)
};

/// What feed() stopped at.
enum class parse_event : std::uint8_t {
  need_more,  ///< every byte was parsed; the request so far (if any) is incomplete
  request,    ///< a request is complete: see last()
  error,      ///< the stream is not valid HTTP or broke a limit: see error_status()
};

/// llhttp with its callbacks, for one connection. Not movable: llhttp calls back through a
/// pointer to it. [one thread]
class request_parser {
 public:
  explicit request_parser(request_limits limits) noexcept;
  request_parser(const request_parser&) = delete;
  request_parser& operator=(const request_parser&) = delete;

  /// Parses `input` up to the end of the next complete request (parse_event::request), to its
  /// end (need_more) or to an error, and removes what it parsed from the front of `input`.
  /// After an error every further call reports it again (and parses nothing).
  [[nodiscard]] parse_event feed(std::string_view& input) noexcept;

  /// The request feed() last completed.
  [[nodiscard]] const request& last() const noexcept { return request_; }
  /// After parse_event::error: 414 (request line too long), 431 (the header section with it
  /// too large), 413 (body too large), 501 (a
  /// Transfer-Encoding other than "chunked" alone), 505 (a version other than HTTP/1.0 and 1.1)
  /// or 400 (malformed; also two Transfer-Encoding lines, or one in an HTTP/1.0 request).
  [[nodiscard]] status error_status() const noexcept { return error_; }
  /// Part of a request has arrived, not all of it.
  [[nodiscard]] bool in_request() const noexcept { return in_request_; }
  /// How many requests have begun to arrive: tells one request in progress from the next.
  [[nodiscard]] std::uint64_t requests_begun() const noexcept { return requests_begun_; }
  /// The request in progress is an HTTP/1.1 one whose header section has arrived with
  /// "Expect: 100-continue" and whose body has not: its client waits for "100 Continue" (or a
  /// while) before it sends the body. Until continue_sent().
  [[nodiscard]] bool continue_expected() const noexcept { return continue_expected_; }
  /// The server has answered continue_expected() with "100 Continue".
  void continue_sent() noexcept { continue_expected_ = false; }

 private:
  static const llhttp_settings_t kSettings;
  static request_parser& of(llhttp_t* parser) noexcept {
    return *static_cast<request_parser*>(parser->data);
  }
  static int on_message_begin(llhttp_t* parser) noexcept;
  static int on_method(llhttp_t* parser, const char* at, std::size_t length) noexcept;
  static int on_url(llhttp_t* parser, const char* at, std::size_t length) noexcept;
  static int on_version(llhttp_t* parser, const char* at, std::size_t length) noexcept;
  static int on_version_complete(llhttp_t* parser) noexcept;
  static int on_header_field(llhttp_t* parser, const char* at, std::size_t length) noexcept;
  static int on_header_field_complete(llhttp_t* parser) noexcept;
  static int on_header_value(llhttp_t* parser, const char* at, std::size_t length) noexcept;
  static int on_header_value_complete(llhttp_t* parser) noexcept;
  static int on_headers_complete(llhttp_t* parser) noexcept;
  static int on_body(llhttp_t* parser, const char* at, std::size_t length) noexcept;
  static int on_message_complete(llhttp_t* parser) noexcept;

  parse_event fail(status why) noexcept;
  // Why the Transfer-Encoding lines seen so far refuse the request, if they do.
  [[nodiscard]] std::optional<status> transfer_encoding_refusal() const noexcept;
  // The header section's bytes of this feed() up to `end` (where the input ends, or llhttp
  // stopped): read for misread lines and counted. Whichever comes first in the stream, a
  // misread line (400) or the limit (414 or 431), refuses the request, however it was cut.
  [[nodiscard]] std::optional<status> check_header_bytes(const char* end) noexcept;
  // Adds this feed()'s header bytes up to `end`; whether the header section is within the limit.
  [[nodiscard]] bool count_header_bytes(const char* end) noexcept;
  // The answer to a header section over the limit: 414 when the request line alone is.
  [[nodiscard]] status header_limit_status() const noexcept;
  // Reads the header section's bytes [from, to) on from where the last call stopped, up to the
  // empty line that ends it, for a line llhttp takes and other readers may not: one that begins
  // with SP or HTAB (obs-fold, taken for the previous line's continuation), or an empty line
  // that is a bare LF (the only bare LF strict llhttp takes for a line's end). Returns where the
  // first one begins (kept for later calls), or null.
  [[nodiscard]] const char* misread_line(const char* from, const char* to) noexcept;

  llhttp_t parser_;
  request_limits limits_;
  request request_;
  status error_ = status::bad_request;
  bool in_request_ = false;
  bool in_headers_ = false;
  bool failed_ = false;
  bool measure_headers_ = false;  // paused at the headers' end to count them exactly
  const char* chunk_end_ = nullptr;
  // Where this feed()'s part of the header section began (null: the message has not begun).
  const char* header_mark_ = nullptr;
  std::size_t header_bytes_ = 0;        // of the header section, in earlier feed() calls
  std::size_t request_line_bytes_ = 0;  // with its CRLF, once its version has been read
  bool request_line_read_ = false;
  // Where misread_line() stands in the header section: within a line, at the start of one (after
  // its LF), or past the start of the empty line that ends the section.
  enum class header_line : std::uint8_t { within, start, ended };
  header_line header_line_ = header_line::within;
  const char* misread_at_ = nullptr;  // what misread_line() found (the parser fails on it)
  std::uint64_t body_bytes_ = 0;
  std::uint64_t requests_begun_ = 0;
  std::size_t url_length_ = 0;
  char url_start_[2] = {};  // the first two characters of the request target (lower case)
  // The header being parsed, by the start of its name and value (either may come in pieces):
  // only Host (counted: HTTP/1.1 needs exactly one), Expect and Transfer-Encoding matter.
  enum class header : std::uint8_t { other, host, expect, transfer_encoding };
  header header_ = header::other;
  std::size_t name_length_ = 0;
  char name_start_[17] = {};  // lower case; "transfer-encoding" is the longest name that matters
  std::size_t value_length_ = 0;
  std::size_t value_significant_ = 0;  // the value's length without its trailing whitespace
  char value_start_[12] = {};          // lower case
  unsigned hosts_ = 0;
  unsigned transfer_encodings_ = 0;  // lines, counted from their names
  bool chunked_only_ = false;        // the (last) Transfer-Encoding is "chunked" alone
  bool expects_continue_ = false;    // the header section said "Expect: 100-continue"
  bool continue_expected_ = false;   // see continue_expected()
};

}  // namespace cyan::examples::http
