#pragma once

// How cyan shows text it did not write (a caller's host name, an exception's what()) in a
// message: every byte visible, so that a NUL cannot cut the message short and a newline cannot
// forge a log line.

#include <string>
#include <string_view>

namespace cyan::detail {

/// Appends `text` to `out` with a NUL as `\0`, tab, newline and carriage return as `\t`, `\n`,
/// `\r`, a backslash as `\\` (and a double quote as `\"` when `escape_quotes`), other control
/// bytes as `\xHH`; every other byte as itself (bytes from 0x80 up are UTF-8 more often than
/// not). Throws std::bad_alloc.
void append_escaped(std::string& out, std::string_view text, bool escape_quotes);

/// `text` in double quotes, escaped as above (quotes included).
[[nodiscard]] std::string quoted(std::string_view text);

}  // namespace cyan::detail
