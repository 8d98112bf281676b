// socket_core's side of reads on io_uring: the bytes a socket holds (its multishot receive's,
// or those adopted with it) and the choice between a single-shot and the multishot receive
// (see the top of net/detail/socket_core.h).

#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <system_error>

#include "cyan/net/detail/socket_core.h"

namespace cyan::net::detail {

std::size_t socket_core::take_held(std::span<std::byte> into) noexcept {
  std::size_t copied = 0;
  if (carried_offset_ < carried_.size()) {
    copied = std::min(into.size(), carried_.size() - carried_offset_);
    std::memcpy(into.data(), carried_.data() + carried_offset_, copied);
    carried_offset_ += copied;
    if (carried_offset_ == carried_.size()) {
      carried_ = {};
      carried_offset_ = 0;
    }
  }
  if (multishot_ && copied < into.size()) {
    copied += multishot_->take(into.subspan(copied));
  }
  return copied;
}

std::vector<std::byte> socket_core::take_all_held() {
  if (multishot_ && ring_ != nullptr) {
    ring_->cancel_and_complete(*multishot_);  // what is still on its way is held too
  }
  std::vector<std::byte> bytes(carried_.begin() + static_cast<std::ptrdiff_t>(carried_offset_),
                               carried_.end());
  if (multishot_) {
    const std::size_t first = bytes.size();
    bytes.resize(first + multishot_->held_bytes());
    (void)multishot_->take(std::span(bytes).subspan(first));
  }
  carried_ = {};
  carried_offset_ = 0;
  return bytes;
}

socket_core::ring_read socket_core::plan_ring_read() noexcept {
  if (!multishot_ && !multishot_refused_) {
    make_multishot();  // at the first read, so that switching later allocates nothing
  }
  if (multishot_ && multishot_->completion_pending()) {
    // Armed, or ending (its last completion may be reaped and not run yet: arming it again
    // now would have that one, an error maybe, taken for the new receive's): its completions
    // come before any other.
    return ring_read::multishot;
  }
  if (multishot_ && multishot_->throttled()) {
    use_multishot_ = false;  // it receives faster than it reads: bulk, read into the span
    ring_reads_waited_ = 0;
  }
  if (!use_multishot_ || multishot_refused_) {
    return ring_read::single_shot;
  }
  if (multishot_ && multishot_->starved()) {
    multishot_->clear_starved();  // this read goes without it; the next one that waits arms it
    return ring_read::single_shot;
  }
  return arm_multishot() ? ring_read::multishot : ring_read::single_shot;
}

void socket_core::ring_read_completed(bool waited) noexcept {
  if (!waited) {
    ring_reads_waited_ = 0;
  } else if (++ring_reads_waited_ >= 2) {
    use_multishot_ = true;
  }
}

bool socket_core::keep_waiting_for_multishot() noexcept {
  if (multishot_->completion_pending()) {
    return true;  // as in plan_ring_read()
  }
  if (multishot_->throttled()) {
    use_multishot_ = false;  // as in plan_ring_read()
    ring_reads_waited_ = 0;
  } else if (!multishot_->starved() && !multishot_->refused() && arm_multishot()) {
    return true;
  }
  multishot_refused_ = multishot_refused_ || multishot_->refused();
  multishot_->clear_starved();
  multishot_->reader = nullptr;
  return false;
}

// The thread's provided buffers (set up by its first stream socket's first read) and the
// socket's receive, not armed; without buffers the socket keeps single-shot receives.
void socket_core::make_multishot() noexcept {
  event::detail::buffer_ring* buffers = ring_->provided_buffers();
  if (buffers == nullptr) {
    multishot_refused_ = true;
    return;
  }
  try {
    multishot_ = std::make_unique<multishot_receive>(*ring_, *buffers);
  } catch (const std::bad_alloc&) {
    // Single-shot receives until a later read makes it.
  }
}

// Arms the multishot receive when the thread's buffer ring has a buffer to give.
bool socket_core::arm_multishot() noexcept {
  if (!multishot_ || multishot_->refused()) {
    multishot_refused_ = multishot_refused_ || (multishot_ && multishot_->refused());
    return false;
  }
  if (ring_->provided_buffers()->available() == 0) {
    return false;
  }
  try {
    multishot_->arm(fd_);
  } catch (const std::system_error&) {
    return false;  // the ring refused the entry: a single-shot read
  }
  return true;
}

// On the ring's thread: cancelled, its last completions run (they hold buffers) and the held
// buffers given back. Elsewhere (a socket destroyed on another thread) it cannot be touched:
// shutdown() makes it complete with end of stream, and its ring's thread frees it then.
void socket_core::end_multishot() noexcept {
  if (!multishot_) {
    return;
  }
  if (event::detail::ring::this_thread_if_set_up() == ring_) {
    multishot_->reader = nullptr;
    ring_->cancel_and_complete(*multishot_);
    multishot_.reset();
    return;
  }
  if (multishot_.release()->orphan()) {
    ::shutdown(fd_, SHUT_RDWR);  // its last completion: end of stream
  }
}

void socket_core::check_direction_free(event::io_events direction) const {
  const bool read = direction == event::io_events::read;
  if ((read ? reader_ : writer_) != nullptr) {
    throw std::logic_error(read ? "cyan::net: a second read (or accept) while one is pending"
                                : "cyan::net: a second write (or connect) while one is pending");
  }
}

void socket_core::wait(io_wait& op, event::io_events direction) noexcept {
  (direction == event::io_events::read ? reader_ : writer_) = &op;
  update_watcher();
}

void socket_core::unwait(io_wait& op) noexcept {
  if (reader_ == &op) {
    reader_ = nullptr;
    if (multishot_ && multishot_->reader == &op) {
      multishot_->reader = nullptr;
    }
  } else if (writer_ == &op) {
    writer_ = nullptr;
  } else {
    return;
  }
  update_watcher();
}

// The watcher runs only while someone waits, for the directions they wait in.
void socket_core::update_watcher() noexcept {
  if (!watcher_) {
    return;  // the io_uring backend: nothing to watch
  }
  const event::io_events wanted = (reader_ != nullptr ? event::io::read : event::io_events::none) |
                                  (writer_ != nullptr ? event::io::write : event::io_events::none);
  if (wanted == event::io_events::none) {
    watcher_->stop();
    return;
  }
  if (watcher_->interest() != wanted) {
    watcher_->set_events(wanted);  // restarts an active watcher; never throws for these bits
  }
  watcher_->start();
}

// Resuming a waiter may end the socket: its task may destroy it, or finish something that
// another thread then destroys it after. So nothing of the core is touched after the last
// resumption; only when both directions are ready does destroyed_ tell whether the writer
// is still there.
void socket_core::on_ready(event::io_events ready) noexcept {
  io_wait* const reader = event::has(ready, event::io::read) ? reader_ : nullptr;
  io_wait* const writer = event::has(ready, event::io::write) ? writer_ : nullptr;
  if (reader == nullptr || writer == nullptr) {
    if (reader != nullptr) {
      reader->ready();
    } else if (writer != nullptr) {
      writer->ready();
    }
    return;
  }
  bool destroyed = false;
  destroyed_ = &destroyed;
  reader->ready();
  if (destroyed) {
    return;
  }
  destroyed_ = nullptr;
  if (writer_ == writer) {
    writer->ready();
  }
}

}  // namespace cyan::net::detail
