#include "quoted.h"

namespace cyan::net::detail {
namespace {

// The escape of `c` (without its backslash), or '\0' when it prints as itself or needs \xHH.
char short_escape(char c) noexcept {
  switch (c) {
    case '\0':
      return '0';
    case '\t':
      return 't';
    case '\n':
      return 'n';
    case '\r':
      return 'r';
    case '"':
      return '"';
    case '\\':
      return '\\';
    default:
      return '\0';
  }
}

}  // namespace

std::string quoted(std::string_view text) {
  constexpr std::string_view kHex = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (const char escape = short_escape(c); escape != '\0') {
      out += '\\';
      out += escape;
    } else if (byte < 0x20 || byte == 0x7f) {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else {
      out += c;  // bytes from 0x80 up too: they are UTF-8 more often than not
    }
  }
  out += '"';
  return out;
}

}  // namespace cyan::net::detail
