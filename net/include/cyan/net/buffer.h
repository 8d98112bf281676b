#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace cyan::net {

/// The bytes of `text`, for write_some / write_all / send_to. The view must outlive the write.
[[nodiscard]] inline std::span<const std::byte> buffer(std::string_view text) noexcept {
  return std::as_bytes(std::span(text.data(), text.size()));
}

/// The bytes of `text`, to read into (its current size), e.g. after `text.resize(n)`.
[[nodiscard]] inline std::span<std::byte> buffer(std::string& text) noexcept {
  return std::as_writable_bytes(std::span(text.data(), text.size()));
}

/// `size` bytes at `data`.
[[nodiscard]] inline std::span<const std::byte> buffer(const void* data,
                                                       std::size_t size) noexcept {
  return { static_cast<const std::byte*>(data), size };
}
[[nodiscard]] inline std::span<std::byte> buffer(void* data, std::size_t size) noexcept {
  return { static_cast<std::byte*>(data), size };
}

/// The text of a received byte range (e.g. the first n bytes of a read buffer).
[[nodiscard]] inline std::string_view as_string_view(std::span<const std::byte> bytes) noexcept {
  return { reinterpret_cast<const char*>(bytes.data()), bytes.size() };
}

}  // namespace cyan::net
