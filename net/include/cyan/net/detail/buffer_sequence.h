#pragma once

// The buffers of a gathering write: buffer() of a std::string gives a span of mutable bytes, of
// a std::string_view one of const bytes, and a caller's array or vector holds either kind.

#include <cstddef>
#include <span>

namespace cyan::net::detail {

/// A caller's contiguous sequence of byte spans, const or mutable, read in place as spans of
/// const bytes. The sequence is not copied (so a write that is still pending needs nothing from
/// a temporary): it must outlive the operation that reads it. A plain value.
class buffer_sequence {
 public:
  // Implicit: tcp_socket::write_all passes the caller's span on as it is.
  buffer_sequence(std::span<const std::span<const std::byte>> buffers) noexcept
      : constant_(buffers) {}
  buffer_sequence(std::span<const std::span<std::byte>> buffers) noexcept : mutable_(buffers) {}

  [[nodiscard]] std::size_t size() const noexcept { return constant_.size() + mutable_.size(); }
  [[nodiscard]] std::span<const std::byte> operator[](std::size_t i) const noexcept {
    return mutable_.empty() ? constant_[i] : mutable_[i];
  }

 private:
  // The caller's spans, in whichever of the two it has; the other is empty. Two views rather
  // than one reinterpreted: span<std::byte> and span<const std::byte> are distinct types.
  std::span<const std::span<const std::byte>> constant_;
  std::span<const std::span<std::byte>> mutable_;
};

}  // namespace cyan::net::detail
