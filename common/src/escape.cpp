#include "cyan/common/detail/escape.h"

namespace cyan::detail {
namespace {

// The escape of `c` (without its backslash), or '\0' when it prints as itself or needs \xHH.
char short_escape(char c, bool escape_quotes) noexcept {
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
      return escape_quotes ? '"' : '\0';
    case '\\':
      return '\\';
    default:
      return '\0';
  }
}

}  // namespace

void append_escaped(std::string& out, std::string_view text, bool escape_quotes) {
  constexpr std::string_view kHex = "0123456789abcdef";
  out.reserve(out.size() + text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (const char escape = short_escape(c, escape_quotes); escape != '\0') {
      out += '\\';
      out += escape;
    } else if (byte < 0x20 || byte == 0x7f) {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else {
      out += c;
    }
  }
}

std::string quoted(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  append_escaped(out, text, true);
  out += '"';
  return out;
}

}  // namespace cyan::detail
