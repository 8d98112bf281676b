#pragma once

// The thread behind a handler_thread: its start-up handshake, its event loop, the drain /
// spin / sleep cycle, delayed work and the stop sequence. Private to the dispatch library.

#include <any>
#include <chrono>
#include <cstddef>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "cyan/common/detail/adaptive_attempts.h"
#include "cyan/dispatch/detail/inbox.h"
#include "cyan/dispatch/handler.h"
#include "cyan/dispatch/handler_thread.h"
#include "cyan/event/async.h"
#include "cyan/event/loop.h"
#include "cyan/event/timer.h"

namespace cyan::dispatch::detail {

class idle_hook;

/// Calls a handler's protected callbacks (handler befriends it).
struct handler_access {
  static void initialize(handler& h) { h.on_initialize(); }
  static void message(handler& h, std::any&& message) { h.on_message(std::move(message)); }
  static void finalize(handler& h) { h.on_finalize(); }
  static void error(handler& h, std::exception& error) noexcept { h.on_error(error); }
};

/// Thread rules: start(), join() and the constructor/destructor run on the thread that owns
/// the handler_thread; wake_thread() on any thread; everything else on the handler thread.
class handler_thread_runtime final : public inbox_owner {
 public:
  using clock = std::chrono::steady_clock;

  /// `hook`: a pool worker's (see detail/idle_hook.h), null for a plain handler thread.
  handler_thread_runtime(handler_thread& owner, handler& user_handler,
                         handler_thread_options options, idle_hook* hook = nullptr);
  /// Joins the thread if it is still joinable (a failed start-up).
  ~handler_thread_runtime();

  /// Starts the thread and waits until its loop is ready; rethrows what set-up threw.
  void start();
  void join();

  [[nodiscard]] const std::shared_ptr<event::loop>& loop() const noexcept { return loop_; }
  [[nodiscard]] std::thread::id id() const noexcept { return id_; }
  [[nodiscard]] handler& user_handler() const noexcept { return handler_; }

  // inbox_owner
  void wake_thread() noexcept override { waker_->send(); }
  void report(std::exception& error) noexcept override { handler_access::error(handler_, error); }
  void schedule(clock::time_point due, inbox_task task) override;
  [[nodiscard]] bool expecting_hand_overs() const noexcept override {
    return owner_.expecting_hand_overs();
  }

 private:
  // Drain rounds (or tasks) between two looks at the clock for loop_poll_interval.
  static constexpr unsigned kRoundsPerClockCheck = 32;
  static constexpr std::size_t kTasksPerClockCheck = 256;
  // How often a busy thread still lets its loop run timers and io: a syscall each time.
  static constexpr std::chrono::microseconds kLoopPollInterval{ 500 };
  // The shortest spin once spinning was found useless (see spin()); cheaper than a wake-up.
  static constexpr std::chrono::nanoseconds kMinSpin{ 1000 };
  // A heavy fence that took at most this long interrupted no other running thread (~1.2 us
  // here, ~1.7 under TSan; ~26 us when it interrupts one, a VM exit on both sides): sleeping
  // after it is cheaper than a nap (see sleep()).
  static constexpr std::chrono::nanoseconds kCheapFence{ 10000 };
  // How long a spin only spins before it also yields (see spin()).
  static constexpr std::chrono::nanoseconds kSpinBeforeYield{ 2000 };
  // A yield that lasts this long let another thread run on this CPU (see yield_and_learn()).
  static constexpr std::chrono::nanoseconds kLongYield{ 3000 };
  // Tasks taken from the shared queue and from each lane per round: bounds the time between
  // two looks at the loop and keeps lanes fair to each other.
  static constexpr std::size_t kBatch = 1024;

  void main() noexcept;
  void set_up();
  void tear_down() noexcept;
  void run();
  bool run_elsewhere() noexcept;
  bool spin() noexcept;
  void yield_and_learn(clock::time_point before) noexcept;
  void grow_spin() noexcept;
  void sleep();
  bool may_sleep(inbox::sleep_fence fence, clock::duration* fence_took = nullptr);
  void learn_from_sleep(clock::duration slept) noexcept;
  void after_round(std::size_t taken);
  bool poll_loop();
  bool poll_after_wake();
  void finish() noexcept;
  void run_due_delayed() noexcept;
  void cancel_delayed() noexcept;
  void arm_timer();
  void call_handler(void (*callback)(handler&)) noexcept;
  static bool hook_has_work(void* self) noexcept;

  handler_thread& owner_;
  inbox& inbox_;
  handler& handler_;
  const handler_thread_options options_;
  idle_hook* const hook_;  // a pool worker's source of work beyond its inbox; or null

  std::thread thread_;
  std::thread::id id_;
  std::mutex join_mutex_;

  // Created on the thread before start() returns; the loop outlives the thread (it is reachable
  // through get_event_loop()), the watchers are destroyed on the thread when it finishes.
  std::shared_ptr<event::loop> loop_;
  std::optional<event::async> waker_;
  std::optional<event::timer> timer_;
  std::optional<event::timer> nap_;  // bounds a sleep after a light announcement

  // Thread-only state.
  std::multimap<clock::time_point, inbox_task> delayed_;  // equal times keep post order
  clock::time_point armed_for_ = clock::time_point::max();
  clock::time_point last_poll_{};
  unsigned rounds_since_clock_ = 0;
  std::size_t tasks_since_clock_ = 0;
  bool finishing_ = false;
  bool yield_at_once_ = false;  // the sender seems to share this CPU (see yield_and_learn())
  bool nap_expired_ = false;    // the last sleep was a nap that ended with nothing to do
  bool loop_woke_ = false;      // the last sleep (and each poll since) ran the loop's callbacks
                                // (io, a timer), not a post: poll before sleeping again
  bool first_poll_after_wake_ = false;           // loop_woke_ and no poll made since that sleep
  cyan::detail::adaptive_attempts wake_poll_;    // whether that first poll is worth making
  cyan::detail::adaptive_attempts cheap_fence_;  // whether to try the heavy fence before a nap
  clock::duration spin_budget_;  // adapts between kMinSpin and options_.spin_before_sleep
                                 // (see spin() and learn_from_sleep())
};

}  // namespace cyan::dispatch::detail
