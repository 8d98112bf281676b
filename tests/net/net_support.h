#pragma once

// What the net tests share: byte patterns and a temporary directory for Unix sockets. Every
// test talks to 127.0.0.1, ::1 or a Unix socket in a temporary directory.

#include <stdlib.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "cyan/dispatch.h"

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
[[nodiscard]] inline std::size_t first_mismatch(std::uint32_t seed,
                                                std::span<const std::byte> bytes,
                                                std::size_t first = 0) noexcept {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != pattern_byte(seed, first + i)) {
      return i;
    }
  }
  return bytes.size();
}

/// Runs `body` (a callable returning a cyan::dispatch::task) on `h` and returns its result.
template <typename F>
auto run_on(cyan::dispatch::handler_thread& h, F body) {
  return cyan::dispatch::co_spawn(h, std::move(body)).get();
}

/// `co_await failure_of(s.read_some(buffer))`: awaits the operation and yields the error code
/// of the std::system_error it throws, or an empty code when it succeeds.
template <typename Awaitable>
cyan::dispatch::task<std::error_code> failure_of(Awaitable&& operation) {
  try {
    (void)co_await operation;  // as an lvalue: GCC 12 would copy an xvalue awaiter
  } catch (const std::system_error& e) {
    co_return e.code();
  }
  co_return std::error_code{};
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

// Sets `flag` when the coroutine frame that holds it is destroyed.
struct frame_sentinel {
  std::atomic<bool>* flag;
  ~frame_sentinel() { flag->store(true); }
};

}  // namespace cyan::test
