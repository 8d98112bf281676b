// endpoint::parse against any text. What must hold: it either throws std::invalid_argument
// (anything else escaping is a finding) or gives an endpoint whose to_string() parses back to
// an equal endpoint with the same text.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "cyan/net/endpoint.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  cyan::net::endpoint parsed;
  try {
    parsed = cyan::net::endpoint::parse(text);
  } catch (const std::invalid_argument&) {
    return 0;
  }
  const std::string shown = parsed.to_string();
  const cyan::net::endpoint again = cyan::net::endpoint::parse(shown);
  CYAN_FUZZ_CHECK(again == parsed);
  CYAN_FUZZ_CHECK(again.to_string() == shown);
  CYAN_FUZZ_CHECK(again.port() == parsed.port());
  return 0;
}
