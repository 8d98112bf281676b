#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace cyan::test {

/// A stress size or seed from the environment (CYAN_STRESS_ITEMS, CYAN_STRESS_SEED, ...):
/// `fallback` when `name` is unset or empty. Throws std::invalid_argument, naming the variable,
/// when the value is not a whole decimal number that fits 64 bits, so a typo never silently
/// runs a different test than the one asked for.
inline std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') {
    return fallback;
  }
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (*text == '-' || *end != '\0' || errno == ERANGE) {
    throw std::invalid_argument(std::string(name) + "=\"" + text +
                                "\" is not a non-negative decimal number");
  }
  return value;
}

}  // namespace cyan::test
