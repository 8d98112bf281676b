#pragma once

// The thread behind a handler_thread: its start-up handshake, its event loop, its round (drain
// the sources, decide, sleep: the decisions are idle_policy.h's), delayed work and the stop
// sequence. Private to the dispatch library.

#include <any>
#include <chrono>
#include <cstddef>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "cyan/dispatch/detail/inbox.h"
#include "cyan/dispatch/handler.h"
#include "cyan/dispatch/handler_thread.h"
#include "cyan/event/async.h"
#include "cyan/event/loop.h"
#include "cyan/event/timer.h"
#include "idle_policy.h"

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
  // Tasks taken from the shared queue and from each lane per round: bounds the time between
  // two looks at the loop and keeps lanes fair to each other.
  static constexpr std::size_t kBatch = 1024;

  void main() noexcept;
  void set_up();
  void tear_down() noexcept;
  void run();
  std::size_t drain_sources();
  [[nodiscard]] bool sources_have_work() noexcept;
  static bool others_have_work(void* self) noexcept;
  bool poll_loop();
  void sleep();
  void finish() noexcept;
  void run_due_delayed() noexcept;
  void cancel_delayed() noexcept;
  void arm_timer();
  void call_handler(void (*callback)(handler&)) noexcept;

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
  idle_policy idle_;
  std::multimap<clock::time_point, inbox_task> delayed_;  // equal times keep post order
  clock::time_point armed_for_ = clock::time_point::max();
  bool finishing_ = false;
};

}  // namespace cyan::dispatch::detail
