#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "cyan/dispatch/detail/bounded_ring.h"
#include "cyan/dispatch/detail/schedule_awaiter.h"
#include "cyan/dispatch/detail/wait_list.h"
#include "cyan/dispatch/errors.h"
#include "cyan/lockfree/segmented_queue.h"

namespace cyan::dispatch {

/// A queue of T between coroutines (and threads): any number of senders and receivers, on any
/// executors — handler threads, thread_pool workers, plain threads through the try_ forms.
///
/// `channel<T> ch{ capacity }` buffers up to `capacity` items (at least 1);
/// `channel<T> ch{ channel<T>::unbounded }` buffers any number. send() suspends the task while
/// the buffer is full; receive() suspends it while the buffer is empty. Items leave in the
/// order they were sent (each sender's items reach the receivers in the order it sent them).
///
/// close() ends the channel for senders: later sends throw channel_closed (try_send returns
/// false), tasks waiting to send resume with channel_closed (their items are not sent), and
/// receivers still get every item sent before, then std::nullopt.
///
/// Waiting: a waiting task resumes on its home (see task), in arrival order among the waiters
/// of its kind; an item is handed straight to the first waiting receiver, and the first waiting
/// sender's item moves into the buffer as soon as there is room. A stop request resumes a
/// waiting task at once with std::system_error(operation_canceled). A hand-off and a stop
/// request racing for one waiter are decided so that nothing is lost: a cancelled receive never
/// consumed an item (it stays for the others), a cancelled send never enqueued its item; a
/// waiter that got there first returns normally. Destroying a waiting task withdraws it (a
/// receiver destroyed after an item was handed to it — its task discarded — puts the item back
/// at the front of the channel, ahead of the items sent after it, so the order holds). In
/// when_any(), a receive that loses gives its item back to the front the same way, and a send
/// that loses after its item went in leaves it sent (see when_any).
///
/// Cost: try_send and try_receive on a channel that is neither full nor empty (and a send or
/// receive that need not wait) take no lock and make no system call: one CAS on the buffer's
/// tail or head, and loads to see whether anyone waits and whether items came back. Waking a waiter
/// takes a short spin lock and one post to the waiter's home. Memory: a bounded channel allocates
/// its buffer once, at construction; an unbounded one allocates a block of 255 items per 255 sends
/// at most (freed blocks are kept for reuse); waiting allocates nothing (the waiter lives in the
/// awaiting frame).
///
/// T must be nothrow move-constructible and nothrow destructible. Every member may be called
/// from any thread; the channel must outlive its waiters, and no task may be waiting on it when
/// it is destroyed (the items still in it are destroyed with it).
template <typename T>
class channel {
  static_assert(std::is_nothrow_move_constructible_v<T> && std::is_nothrow_destructible_v<T>,
                "cyan::dispatch::channel: T must move and be destroyed without throwing");

 public:
  using value_type = T;

  /// The capacity of a channel without a bound.
  static constexpr std::size_t unbounded = std::numeric_limits<std::size_t>::max();

  /// A channel that buffers up to `capacity` items (unbounded: any number). Throws
  /// std::invalid_argument for a capacity of 0 (a rendezvous channel is not offered: use 1),
  /// std::bad_alloc.
  explicit channel(std::size_t capacity) : capacity_(checked(capacity)) {
    if (capacity_ == unbounded) {
      queue_ = std::make_unique<lockfree::segmented_queue<holder>>();
    } else {
      ring_ = std::make_unique<detail::bounded_ring<T>>(capacity_);
    }
  }
  channel(const channel&) = delete;
  channel& operator=(const channel&) = delete;

  /// `co_await ch.send(value)` puts `value` in the channel, suspending while it is full.
  /// Throws channel_closed when the channel is closed (before or during the wait),
  /// std::system_error(operation_canceled) on a stop request (before or during the wait;
  /// the item is then not sent), std::bad_alloc (unbounded).
  [[nodiscard]] auto send(T value) noexcept(std::is_nothrow_move_constructible_v<T>) {
    return send_awaiter(*this, std::move(value));
  }

  /// Puts `value` in the channel if there is room and it is open (true); otherwise returns
  /// false and leaves `value` as it was. Never waits. Throws std::bad_alloc (unbounded).
  [[nodiscard]] bool try_send(T&& value) {
    if (hand_off(value)) {
      return true;
    }
    if (push(value) != detail::ring_result::done) {
      return false;
    }
    after_push();
    return true;
  }

  /// `co_await ch.receive()` yields the next item, suspending while the channel is empty;
  /// std::nullopt once it is closed and every item sent was received. Throws
  /// std::system_error(operation_canceled) on a stop request (before or during the wait; no
  /// item is then taken).
  [[nodiscard]] auto receive() noexcept { return receive_awaiter(*this); }

  /// The next item if there is one; std::nullopt when the channel is empty (or closed and
  /// drained). Never waits.
  [[nodiscard]] std::optional<T> try_receive() noexcept {
    std::optional<T> item;
    if (pop(item) == detail::ring_result::done) {
      after_pop();
    }
    return item;
  }

  /// Closes the channel for senders (see the class comment); items sent before are still
  /// received. Later calls do nothing.
  void close() noexcept {
    if (ring_) {
      ring_->close();
    } else {
      queue_->seal();
    }
    {
      detail::granted_chain woken;  // woken when it goes, after the lock
      std::lock_guard guard(senders_.lock());
      while (detail::sync_wait* waiter = senders_.grant_front()) {
        static_cast<send_awaiter*>(waiter)->closed_ = true;
        woken.add(*waiter);
      }
      senders_waiting_.store(false, std::memory_order_relaxed);
    }
    serve_receivers();
  }

  /// Whether close() was called.
  [[nodiscard]] bool is_closed() const noexcept {
    return ring_ ? ring_->closed() : queue_->sealed();
  }

  /// The capacity it was made with (unbounded for an unbounded channel).
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }

 private:
  // An element of the unbounded queue (which wants nothrow move assignment of its elements).
  // The one a push hands the queue refers to the sender's value and moves from it only when the
  // queue takes it (a refused or failed push leaves the holder, and so the value, untouched).
  struct holder {
    std::optional<T> value;
    T* source = nullptr;
    holder() noexcept = default;
    explicit holder(T& from) noexcept : source(&from) {}
    holder(holder&& other) noexcept { take(other); }
    holder& operator=(holder&& other) noexcept {
      value.reset();
      take(other);
      return *this;
    }

   private:
    void take(holder& other) noexcept {
      if (other.source != nullptr) {
        value.emplace(std::move(*other.source));
      } else if (other.value) {
        value.emplace(std::move(*other.value));
      }
    }
  };

  class send_awaiter : public detail::sync_wait {
   public:
    send_awaiter(channel& ch, T&& value) noexcept
        : sync_wait(ch.senders_, &give_back), channel_(ch), value_(std::move(value)) {}
    send_awaiter(send_awaiter&&) noexcept = default;  // before it is awaited only
    ~send_awaiter() { withdraw(); }

    [[nodiscard]] bool await_ready() {
      if (channel_.hand_off(value_)) {
        return true;
      }
      switch (channel_.push(value_)) {
        case detail::ring_result::done:
          channel_.after_push();
          return true;
        case detail::ring_result::closed:
          closed_ = true;
          return true;
        default:
          return false;
      }
    }
    template <typename Promise>
    bool await_suspend(std::coroutine_handle<Promise> suspended) {
      return suspend(suspended, [this] {
        // Announce the waiter before trying again: a receive after this sees it.
        channel_.senders_waiting_.store(true, std::memory_order_seq_cst);
        switch (channel_.push(value_)) {
          case detail::ring_result::done:
            pushed_ = true;
            break;
          case detail::ring_result::closed:
            closed_ = true;
            break;
          default:
            return attempt::wait;
        }
        if (channel_.senders_.empty()) {
          channel_.senders_waiting_.store(false, std::memory_order_relaxed);
        }
        return attempt::done;
      });
    }
    void await_resume() {
      const bool cancelled = finish();
      if (pushed_) {
        channel_.after_push();  // pushed by the second try, under the lock
      }
      if (closed_) {
        throw channel_closed();
      }
      if (cancelled) {
        detail::throw_operation_canceled(
            "cyan::dispatch::channel: send cancelled by a stop request");
      }
    }

   private:
    friend class channel;
    // A send cannot be taken back (a receiver may have the item already): declined, it stays
    // sent, and what await_resume() would have done for a second try's push is done here.
    static void give_back(sync_wait& waiter) noexcept {
      auto& self = static_cast<send_awaiter&>(waiter);
      if (self.pushed_) {
        self.channel_.after_push();
      }
    }
    channel& channel_;
    T value_;
    bool pushed_ = false;
    bool closed_ = false;  // under the senders' lock until the wake
  };

  class receive_awaiter : public detail::sync_wait {
   public:
    explicit receive_awaiter(channel& ch) noexcept
        : sync_wait(ch.receivers_, &give_back), channel_(ch) {}
    receive_awaiter(receive_awaiter&&) noexcept = default;  // before it is awaited only
    ~receive_awaiter() { withdraw(); }

    [[nodiscard]] bool await_ready() noexcept {
      switch (channel_.pop(item_)) {
        case detail::ring_result::done:
          channel_.after_pop();
          return true;
        case detail::ring_result::closed:
          return true;
        default:
          return false;
      }
    }
    template <typename Promise>
    bool await_suspend(std::coroutine_handle<Promise> suspended) {
      return suspend(suspended, [this] {
        // Announce the waiter before looking again: a send after this sees it.
        channel_.receivers_waiting_.store(true, std::memory_order_seq_cst);
        switch (channel_.pop(item_)) {
          case detail::ring_result::done:
            popped_ = true;
            break;
          case detail::ring_result::closed:
            break;
          default:
            return attempt::wait;
        }
        if (channel_.receivers_.empty()) {
          channel_.receivers_waiting_.store(false, std::memory_order_relaxed);
        }
        return attempt::done;
      });
    }
    std::optional<T> await_resume() {
      if (finish()) {
        detail::throw_operation_canceled(
            "cyan::dispatch::channel: receive cancelled by a stop request");
      }
      // Taken by this receiver (fast path, second try or a hand-off): room for a sender.
      if (popped_) {
        channel_.after_pop();
      }
      return std::move(item_);
    }

   private:
    friend class channel;
    // Handed an item (or took one), then destroyed before it resumed, or declined: the item
    // goes back to the front.
    static void give_back(sync_wait& waiter) noexcept {
      auto& self = static_cast<receive_awaiter&>(waiter);
      if (self.item_) {
        self.channel_.put_back(*self.item_, self.popped_);
      }
    }
    channel& channel_;
    std::optional<T> item_;  // under the receivers' lock until the wake
    bool popped_ = false;
  };

  static std::size_t checked(std::size_t capacity) {
    if (capacity == 0) {
      throw std::invalid_argument("cyan::dispatch::channel: capacity 0 (use 1 or more)");
    }
    return capacity;
  }

  // The buffer. `even_closed`: for an item coming back from a receiver that was handed it.
  detail::ring_result push(T& value, bool even_closed = false) {
    if (ring_) {
      return ring_->push(value, even_closed);
    }
    using policy = typename lockfree::segmented_queue<holder>::push_policy;
    return queue_->try_push(holder(value),
                            even_closed ? policy::unless_closed : policy::unless_sealed)
               ? detail::ring_result::done
               : detail::ring_result::closed;
  }

  // The next item: one given back first (see put_back), then the buffer's.
  detail::ring_result pop(std::optional<T>& out) noexcept {
    if (take_returned(out)) {
      return detail::ring_result::done;
    }
    const detail::ring_result found = pop_buffer(out);
    if (found == detail::ring_result::closed && take_returned(out)) {
      return detail::ring_result::done;  // given back while the buffer was found drained
    }
    return found;
  }

  detail::ring_result pop_buffer(std::optional<T>& out) noexcept {
    if (ring_) {
      return ring_->pop(out);
    }
    holder h;
    for (;;) {
      if (queue_->try_pop(h)) {
        out.emplace(std::move(*h.value));
        return detail::ring_result::done;
      }
      // Sealed before empty: once sealed, empty means drained. empty() is seq_cst: it closes
      // the handshake with a sender's waiter check (after_push).
      const bool sealed = queue_->sealed();
      if (queue_->empty()) {
        return sealed ? detail::ring_result::closed : detail::ring_result::empty;
      }
    }
  }

  // An item a receiver took comes back, because it will not be taken after all: its task was
  // dropped after the hand-off, or it was a when_any child that lost. It goes ahead of every
  // buffered item (it left before them), so items still leave in the order they were sent; the
  // room it made (`made_room`: it came out of the buffer and no sender was told yet) goes to
  // the waiting senders. Then it is handed on to a waiting receiver, if any. Should memory run
  // out for the front, it goes to the back (unless the channel has no room left by then).
  void put_back(T& item, bool made_room) noexcept {
    bool kept = true;
    try {
      std::lock_guard guard(returned_lock_);
      returned_.push_front(std::move(item));
      // seq_cst: with after_push's load of receivers_waiting_ below, the handshake with a
      // receiver about to wait (it announces itself, then pops).
      returned_count_.store(returned_.size(), std::memory_order_seq_cst);
    } catch (const std::bad_alloc&) {
      kept = push(item, true) == detail::ring_result::done;
    }
    if (made_room) {
      after_pop();
    }
    if (kept) {
      after_push();
    }
  }

  // Takes the first item given back, if any.
  bool take_returned(std::optional<T>& out) noexcept {
    // seq_cst: pairs with put_back's store (see there).
    if (returned_count_.load(std::memory_order_seq_cst) == 0) [[likely]] {
      return false;
    }
    std::lock_guard guard(returned_lock_);
    if (returned_.empty()) {
      return false;
    }
    out.emplace(std::move(returned_.front()));
    returned_.pop_front();
    returned_count_.store(returned_.size(), std::memory_order_relaxed);
    return true;
  }

  // A receiver waits and nothing is buffered: the item goes straight into the first waiting
  // receiver, not through the buffer, so no buffer line crosses between the cores (the
  // receivers' flag, their lock and the waiter do either way). Returns whether it went; if not,
  // `value` is untouched. Nothing buffered means no sender's earlier item can be overtaken; a
  // closed channel takes nothing (the push that follows says so).
  bool hand_off(T& value) noexcept {
    if (!receivers_waiting_.load(std::memory_order_relaxed)) {
      return false;  // a stale answer only means the buffer's way: after_push looks again
    }
    detail::granted_chain woken;  // woken when it goes, after the lock
    std::lock_guard guard(receivers_.lock());
    const bool buffer_empty_and_open =
        (ring_ ? ring_->empty_and_open() : !queue_->sealed() && queue_->empty()) &&
        returned_count_.load(std::memory_order_seq_cst) == 0;
    if (receivers_.empty() || !buffer_empty_and_open) {
      return false;
    }
    auto& first = static_cast<receive_awaiter&>(*receivers_.front());
    first.item_.emplace(std::move(value));  // popped_ stays false: the buffer gained no room
    woken.add(*receivers_.grant_front());
    if (receivers_.empty()) {
      receivers_waiting_.store(false, std::memory_order_relaxed);
    }
    return true;
  }

  // After an item went in: hand items to waiting receivers, if any. The seq_cst load closes
  // the handshake with a receiver about to wait (see detail/bounded_ring.h): the push's
  // publication was seq_cst too (a slot's stamp, or the unbounded queue's claim).
  void after_push() noexcept {
    if (receivers_waiting_.load(std::memory_order_seq_cst)) [[unlikely]] {
      serve_receivers();
    }
  }

  // After an item came out: move waiting senders' items into the room, if any.
  void after_pop() noexcept {
    if (!ring_) {
      return;  // an unbounded channel has no waiting senders
    }
    if (senders_waiting_.load(std::memory_order_seq_cst)) [[unlikely]] {
      serve_senders();
    }
  }

  void serve_receivers() noexcept {
    detail::granted_chain woken;  // woken when it goes, after the lock
    std::lock_guard guard(receivers_.lock());
    while (!receivers_.empty()) {
      auto& first = static_cast<receive_awaiter&>(*receivers_.front());
      const detail::ring_result found = pop(first.item_);
      if (found == detail::ring_result::empty) {
        break;
      }
      // An item, or nothing more to come (closed and drained): either way it goes on.
      first.popped_ = found == detail::ring_result::done;
      woken.add(*receivers_.grant_front());
    }
    if (receivers_.empty()) {
      receivers_waiting_.store(false, std::memory_order_relaxed);
    }
  }

  void serve_senders() noexcept {
    bool pushed = false;
    {
      detail::granted_chain woken;  // woken when it goes, after the lock
      std::lock_guard guard(senders_.lock());
      while (!senders_.empty()) {
        auto& first = static_cast<send_awaiter&>(*senders_.front());
        const detail::ring_result went = push(first.value_);
        if (went == detail::ring_result::full) {
          break;
        }
        first.closed_ = went == detail::ring_result::closed;
        pushed = pushed || !first.closed_;
        woken.add(*senders_.grant_front());
      }
      if (senders_.empty()) {
        senders_waiting_.store(false, std::memory_order_relaxed);
      }
    }
    if (pushed) {
      after_push();
    }
  }

  static void receivers_emptied(void* self) noexcept {
    static_cast<channel*>(self)->receivers_waiting_.store(false, std::memory_order_relaxed);
  }
  static void senders_emptied(void* self) noexcept {
    static_cast<channel*>(self)->senders_waiting_.store(false, std::memory_order_relaxed);
  }

  const std::size_t capacity_;
  std::unique_ptr<detail::bounded_ring<T>> ring_;             // bounded
  std::unique_ptr<lockfree::segmented_queue<holder>> queue_;  // unbounded
  alignas(cache_line_size) std::atomic<bool> receivers_waiting_{ false };
  detail::wait_list receivers_{ &receivers_emptied, this };
  alignas(cache_line_size) std::atomic<bool> senders_waiting_{ false };
  detail::wait_list senders_{ &senders_emptied, this };
  // Items given back (put_back), oldest first, under returned_lock_; returned_count_ is their
  // number, for pop's look without the lock (written under it).
  alignas(cache_line_size) std::atomic<std::size_t> returned_count_{ 0 };
  detail::spin_lock returned_lock_;
  std::deque<T> returned_;
};

}  // namespace cyan::dispatch
