#pragma once

// The machinery of co_spawn() (cyan/dispatch/co_spawn.h): what it accepts (a task or a
// callable that makes one), the one heap block a spawn allocates (spawn_state: the future's
// shared state, the task or its callable, the root branch, the stop source) and the driver
// coroutine that runs the task and completes the spawn.

#include <concepts>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

#include "cyan/dispatch/detail/coro_env.h"
#include "cyan/dispatch/detail/forward_stop.h"
#include "cyan/dispatch/detail/frame_allocator.h"
#include "cyan/dispatch/detail/future_state.h"
#include "cyan/dispatch/detail/spawn_registry.h"
#include "cyan/dispatch/errors.h"
#include "cyan/dispatch/future.h"
#include "cyan/dispatch/task.h"

namespace cyan::dispatch {
namespace detail {

template <typename T>
inline constexpr bool is_task = false;
template <typename T>
inline constexpr bool is_task<task<T>> = true;

/// A callable that returns a task when invoked as an rvalue, with no arguments.
template <typename F>
concept task_factory = std::invocable<std::decay_t<F>> &&
    is_task<std::remove_cvref_t<std::invoke_result_t<std::decay_t<F>>>>;

/// What co_spawn() accepts: a task, or a task_factory.
template <typename X>
concept spawnable = is_task<std::remove_cvref_t<X>> || task_factory<X>;

template <typename X>
struct spawned_task;
template <typename T>
struct spawned_task<task<T>> {
  using type = task<T>;
};

/// The task<T> that spawning X runs.
template <typename X>
using spawned_task_t = typename std::conditional_t<is_task<std::remove_cvref_t<X>>,
                                                   std::type_identity<std::remove_cvref_t<X>>,
                                                   std::invoke_result<std::decay_t<X>>>::type;

/// Where a detached task's exception goes: the executor's error path.
using error_sink = void (*)(void* executor, std::exception_ptr error) noexcept;

/// Room for the next spawn driver's frame, offered by the spawn state being constructed.
struct driver_space {
  std::byte* bytes = nullptr;
  std::size_t capacity = 0;
};
inline thread_local driver_space next_driver_space{};

/// The coroutine that runs a spawned task: it awaits the task (so the task's awaiter is one of
/// cyan's and the task belongs to the spawn's branch) and then completes the spawn.
class spawn_driver {
 public:
  static constexpr std::size_t kHeader = 16;

  static void* place(std::size_t size, std::byte* space, std::size_t capacity) {
    std::byte* block = nullptr;
    bool inline_space = size + kHeader <= capacity;
    if (inline_space) {
      block = space;
    } else {
      block = static_cast<std::byte*>(allocate_frame(size + kHeader));
    }
    *reinterpret_cast<bool*>(block) = inline_space;
    return block + kHeader;
  }
  static void unplace(void* frame, std::size_t size) noexcept {
    std::byte* block = static_cast<std::byte*>(frame) - kHeader;
    if (!*reinterpret_cast<bool*>(block)) {
      deallocate_frame(block, size + kHeader);
    }
  }

  struct promise_type : branch_member {
    static constexpr bool any_thread = true;

    // The frame lives in the spawn state's driver_room when it fits (one allocation per
    // spawn fewer), else in the frame pool; a 16-byte header says which. The space is handed
    // over through next_driver_space by the spawn state's constructor, right before it calls
    // drive().
    static void* operator new(std::size_t size) {
      const driver_space offered = std::exchange(next_driver_space, driver_space{});
      return place(size, offered.bytes, offered.capacity);
    }
    static void operator delete(void* frame, std::size_t size) noexcept { unplace(frame, size); }

    struct finish {
      [[nodiscard]] bool await_ready() const noexcept { return false; }
      void await_suspend(std::coroutine_handle<promise_type> done) noexcept {
        void (*complete)(void*) noexcept = done.promise().complete;
        void* state = done.promise().state;
        done.destroy();
        complete(state);
      }
      void await_resume() const noexcept {}
    };

    spawn_driver get_return_object() noexcept {
      return spawn_driver(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() const noexcept { return {}; }
    finish final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    void unhandled_exception() const noexcept { std::terminate(); }  // the body catches all

    void (*complete)(void*) noexcept = nullptr;
    void* state = nullptr;
  };

  std::coroutine_handle<promise_type> handle;

 private:
  explicit spawn_driver(std::coroutine_handle<promise_type> h) noexcept : handle(h) {}
};

/// The one heap block of a spawned task: the future's shared state, the task (or the callable
/// that makes it, and then the task), the root branch and its stop source, and the driver.
/// References: the future's (none when detached) and the job's, which the task's end (or its
/// cancellation, or its drop) gives back.
template <typename X>
class spawn_state final : public shared_state<typename spawned_task_t<X>::value_type>,
                          public branch,
                          public branch_root,
                          public frame_allocated {
 public:
  using task_type = spawned_task_t<X>;
  using value_type = typename task_type::value_type;

  template <typename Y>
  spawn_state(Y&& spawned, std::stop_token user_token, spawn_registry& registry, error_sink sink,
              void* executor)
      : branch_root(registry.discarding()), registry_(registry), sink_(sink), executor_(executor) {
    if constexpr (is_task<std::remove_cvref_t<X>>) {
      task_ = std::forward<Y>(spawned);
    } else {
      factory_.emplace(std::forward<Y>(spawned));
    }
    root = this;
    // Without a token of the caller's, the task observes its executor's discard token (no
    // allocation); with one, a source of its own that both that token and a discard stop.
    if (user_token.stop_possible()) {
      own_stop_ = std::make_unique<own_stop>(std::move(user_token), registry.discard_token());
      token = own_stop_->source.get_token();
    } else {
      token = registry.discard_token();
    }
    next_driver_space = detail::driver_space{ driver_room, sizeof(driver_room) };
    driver_ = drive(this).handle;
    driver_.promise().branch_ = this;
    driver_.promise().complete = &completed;
    driver_.promise().state = this;
  }

  /// For a detached spawn: drops the future's reference (there is no future).
  void detach() noexcept { this->release(); }

  void run() noexcept override { driver_.resume(); }

  void cancel() noexcept override {
    driver_.destroy();
    end(std::make_exception_ptr(task_cancelled{}), false);
  }

  void drop() noexcept override {
    // Every branch has ended: nothing resumes any frame of the chain. The driver is suspended
    // at its co_await of task_.
    driver_.destroy();
    end(std::make_exception_ptr(task_cancelled{}), false);
  }

 private:
  ~spawn_state() noexcept override = default;

  static spawn_driver drive(spawn_state* self) {
    try {
      if constexpr (!is_task<std::remove_cvref_t<X>>) {
        self->task_ = std::invoke(std::move(*self->factory_));
      }
      if constexpr (std::is_void_v<value_type>) {
        co_await std::move(self->task_);
        self->store_value();
      } else {
        self->store_value(co_await std::move(self->task_));
      }
    } catch (...) {
      self->error_ = std::current_exception();
    }
  }

  static void completed(void* self) noexcept {
    auto* state = static_cast<spawn_state*>(self);
    state->end(std::exchange(state->error_, nullptr), true);
  }

  // The task finished (error: what it threw), was never started, or was dropped. A detached
  // task reports what it threw (not its cancellation) to the executor's error path.
  void end(std::exception_ptr error, bool report) noexcept {
    task_ = task_type();  // its frame, and the callable with its captures, before ready
    destroy_factory();
    own_stop_.reset();
    if (error) {
      if (sink_ != nullptr && report && !stopped_by_request(error)) {
        sink_(executor_, error);
      }
      this->store_error(std::move(error));
    }
    this->mark_ready();
    registry_.leave();  // may let the executor finish; the registry outlives the call
    this->release();
  }

  // operation_canceled after a stop request is how a stopped task ends, not an error to report.
  bool stopped_by_request(const std::exception_ptr& error) const noexcept {
    if (!token.stop_requested()) {
      return false;
    }
    try {
      std::rethrow_exception(error);
    } catch (const std::system_error& e) {
      return e.code() == std::errc::operation_canceled;
    } catch (...) {
      return false;
    }
  }

  void destroy_factory() noexcept {
    try {
      factory_.reset();
    } catch (...) {
      if (sink_ != nullptr) {
        sink_(executor_, std::current_exception());
      } else {
        this->store_error(std::current_exception());
      }
    }
  }

  using factory_type =
      std::conditional_t<is_task<std::remove_cvref_t<X>>, std::monostate, std::decay_t<X>>;

  std::optional<factory_type> factory_;
  task_type task_;
  std::exception_ptr error_;
  // With a token of the caller's: the task's own source, stopped by that token and by a discard.
  struct own_stop {
    own_stop(std::stop_token user, std::stop_token discard)
        : from_user(std::move(user), forward_stop{ &source }),
          from_discard(std::move(discard), forward_stop{ &source }) {}
    std::stop_source source;
    stop_forwarder from_user;
    stop_forwarder from_discard;
  };
  std::unique_ptr<own_stop> own_stop_;
  spawn_registry& registry_;
  error_sink sink_;  // detached only
  void* executor_;
  std::coroutine_handle<spawn_driver::promise_type> driver_;

 public:
  // Where drive()'s frame goes when it fits (see spawn_driver::promise_type::operator new).
  alignas(std::max_align_t) std::byte driver_room[96];
};

template <typename Executor, typename X>
auto spawn(Executor& executor, X&& spawned, std::stop_token token, bool detach) {
  using state_type = spawn_state<X>;
  using value_type = typename state_type::value_type;
  spawn_registry& registry = executor_access::registry(executor);
  error_sink sink = nullptr;
  if (detach) {
    sink = [](void* target, std::exception_ptr error) noexcept {
      executor_access::report(*static_cast<Executor*>(target), std::move(error));
    };
  }
  auto* state =
      new state_type(std::forward<X>(spawned), std::move(token), registry, sink, &executor);
  future<value_type> result = future_access::make<value_type>(state);
  registry.enter();  // before the post: see "Stop" in outstanding_work.h
  try {
    executor_access::post(executor, awaitable_job(state));
  } catch (const executor_stopped&) {
    // The job was destroyed unrun: the task is cancelled, its future says so.
  }
  if (detach) {
    result = future<value_type>();
  }
  return result;
}

}  // namespace detail

}  // namespace cyan::dispatch
