#pragma once

// The shared state behind cyan::dispatch::future<T>. An awaitable task is ONE heap block: the
// state (reference count, readiness flags, continuation, result) followed by the task's closure.
// The future holds one reference, the posted job (awaitable_job, one pointer, so it fits
// unique_function's inline buffer) holds the other.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "cyan/common/noncopyable.h"
#include "cyan/dispatch/detail/frame_allocator.h"
#include "cyan/dispatch/detail/outcome.h"
#include "cyan/dispatch/errors.h"

struct timespec;

namespace cyan::dispatch {

template <typename T>
class future;

namespace detail {

/// The result-type-independent part of a future's shared state: reference count, readiness,
/// blocking waits (a futex on flags_, so no allocation and no syscall unless someone sleeps) and
/// one continuation (a resumed coroutine, or the bridge to std::future).
/// The producer (the job) completes it once; the consumer (the future's owner) waits, or
/// registers the continuation (and may withdraw it while the state is not ready). The owners of
/// a reference (the future, the job, and the awaiter of a suspended coroutine) may release it
/// from any thread.
class state_core : noncopyable {
 public:
  using continuation_fn = void (*)(void* context) noexcept;

  /// Takes one more reference, for a holder that the future may not outlive (a suspended
  /// coroutine's awaiter). Only by a thread that holds a reference already. [consumer]
  void add_reference() noexcept {
    // relaxed: the caller's own reference keeps the count above zero, so nothing is ordered by
    // this increment; each holder's accesses are ordered before the deletion by its release().
    references_.fetch_add(1, std::memory_order_relaxed);
  }

  /// Drops one reference; the last one frees the block. [any thread]
  void release() noexcept {
    // acq_rel: the release orders this owner's accesses before the deletion; the acquire in the
    // last owner's decrement pairs with the other owner's release decrement.
    if (references_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      delete this;
    }
  }

  [[nodiscard]] bool is_ready() const noexcept {
    // acquire: pairs with the release fetch_or in mark_ready(), making the result visible.
    return (flags_.load(std::memory_order_acquire) & kReady) != 0;
  }

  /// Blocks until ready. [consumer]
  void wait() noexcept {
    if (!is_ready()) {
      wait_slow();
    }
  }

  /// Blocks until ready or until `timeout` has passed; returns whether it is ready. [consumer]
  [[nodiscard]] bool wait_for(std::chrono::nanoseconds timeout) noexcept;

  /// Registers `fn(context)` to run once, on the completing thread, when the state becomes
  /// ready. Returns false, registering nothing, when it already is ready. At most one
  /// continuation per state. [consumer]
  [[nodiscard]] bool set_continuation(continuation_fn fn, void* context) noexcept {
    continuation_ = fn;
    context_ = context;
    // acq_rel: the release publishes continuation_/context_ to the acquire in mark_ready(); the
    // acquire pairs with mark_ready()'s release when the result is already there.
    return (flags_.fetch_or(kContinuation, std::memory_order_acq_rel) & kReady) == 0;
  }

  /// Withdraws the continuation set_continuation() registered, if the state is not ready yet:
  /// for a consumer that goes away first (~future, or the awaiter of a coroutine destroyed while
  /// suspended on it). Atomic with mark_ready(): either mark_ready() took the continuation first
  /// (it runs, or already ran, on the completing thread; returns false) or it never runs
  /// (returns true). Returns false, too, when none is registered. [consumer]
  bool withdraw_continuation() noexcept {
    // relaxed: kContinuation is set only by the consumer, so this thread sees its own store.
    if ((flags_.load(std::memory_order_relaxed) & kContinuation) == 0) {
      return false;
    }
    // relaxed: what decides is the modification order of flags_ alone (mark_ready()'s fetch_or
    // sees kContinuation or not); the withdrawn continuation_/context_ are never read.
    return (flags_.fetch_and(~kContinuation, std::memory_order_relaxed) & kReady) == 0;
  }

  /// withdraw_continuation() for a thread other than the consumer's (a stop request on its
  /// behalf) that may race with the consumer's own withdrawal: only the first of them sees the
  /// continuation and returns true. [any thread]
  bool revoke_continuation() noexcept {
    // acq_rel: the release makes what this thread did before (the stop request) visible to a
    // later set_continuation() that reads this value; see future's awaiter.
    const std::uint32_t before = flags_.fetch_and(~kContinuation, std::memory_order_acq_rel);
    return (before & kContinuation) != 0 && (before & kReady) == 0;
  }

  /// Runs the task, stores its result or exception, completes the state and drops the job's
  /// reference. Called at most once, by the job. [producer]
  virtual void run() noexcept = 0;
  /// Completes the state with task_cancelled without running the task, and drops the job's
  /// reference. Called instead of run(), by a job destroyed unrun. [producer]
  virtual void cancel() noexcept = 0;

 protected:
  state_core() = default;
  virtual ~state_core() = default;

  /// Publishes the stored result: wakes blocked waiters and runs the continuation. [producer]
  void mark_ready() noexcept;

 private:
  static constexpr std::uint32_t kReady = 1;
  static constexpr std::uint32_t kWaiting = 2;  // a consumer sleeps (or is about to) on the futex
  static constexpr std::uint32_t kContinuation = 4;

  void wait_slow() noexcept;
  // One futex sleep of at most `timeout` (nullptr: unbounded); returns whether it is ready.
  bool park(const timespec* timeout) noexcept;

  // Written by both sides with fetch_or; the futex word, so exactly 32 bits.
  std::atomic<std::uint32_t> flags_{ 0 };
  // One reference for the future, one for the job; add_reference() adds the awaiter's.
  std::atomic<std::uint32_t> references_{ 2 };
  // Written by the consumer before it sets kContinuation; read by the producer after.
  continuation_fn continuation_ = nullptr;
  void* context_ = nullptr;
};

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
              std::atomic<std::uint32_t>::is_always_lock_free);

/// state_core plus the result (see outcome.h).
template <typename T>
class shared_state : public state_core {
 public:
  /// Consumes the result: returns the value or rethrows the task's exception. Only after ready.
  T take() { return result_.take(); }

 protected:
  /// Invokes `f` (as an rvalue) and stores what it returns or throws. [producer]
  template <typename F>
  void store_result_of(F& f) noexcept {
    result_.set_result_of(f);
  }

  /// Stores `value` (nothing for void, the referenced object's address for T&). [producer]
  template <typename... V>
  void store_value(V&&... value) {
    result_.set_value(std::forward<V>(value)...);
  }

  void store_cancellation() noexcept { store_error(std::make_exception_ptr(task_cancelled{})); }

  /// Replaces the result with `error`. [producer]
  void store_error(std::exception_ptr error) noexcept { result_.set_error(std::move(error)); }

 private:
  // Written by the producer before mark_ready(); read by the consumer after is_ready().
  outcome<T> result_;
};

/// The single heap block of an awaitable task: shared state and closure side by side. The
/// closure is destroyed as soon as it has run (or been cancelled), before the future becomes
/// ready, so whatever it captured is released by the time get() returns. What the closure's
/// destructor throws (a capture whose destructor is noexcept(false)) becomes the future's
/// result, in place of the value, the task's exception or task_cancelled.
/// The block comes from the frame allocator (as coroutine frames and spawn states do): a
/// stream of awaitable tasks recycles the same memory through per-thread free lists instead of
/// going through malloc, which hands freed memory back to the system and faults it in again.
template <typename T, typename F>
class task_state final : public shared_state<T>, public frame_allocated {
 public:
  template <typename G>
  explicit task_state(G&& function) : function_(std::forward<G>(function)) {}

  void run() noexcept override {
    this->store_result_of(function_);
    destroy_function();
    this->mark_ready();
    this->release();
  }

  void cancel() noexcept override {
    this->store_cancellation();
    destroy_function();
    this->mark_ready();
    this->release();
  }

 private:
  ~task_state() noexcept override {}  // function_ was destroyed by run() or cancel()

  void destroy_function() noexcept {
    if constexpr (std::is_nothrow_destructible_v<F>) {
      function_.~F();
    } else {
      try {
        function_.~F();
      } catch (...) {
        this->store_error(std::current_exception());
      }
    }
  }

  union {
    F function_;
  };
};

/// The runnable half of an awaitable task, and what executors post: calling it runs the task
/// and completes its future; destroying it uncalled (a discarded or never-due task) completes
/// the future with task_cancelled, so no awaitable is ever left broken. One pointer wide, so a
/// unique_function<void()> stores it without allocating. Call it at most once.
class awaitable_job {
 public:
  explicit awaitable_job(state_core* state) noexcept : state_(state) {}
  awaitable_job(awaitable_job&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}
  awaitable_job& operator=(awaitable_job&& other) noexcept {
    awaitable_job(std::move(other)).swap(*this);
    return *this;
  }
  ~awaitable_job() {
    if (state_ != nullptr) {
      state_->cancel();
    }
  }

  void operator()() noexcept { std::exchange(state_, nullptr)->run(); }

  void swap(awaitable_job& other) noexcept { std::swap(state_, other.state_); }

 private:
  state_core* state_;
};

/// The value type of the future for closure F: what F returns when invoked as an rvalue.
template <typename F>
using task_result_t = std::invoke_result_t<std::decay_t<F>>;

/// Lets package() reach future's private constructor.
struct future_access {
  template <typename T>
  static future<T> make(shared_state<T>* state) noexcept {
    return future<T>(state);
  }
};

/// Wraps `f` into an awaitable task, one block: returns the future and the job to post.
/// Throws std::bad_alloc, or whatever copying/moving `f` throws. [any thread]
template <typename F>
auto package(F&& f) {
  using result = task_result_t<F>;
  auto* state = new task_state<result, std::decay_t<F>>(std::forward<F>(f));
  return std::pair{ future_access::make<result>(state), awaitable_job(state) };
}

/// Completes a std::promise from a cyan future's state: the continuation behind
/// future<T>::operator std::future<T>().
template <typename T>
struct std_future_bridge {
  explicit std_future_bridge(shared_state<T>* s) : state(s) {}

  static void fire(void* self) noexcept {
    std::unique_ptr<std_future_bridge> bridge(static_cast<std_future_bridge*>(self));
    try {
      if constexpr (std::is_void_v<T>) {
        bridge->state->take();
        bridge->promise.set_value();
      } else {
        bridge->promise.set_value(bridge->state->take());
      }
    } catch (...) {
      bridge->promise.set_exception(std::current_exception());
    }
    bridge->state->release();
  }

  shared_state<T>* state;
  std::promise<T> promise;
};

}  // namespace detail
}  // namespace cyan::dispatch
