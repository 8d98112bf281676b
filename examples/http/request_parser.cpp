#include "http/request_parser.h"

#include <cctype>
#include <cstring>

namespace cyan::examples::http {

namespace {

// Adds a piece of a span that llhttp hands over in pieces: `start` keeps the span's first
// characters in lower case, `length` counts all of them.
template <std::size_t N>
void collect(char (&start)[N], std::size_t& length, const char* at, std::size_t size) noexcept {
  for (std::size_t i = 0; i < size && length + i < N; ++i) {
    start[length + i] = static_cast<char>(std::tolower(static_cast<unsigned char>(at[i])));
  }
  length += size;
}

// collect() for a header value: `significant` ends after its last character other than SP and
// HTAB (trailing whitespace is no part of a field value, RFC 9110 5.5).
template <std::size_t N>
void collect_value(char (&start)[N], std::size_t& length, std::size_t& significant, const char* at,
                   std::size_t size) noexcept {
  for (std::size_t i = 0; i < size; ++i) {
    if (at[i] != ' ' && at[i] != '\t') {
      significant = length + i + 1;
    }
  }
  collect(start, length, at, size);
}

// Whether a span collected whole is `expected` (in lower case).
template <std::size_t N>
bool is(const char (&start)[N], std::size_t length, std::string_view expected) noexcept {
  return length == expected.size() && length <= N && std::string_view(start, length) == expected;
}

// HTTP/1.0 or 1.1: the versions the server speaks (and answers in).
bool is_http_1(const llhttp_t* parser) noexcept {
  return parser->http_major == 1 && parser->http_minor <= 1;
}

}  // namespace

// Only the callbacks the server needs: Connection, Content-Length and Transfer-Encoding llhttp
// interprets itself (Transfer-Encoding is checked here too); of the other headers only Host and
// Expect matter.
const llhttp_settings_t request_parser::kSettings = [] {
  llhttp_settings_t settings;
  llhttp_settings_init(&settings);
  settings.on_message_begin = on_message_begin;
  settings.on_method = on_method;
  settings.on_url = on_url;
  settings.on_version = on_version;
  settings.on_version_complete = on_version_complete;
  settings.on_header_field = on_header_field;
  settings.on_header_field_complete = on_header_field_complete;
  settings.on_header_value = on_header_value;
  settings.on_header_value_complete = on_header_value_complete;
  settings.on_headers_complete = on_headers_complete;
  settings.on_body = on_body;
  settings.on_message_complete = on_message_complete;
  return settings;
}();

request_parser::request_parser(request_limits limits) noexcept : limits_(limits) {
  llhttp_init(&parser_, HTTP_REQUEST, &kSettings);
  parser_.data = this;
  // Strict, llhttp refuses a version other than 0.9, 1.0, 1.1 and 2.0 as malformed (400);
  // lenient, it takes any digit.digit and on_version_complete() answers 505 to all but 1.0 and
  // 1.1, as nginx does. (llhttp 8 has the flag but not yet llhttp_set_lenient_version().)
  parser_.lenient_flags |= LENIENT_VERSION;
}

// How a feed() goes:
//   1. execute     llhttp parses, calling back, until the input ends or a callback pauses it
//                  (each request's end does, so feed() returns one request at a time);
//   2. measure     paused at the end of a header section that may be too large: count it
//                  exactly, then parse on (1) if it is within the limit;
//   3. account     the input ended within a header section: look for misread lines in its
//                  part of it, and count it.
parse_event request_parser::feed(std::string_view& input) noexcept {
  if (failed_) {
    return parse_event::error;
  }
  chunk_end_ = input.data() + input.size();
  header_mark_ = in_headers_ ? input.data() : nullptr;
  for (;;) {
    const llhttp_errno_t result = llhttp_execute(&parser_, input.data(), input.size());
    if (result == HPE_OK) {
      input.remove_prefix(input.size());
      if (in_headers_) {
        if (const std::optional<status> refusal = check_header_bytes(chunk_end_)) {
          return fail(*refusal);
        }
      }
      return parse_event::need_more;
    }
    if (result != HPE_PAUSED) {
      // A header section that passed its limit (or had a misread line) before the bad byte did
      // so first, however the stream was cut into reads (the checks run at the end of each).
      if (in_headers_) {
        if (const std::optional<status> refusal =
                check_header_bytes(llhttp_get_error_pos(&parser_))) {
          return fail(*refusal);
        }
      }
      // llhttp refuses some Transfer-Encodings itself, as it reads them ("chunked, identity",
      // a second "chunked"): the answer is the same as when it takes them.
      return fail(result == HPE_INVALID_TRANSFER_ENCODING
                      ? transfer_encoding_refusal().value_or(status::not_implemented)
                      : error_);
    }
    const char* stop = llhttp_get_error_pos(&parser_);
    input.remove_prefix(static_cast<std::size_t>(stop - input.data()));
    llhttp_resume(&parser_);
    if (!measure_headers_) {
      return parse_event::request;
    }
    measure_headers_ = false;
    if (const std::optional<status> refusal = check_header_bytes(stop)) {
      return fail(*refusal);
    }
    in_headers_ = false;
  }
}

std::optional<status> request_parser::check_header_bytes(const char* end) noexcept {
  if (header_mark_ != nullptr) {
    if (const char* misread = misread_line(header_mark_, end)) {
      return count_header_bytes(misread) ? status::bad_request : header_limit_status();
    }
  }
  if (!count_header_bytes(end)) {
    return header_limit_status();
  }
  return std::nullopt;
}

bool request_parser::count_header_bytes(const char* end) noexcept {
  if (header_mark_ != nullptr) {
    header_bytes_ += static_cast<std::size_t>(end - header_mark_);
  }
  header_mark_ = nullptr;
  return header_bytes_ <= limits_.max_header_bytes;
}

// As nginx: a request line it cannot hold is a URI too long, the rest of the header section
// its headers too large.
status request_parser::header_limit_status() const noexcept {
  return !request_line_read_ || request_line_bytes_ > limits_.max_header_bytes
             ? status::uri_too_long
             : status::header_fields_too_large;
}

const char* request_parser::misread_line(const char* from, const char* to) noexcept {
  while (misread_at_ == nullptr && header_line_ != header_line::ended && from < to) {
    if (header_line_ == header_line::start) {
      if (*from == ' ' || *from == '\t' || *from == '\n') {
        misread_at_ = from;
        break;
      }
      if (*from == '\r') {  // strict llhttp: the empty line's CRLF, nothing else
        header_line_ = header_line::ended;
        break;
      }
    }
    const void* line_feed = std::memchr(from, '\n', static_cast<std::size_t>(to - from));
    if (line_feed == nullptr) {
      header_line_ = header_line::within;
      break;
    }
    from = static_cast<const char*>(line_feed) + 1;
    header_line_ = header_line::start;
  }
  return misread_at_;
}

// In nginx's order: a second line, or one in an HTTP/1.0 request (RFC 9112, 6.1: faulty
// framing), is 400; then a coding other than "chunked" alone is one the server does not
// implement (501; and so no two readers differ on which coding frames the body).
std::optional<status> request_parser::transfer_encoding_refusal() const noexcept {
  if (transfer_encodings_ == 0) {
    return std::nullopt;
  }
  if (transfer_encodings_ > 1 || parser_.http_minor == 0) {
    return status::bad_request;
  }
  if (!chunked_only_) {
    return status::not_implemented;
  }
  return std::nullopt;
}

parse_event request_parser::fail(status why) noexcept {
  error_ = why;
  failed_ = true;
  return parse_event::error;
}

int request_parser::on_message_begin(llhttp_t* parser) noexcept {
  request_parser& self = of(parser);
  self.in_request_ = true;
  ++self.requests_begun_;
  self.in_headers_ = true;
  self.header_bytes_ = 0;
  self.header_mark_ = nullptr;
  self.header_line_ = header_line::within;
  self.misread_at_ = nullptr;
  self.request_line_bytes_ = 0;
  self.request_line_read_ = false;
  self.body_bytes_ = 0;
  self.url_length_ = 0;
  self.header_ = header::other;
  self.name_length_ = 0;
  self.hosts_ = 0;
  self.transfer_encodings_ = 0;
  self.chunked_only_ = false;
  self.expects_continue_ = false;
  self.continue_expected_ = false;
  return HPE_OK;
}

int request_parser::on_method(llhttp_t* parser, const char* at, std::size_t) noexcept {
  request_parser& self = of(parser);
  if (self.header_mark_ == nullptr) {
    self.header_mark_ = at;  // the message's first byte
  }
  return HPE_OK;
}

int request_parser::on_url(llhttp_t* parser, const char* at, std::size_t length) noexcept {
  request_parser& self = of(parser);
  collect(self.url_start_, self.url_length_, at, length);
  return HPE_OK;
}

// The version ends the request line but for its CRLF (strict llhttp: nothing else).
int request_parser::on_version(llhttp_t* parser, const char* at, std::size_t length) noexcept {
  request_parser& self = of(parser);
  self.request_line_bytes_ =
      self.header_bytes_ + static_cast<std::size_t>(at + length - self.header_mark_) + 2;
  return HPE_OK;
}

int request_parser::on_version_complete(llhttp_t* parser) noexcept {
  of(parser).request_line_read_ = true;
  if (!is_http_1(parser)) {
    of(parser).error_ = status::http_version_not_supported;
    return -1;
  }
  return HPE_OK;
}

int request_parser::on_header_field(llhttp_t* parser, const char* at, std::size_t length) noexcept {
  request_parser& self = of(parser);
  collect(self.name_start_, self.name_length_, at, length);
  return HPE_OK;
}

int request_parser::on_header_field_complete(llhttp_t* parser) noexcept {
  request_parser& self = of(parser);
  if (self.name_length_ == 0) {  // a name is a token (RFC 9110, 5.1); llhttp takes ": x"
    self.error_ = status::bad_request;
    return -1;
  }
  const auto named = [&self](std::string_view name) {
    return is(self.name_start_, self.name_length_, name);
  };
  self.header_ = named("host")                ? header::host
                 : named("expect")            ? header::expect
                 : named("transfer-encoding") ? header::transfer_encoding
                                              : header::other;
  if (self.header_ == header::transfer_encoding) {
    ++self.transfer_encodings_;  // by now: llhttp may refuse the value before it ends
  }
  self.name_length_ = 0;
  self.value_length_ = 0;
  self.value_significant_ = 0;
  return HPE_OK;
}

int request_parser::on_header_value(llhttp_t* parser, const char* at, std::size_t length) noexcept {
  request_parser& self = of(parser);
  if (self.header_ == header::expect || self.header_ == header::transfer_encoding) {
    collect_value(self.value_start_, self.value_length_, self.value_significant_, at, length);
  }
  return HPE_OK;
}

int request_parser::on_header_value_complete(llhttp_t* parser) noexcept {
  request_parser& self = of(parser);
  const auto valued = [&self](std::string_view value) {
    return is(self.value_start_, self.value_significant_, value);
  };
  if (self.header_ == header::host) {
    ++self.hosts_;
  } else if (self.header_ == header::expect) {
    self.expects_continue_ = valued("100-continue");
  } else if (self.header_ == header::transfer_encoding) {
    self.chunked_only_ = valued("chunked");
  }
  self.header_ = header::other;
  return HPE_OK;
}

// The header section is certainly within the limit when even all the bytes up to the end of
// this feed() would be; otherwise pause there, so feed() counts up to the exact position.
int request_parser::on_headers_complete(llhttp_t* parser) noexcept {
  request_parser& self = of(parser);
  const char* from = self.header_mark_ != nullptr ? self.header_mark_ : self.chunk_end_;
  const std::size_t most = self.header_bytes_ + static_cast<std::size_t>(self.chunk_end_ - from);
  // Obs-fold is refused (RFC 9112 5.2, as nginx), not joined to the line before; a bare LF for
  // the empty line too (nginx takes it), as every other bare LF. (400, or the limit if it came
  // first: feed() decides by where the line is.)
  if (self.misread_line(from, self.chunk_end_) != nullptr) {
    return -1;
  }
  // HTTP/0.9's request line names no version, so on_version_complete() has not seen it.
  if (!is_http_1(parser)) {
    self.error_ = status::http_version_not_supported;
    return -1;
  }
  if (const std::optional<status> refusal = self.transfer_encoding_refusal()) {
    self.error_ = *refusal;
    return -1;
  }
  if ((parser->flags & F_CONTENT_LENGTH) != 0 &&
      parser->content_length > self.limits_.max_body_bytes) {
    self.error_ = status::payload_too_large;
    return -1;
  }
  // HTTP/1.1 requires exactly one Host (RFC 9112, 3.2); an HTTP/1.0 request may have none.
  const bool http_1_1 = parser->http_major == 1 && parser->http_minor == 1;
  if (self.hosts_ > 1 || (self.hosts_ == 0 && http_1_1)) {
    self.error_ = status::bad_request;
    return -1;
  }
  // "100 Continue" only for a body still to come, and never to a 1.0 client (RFC 9110, 15.2).
  const bool body_follows = (parser->flags & F_CHUNKED) != 0 ||
                            ((parser->flags & F_CONTENT_LENGTH) != 0 && parser->content_length > 0);
  self.continue_expected_ = self.expects_continue_ && http_1_1 && body_follows;
  if (most > self.limits_.max_header_bytes) {
    self.measure_headers_ = true;
    return HPE_PAUSED;
  }
  self.in_headers_ = false;
  return HPE_OK;
}

int request_parser::on_body(llhttp_t* parser, const char*, std::size_t length) noexcept {
  request_parser& self = of(parser);
  self.continue_expected_ = false;  // the client sends the body without waiting
  self.body_bytes_ += length;
  if (self.body_bytes_ > self.limits_.max_body_bytes) {  // chunked: no length known in advance
    self.error_ = status::payload_too_large;
    return -1;
  }
  return HPE_OK;
}

int request_parser::on_message_complete(llhttp_t* parser) noexcept {
  request_parser& self = of(parser);
  const std::uint8_t method = llhttp_get_method(parser);
  request& r = self.request_;
  r.method = method == HTTP_GET    ? request::verb::get
             : method == HTTP_HEAD ? request::verb::head
                                   : request::verb::other;
  r.root = self.url_length_ >= 1 && self.url_start_[0] == '/' &&
           (self.url_length_ == 1 || self.url_start_[1] == '?');
  // An upgrade (or CONNECT) would switch protocols after this request: the server closes instead.
  r.keep_alive = llhttp_should_keep_alive(parser) != 0 && llhttp_get_upgrade(parser) == 0;
  r.http_1_0 = parser->http_major == 1 && parser->http_minor == 0;
  self.in_request_ = false;
  self.continue_expected_ = false;
  return HPE_PAUSED;  // feed() returns this request before parsing the next
}

}  // namespace cyan::examples::http
