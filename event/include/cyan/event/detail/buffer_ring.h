#pragma once

// A thread's provided buffer ring (io_uring's IORING_REGISTER_PBUF_RING): a pool of equal
// buffers that the kernel picks from for a receive queued with IOSQE_BUFFER_SELECT, telling in
// the completion which one it filled. Owned by the thread's ring (ring::provided_buffers(), set
// up on first use) and released with it; net/'s multishot receive is its user.
//
// Buffers leave the pool when a completion names them (take()) and go back with give_back(),
// which writes them into the shared ring; the kernel sees the returns only when publish()
// advances the ring's tail, which the ring does before each time it enters the kernel, so
// returns are published in batches (one store per drain, not per buffer).
//
// liburing 2.3 (Debian 12) has no io_uring_setup_buf_ring(): the ring is mapped and registered
// by hand.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "cyan/common/noncopyable.h"

struct io_uring;
struct io_uring_buf_ring;

namespace cyan::event::detail {

/// A provided buffer ring (see the top of this file). Every member is the ring's thread's.
class buffer_ring : noncopyable {
 public:
  /// 256 buffers of 16 KiB (4 MiB of address space per thread, touched only as it is used):
  /// a 16 KiB buffer takes a whole 4-16 KiB message in one completion, and 256 of them keep
  /// a hundred request/response connections of one thread fed while each holds a buffer or
  /// two; the count is a power of two, as the kernel requires.
  static constexpr unsigned kCount = 256;
  static constexpr std::size_t kSize = 16384;
  /// The buffer group a receive names in its entry (sqe->buf_group).
  static constexpr std::uint16_t kGroup = 0;

  /// Maps and registers a buffer ring with `ring`, every buffer in it; null when the kernel
  /// refuses (before 5.19) or memory is short.
  [[nodiscard]] static std::unique_ptr<buffer_ring> set_up(io_uring& ring) noexcept;
  ~buffer_ring();

  /// The first `length` bytes of buffer `id`.
  [[nodiscard]] std::span<const std::byte> data(std::uint16_t id,
                                                std::size_t length) const noexcept {
    return { memory_ + std::size_t{ id } * kSize, length };
  }
  /// A completion handed buffer `id` out of the pool.
  void take() noexcept { ++taken_; }
  /// Gives buffer `id` back to the pool (visible to the kernel at the next publish()).
  void give_back(std::uint16_t id) noexcept;
  /// Makes the buffers given back since the last call visible to the kernel.
  void publish() noexcept;
  /// Buffers in the pool, as far as the completions reaped tell.
  [[nodiscard]] unsigned available() const noexcept { return kCount - taken_; }

 private:
  buffer_ring(io_uring_buf_ring* shared, std::byte* memory) noexcept
      : shared_(shared), memory_(memory) {}

  io_uring_buf_ring* shared_;  // the ring of buffer addresses the kernel reads
  std::byte* memory_;          // kCount buffers of kSize bytes
  unsigned taken_ = 0;         // buffers handed out by completions, not given back yet
  unsigned returned_ = 0;      // buffers given back since the last publish()
};

}  // namespace cyan::event::detail
