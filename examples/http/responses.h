#pragma once

// The responses http_server sends, built once: each status's head (status line and headers)
// with its Date rewritten in place at most once a second, and its body. Answering a request
// is then a few appends to the connection's output buffer, with no formatting.

#include <array>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <span>
#include <string>
#include <string_view>

namespace cyan::examples::http {

/// Every status http_server answers with.
enum class status : std::uint8_t {
  ok,                          ///< 200
  bad_request,                 ///< 400, the connection closes
  not_found,                   ///< 404
  method_not_allowed,          ///< 405, with Allow: GET, HEAD
  request_timeout,             ///< 408, the connection closes
  payload_too_large,           ///< 413, the connection closes
  uri_too_long,                ///< 414, the connection closes (the request line is over the limit)
  header_fields_too_large,     ///< 431, the connection closes
  not_implemented,             ///< 501, the connection closes (a transfer coding but chunked)
  service_unavailable,         ///< 503, the connection closes (too many connections)
  http_version_not_supported,  ///< 505, the connection closes (not HTTP/1.0 or 1.1)
};
inline constexpr std::size_t kStatusCount = 11;

/// The Connection header a response carries.
enum class connection_header : std::uint8_t {
  implied,     ///< none: HTTP/1.1 keeps the connection by default
  keep_alive,  ///< "Connection: keep-alive", for an HTTP/1.0 client that asked for it
  close,       ///< "Connection: close": the server closes after this response
};

/// The IMF-fixdate (RFC 9110, 5.6.7) of `seconds` since the epoch, e.g.
/// "Sun, 06 Nov 1994 08:49:37 GMT": kImfFixdateLength characters.
inline constexpr std::size_t kImfFixdateLength = 29;
void format_imf_fixdate(std::time_t seconds, std::span<char, kImfFixdateLength> out) noexcept;

/// The responses of one handler thread (each thread keeps its own, so refreshing the Date needs
/// no synchronisation). [one thread]
class response_set {
 public:
  /// `page` is the body of a 200 response; it is not copied and must outlive the set.
  response_set(std::string_view page, std::string_view page_type);

  /// Rewrites every Date when `now` is a later second than the last call's.
  void refresh(std::time_t now) noexcept;

  /// Appends the head of `s` (with `connection`) and the blank line that ends it.
  void append_head(std::string& out, status s, connection_header connection) const;
  /// Appends the whole response, head and body, with an implied Connection: for a body of at
  /// most kInlineBodyLimit bytes (a larger one is written from where it is, see body()).
  void append_whole(std::string& out, status s) const { out.append(entries_[index(s)].whole); }

  [[nodiscard]] std::string_view body(status s) const noexcept { return entries_[index(s)].body; }

 private:
  struct entry {
    std::string head;   // up to the last header's CRLF, without the blank line
    std::string whole;  // head, blank line and body (empty for a large body)
    std::string_view body;
    std::size_t date_at = 0;  // where the Date value starts in head and whole
  };
  static constexpr std::size_t index(status s) noexcept { return static_cast<std::size_t>(s); }

  std::array<entry, kStatusCount> entries_;
  std::time_t second_ = -1;
};

/// A body larger than this is not copied into the output buffer: it is written from where it
/// is, gathered with the buffer in one writev.
inline constexpr std::size_t kInlineBodyLimit = 16 * 1024;

}  // namespace cyan::examples::http
