#pragma once

// What the net tests share: byte patterns and a temporary directory for Unix sockets. Every
// test talks to 127.0.0.1, ::1 or a Unix socket in a temporary directory.

#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace cyan::test {

/// Byte i of the pattern of `seed`: a sequence that a lost, repeated or reordered byte breaks.
[[nodiscard]] inline std::byte pattern_byte(std::uint32_t seed, std::size_t i) noexcept {
  const std::uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (std::uint64_t{ seed } << 32 | seed);
  return static_cast<std::byte>((x >> 29) ^ (x >> 7) ^ i);
}

/// `size` bytes of the pattern of `seed`, starting at byte `first`.
[[nodiscard]] inline std::vector<std::byte> pattern(std::uint32_t seed, std::size_t size,
                                                    std::size_t first = 0) {
  std::vector<std::byte> bytes(size);
  for (std::size_t i = 0; i < size; ++i) {
    bytes[i] = pattern_byte(seed, first + i);
  }
  return bytes;
}

/// The index of the first byte of `bytes` (byte `first` of the stream) that breaks the pattern,
/// or bytes.size().
[[nodiscard]] inline std::size_t first_mismatch(std::uint32_t seed, std::span<const std::byte> bytes,
                                                std::size_t first = 0) noexcept {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != pattern_byte(seed, first + i)) {
      return i;
    }
  }
  return bytes.size();
}

/// A fresh directory under $TMPDIR (or /tmp), removed with what is in it.
class temp_dir {
 public:
  temp_dir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/cyan-net-XXXXXX";
    path_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
};

}  // namespace cyan::test
