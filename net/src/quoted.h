#pragma once

// How the net module's error messages show a string a caller passed.

#include <string>
#include <string_view>

namespace cyan::net::detail {

/// `text` in double quotes with every byte visible: a NUL as `\0`, tab, newline and carriage
/// return as `\t`, `\n`, `\r`, a quote and a backslash as `\"` and `\\`, other control bytes as
/// `\xHH`. Printed raw, a NUL would cut the message short and a newline would forge a log line.
[[nodiscard]] std::string quoted(std::string_view text);

}  // namespace cyan::net::detail
