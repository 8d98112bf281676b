#include "http/responses.h"

#include <cstring>

namespace cyan::examples::http {

namespace {

struct status_text {
  std::string_view line;  // the status line with its CRLF
  std::string_view extra_headers;
  std::string_view body;  // of an error; a 200's is the page
};

constexpr std::array<status_text, kStatusCount> kStatuses{ {
    { "HTTP/1.1 200 OK\r\n", "", "" },
    { "HTTP/1.1 400 Bad Request\r\n", "", "400 Bad Request\n" },
    { "HTTP/1.1 404 Not Found\r\n", "", "404 Not Found\n" },
    { "HTTP/1.1 405 Method Not Allowed\r\n", "Allow: GET, HEAD\r\n", "405 Method Not Allowed\n" },
    { "HTTP/1.1 408 Request Timeout\r\n", "", "408 Request Timeout\n" },
    { "HTTP/1.1 413 Content Too Large\r\n", "", "413 Content Too Large\n" },
    { "HTTP/1.1 414 URI Too Long\r\n", "", "414 URI Too Long\n" },
    { "HTTP/1.1 431 Request Header Fields Too Large\r\n", "",
      "431 Request Header Fields Too Large\n" },
    { "HTTP/1.1 501 Not Implemented\r\n", "", "501 Not Implemented\n" },
    { "HTTP/1.1 503 Service Unavailable\r\n", "", "503 Service Unavailable\n" },
    { "HTTP/1.1 505 HTTP Version Not Supported\r\n", "", "505 HTTP Version Not Supported\n" },
} };

constexpr std::string_view kServer = "Server: cyan\r\n";
constexpr std::string_view kDatePrefix = "Date: ";
constexpr std::string_view kBlankLine = "\r\n";

std::string_view connection_line(connection_header connection) noexcept {
  switch (connection) {
    case connection_header::keep_alive:
      return "Connection: keep-alive\r\n";
    case connection_header::close:
      return "Connection: close\r\n";
    case connection_header::implied:
      break;
  }
  return "";
}

void two_digits(char* out, int value) noexcept {
  out[0] = static_cast<char>('0' + value / 10);
  out[1] = static_cast<char>('0' + value % 10);
}

}  // namespace

void format_imf_fixdate(std::time_t seconds, std::span<char, kImfFixdateLength> out) noexcept {
  static constexpr char kDays[] = "SunMonTueWedThuFriSat";
  static constexpr char kMonths[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
  std::tm t{};
  gmtime_r(&seconds, &t);
  char* p = out.data();
  std::memcpy(p, kDays + 3 * t.tm_wday, 3);
  std::memcpy(p + 3, ", ", 2);
  two_digits(p + 5, t.tm_mday);
  p[7] = ' ';
  std::memcpy(p + 8, kMonths + 3 * t.tm_mon, 3);
  p[11] = ' ';
  const int year = t.tm_year + 1900;
  two_digits(p + 12, year / 100 % 100);
  two_digits(p + 14, year % 100);
  p[16] = ' ';
  two_digits(p + 17, t.tm_hour);
  p[19] = ':';
  two_digits(p + 20, t.tm_min);
  p[22] = ':';
  two_digits(p + 23, t.tm_sec);
  std::memcpy(p + 25, " GMT", 4);
}

response_set::response_set(std::string_view page, std::string_view page_type) {
  for (std::size_t i = 0; i < kStatusCount; ++i) {
    const status_text& text = kStatuses[i];
    entry& e = entries_[i];
    e.body = i == index(status::ok) ? page : text.body;
    e.head.append(text.line).append(kServer).append(kDatePrefix);
    e.date_at = e.head.size();
    e.head.append(kImfFixdateLength, ' ').append("\r\nContent-Type: ");
    e.head.append(i == index(status::ok) ? page_type : "text/plain").append("\r\n");
    e.head.append(text.extra_headers)
        .append("Content-Length: ")
        .append(std::to_string(e.body.size()));
    e.head.append("\r\n");
    if (e.body.size() <= kInlineBodyLimit) {
      e.whole.append(e.head).append(kBlankLine).append(e.body);
    }
  }
  refresh(std::time(nullptr));
}

void response_set::refresh(std::time_t now) noexcept {
  if (now == second_) {
    return;
  }
  second_ = now;
  std::array<char, kImfFixdateLength> date;
  format_imf_fixdate(now, date);
  for (entry& e : entries_) {
    std::memcpy(e.head.data() + e.date_at, date.data(), date.size());
    if (!e.whole.empty()) {
      std::memcpy(e.whole.data() + e.date_at, date.data(), date.size());
    }
  }
}

void response_set::append_head(std::string& out, status s, connection_header connection) const {
  out.append(entries_[index(s)].head).append(connection_line(connection)).append(kBlankLine);
}

}  // namespace cyan::examples::http
