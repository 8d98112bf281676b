#include "cyan/net/detail/multishot_receive.h"

#include <liburing.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "cyan/net/detail/socket_core.h"

namespace cyan::net::detail {

// Room for the bound and a kernel batch past it: a steady-state read allocates nothing.
multishot_receive::multishot_receive(event::detail::ring& ring, event::detail::buffer_ring& buffers)
    : ring_(ring), buffers_(buffers) {
  pieces_.reserve(4 * kHoldBuffers);
}

multishot_receive::~multishot_receive() {
  for (std::size_t i = first_; i < pieces_.size(); ++i) {
    buffers_.give_back(pieces_[i].id);
  }
}

void multishot_receive::arm(int fd) {
  assert(!completion_pending() && "armed again before its last completion ran");
  io_uring_sqe* entry = ring_.prepare(*this);
  io_uring_prep_recv_multishot(entry, fd, nullptr, 0, 0);
  entry->flags |= IOSQE_BUFFER_SELECT;
  entry->buf_group = event::detail::buffer_ring::kGroup;
  received_ = false;
  cancelling_ = false;
  throttled_ = false;
  starved_ = false;
  state_.store(kArmed, std::memory_order_relaxed);  // the socket's thread, as orphan() is then
}

bool multishot_receive::orphan() noexcept {
  if (state_.exchange(kOrphaned, std::memory_order_acq_rel) == kArmed) {
    return true;  // its last completion frees it
  }
  pieces_.clear();  // forgotten: giving them back is the ring's thread's
  first_ = 0;
  delete this;
  return false;
}

std::size_t multishot_receive::take(std::span<std::byte> into) noexcept {
  std::size_t copied = 0;
  while (copied < into.size() && first_ < pieces_.size()) {
    piece& next = pieces_[first_];
    const std::size_t count =
        std::min<std::size_t>(next.length - next.consumed, into.size() - copied);
    const std::span<const std::byte> bytes = buffers_.data(next.id, next.length);
    std::memcpy(into.data() + copied, bytes.data() + next.consumed, count);
    copied += count;
    next.consumed += static_cast<std::uint32_t>(count);
    if (next.consumed == next.length) {
      buffers_.give_back(next.id);
      ++first_;
    }
  }
  if (first_ == pieces_.size()) {
    pieces_.clear();
    first_ = 0;
  }
  return copied;
}

std::optional<int> multishot_receive::take_end() noexcept {
  if (end_ == kNoEnd) {
    return std::nullopt;
  }
  const int end = end_;
  if (end < 0) {
    end_ = kNoEnd;  // an error is reported once; the stream's end stays
  }
  return end;
}

std::size_t multishot_receive::held_bytes() const noexcept {
  std::size_t bytes = 0;
  for (std::size_t i = first_; i < pieces_.size(); ++i) {
    bytes += pieces_[i].length - pieces_[i].consumed;
  }
  return bytes;
}

// One completion: hold its bytes, note how the receive ended (a completion without
// IORING_CQE_F_MORE is its last: in_flight() may already be false for an earlier one reaped in
// the same batch), bound the hold, then tell a waiting read, last: it may resume a task that
// destroys the socket, and this with it.
void multishot_receive::complete(int result, unsigned flags) noexcept {
  if (state_.load(std::memory_order_acquire) == kOrphaned) {
    complete_orphaned(result, flags);
    return;
  }
  if (result > 0) {
    buffers_.take();
    received_ = true;
    pieces_.push_back({ static_cast<std::uint16_t>(flags >> IORING_CQE_BUFFER_SHIFT),
                        static_cast<std::uint32_t>(result), 0 });
  }
  io_wait* const waiting = reader;
  if ((flags & IORING_CQE_F_MORE) != 0) {
    if (pieces_.size() - first_ >= kHoldBuffers) {
      cancel();
    }
  } else {
    ended(result);
    if (state_.exchange(kIdle, std::memory_order_acq_rel) == kOrphaned) {
      delete this;  // orphaned since the check above: freeing it is this thread's
      return;
    }
  }
  if (waiting != nullptr) {
    waiting->multishot_arrived();
  }
}

void multishot_receive::ended(int result) noexcept {
  throttled_ = cancelling_;
  cancelling_ = false;
  switch (-result) {
    case ENOBUFS:
      starved_ = true;
      break;
    case EINVAL:
      if (!received_) {
        refused_ = true;
        break;
      }
      end_ = result;
      break;
    case ECANCELED:
    case EAGAIN:
    case EINTR:
      break;  // ended without an outcome: the next read arms it again
    default:
      if (result <= 0) {
        end_ = result;  // end of stream, or an error
      }
      break;
  }
}

void multishot_receive::cancel() noexcept {
  if (cancelling_) {
    return;
  }
  cancelling_ = true;
  try {
    ring_.cancel(*this);
  } catch (const std::system_error&) {
    cancelling_ = false;  // not submitted: the hold grows until the next completion tries again
  }
}

void multishot_receive::complete_orphaned(int result, unsigned flags) noexcept {
  if (result > 0) {
    buffers_.take();
    buffers_.give_back(static_cast<std::uint16_t>(flags >> IORING_CQE_BUFFER_SHIFT));
  }
  if ((flags & IORING_CQE_F_MORE) == 0) {
    delete this;  // its last completion; its destructor gives the held buffers back
    return;
  }
  cancel();
}

}  // namespace cyan::net::detail
