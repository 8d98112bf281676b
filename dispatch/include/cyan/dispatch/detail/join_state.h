#pragma once

// The machinery of when_all() and when_any() (cyan/dispatch/when_all.h): the join state where
// the children and the awaiting parent meet, each child's branch and the coroutine that runs it.

#include <atomic>
#include <concepts>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <stdexcept>
#include <stop_token>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "cyan/dispatch/detail/coro_env.h"
#include "cyan/dispatch/detail/frame_allocator.h"
#include "cyan/dispatch/detail/outcome.h"
#include "cyan/dispatch/detail/schedule_awaiter.h"
#include "cyan/dispatch/errors.h"
#include "cyan/dispatch/task.h"

namespace cyan::dispatch {

namespace detail {

/// What a child of when_all/when_any contributes: its value, std::monostate for void.
template <typename T>
using child_value_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

/// What a child leaves for the join: child_value_t<T> of its outcome, or its exception rethrown.
template <typename T>
child_value_t<T> take_child(outcome<T>& slot) {
  if constexpr (std::is_void_v<T>) {
    slot.take();
    return {};
  } else {
    return slot.take();
  }
}

/// The rendezvous of a when_all/when_any: the children and the starter (the awaiting parent)
/// each arrive once; the last one resumes the parent on its home. For when_any, the first
/// child to finish is the winner and stops the others.
class join_state {
 public:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);

  explicit join_state(std::size_t children) : pending_(children + 1), handles_(children) {}
  join_state(const join_state&) = delete;
  join_state& operator=(const join_state&) = delete;
  /// Destroys the wrappers of children that were dropped (their frames are suspended).
  ~join_state() {
    for (std::coroutine_handle<>& handle : handles_) {
      if (handle) {
        handle.destroy();
      }
    }
  }

  /// For when_any: who to stop once a child won.
  void stop_others_with(std::stop_source* source) noexcept { stopper_ = source; }

  /// Starts the children (each runs until it suspends or finishes), then arrives for the
  /// starter. Returns whether the parent must suspend. `parent_branch` may be null.
  bool start(std::coroutine_handle<> parent, branch* parent_branch, bool wants_home) noexcept {
    parent_ = parent;
    parent_branch_ = parent_branch;
    if (wants_home) {
      parent_home_ = current_executor();
    }
    for (std::coroutine_handle<> handle : handles_) {
      handle.resume();  // may finish (and null its handle) before resume() returns
    }
    return !arrive();
  }

  /// For when_any: child `index` would be the winner. The first claim wins and stops the
  /// others; returns whether `index` is the winner (a child may claim more than once).
  bool claim(std::size_t index) noexcept {
    std::size_t seen = kNone;
    if (winner_.compare_exchange_strong(seen, index, std::memory_order_acq_rel)) {
      stopper_->request_stop();
      return true;
    }
    return seen == index;
  }

  /// For when_any: whether a child other than `index` won already.
  [[nodiscard]] bool lost(std::size_t index) const noexcept {
    const std::size_t seen = winner();
    return seen != kNone && seen != index;
  }

  /// A child's end (after its result is stored, with its wrapper's handle cleared): returns
  /// the parent to go on with by symmetric transfer, or noop.
  std::coroutine_handle<> child_done(std::size_t index) noexcept {
    if (stopper_ != nullptr) {
      (void)claim(index);  // a task child wins by finishing first
    }
    if (!arrive()) {
      return std::noop_coroutine();
    }
    if (!parent_home_ || parent_home_ == current_executor()) {
      return parent_;
    }
    resume_on(parent_home_, parent_, parent_branch_);
    return std::noop_coroutine();
  }

  /// child_done() for a child that will not finish (dropped): resumes the parent if last.
  void child_dropped(std::size_t index) noexcept {
    const std::coroutine_handle<> next = child_done(index);
    if (next != std::noop_coroutine()) {
      resume_job(next, parent_branch_)();
    }
  }

  void clear_handle(std::size_t index) noexcept { handles_[index] = nullptr; }
  void set_handle(std::size_t index, std::coroutine_handle<> handle) noexcept {
    handles_[index] = handle;
  }
  [[nodiscard]] std::size_t winner() const noexcept {
    return winner_.load(std::memory_order_acquire);
  }
  [[nodiscard]] branch* parent_branch() const noexcept { return parent_branch_; }

 private:
  // acq_rel: the last to arrive acquires every child's result.
  bool arrive() noexcept { return pending_.fetch_sub(1, std::memory_order_acq_rel) == 1; }

  std::atomic<std::size_t> pending_;
  std::atomic<std::size_t> winner_{ kNone };
  std::stop_source* stopper_ = nullptr;
  std::coroutine_handle<> parent_;
  branch* parent_branch_ = nullptr;
  executor_ref parent_home_;
  std::vector<std::coroutine_handle<>> handles_;
};

/// The branch a child runs in: the parent's stop token (when_all) or when_any's own, and the
/// parent's root. Dropped, it reports the child as cancelled.
class child_branch final : public branch {
 public:
  void bind(join_state& join, std::size_t index, std::stop_token stop, branch* parent) noexcept {
    join_ = &join;
    index_ = index;
    token = std::move(stop);
    root = parent != nullptr ? parent->root : nullptr;
  }
  // The child will not finish: it counts as cancelled. Its wrapper stays suspended and is
  // destroyed with the join state.
  void drop() noexcept override {
    if (on_drop_ != nullptr) {
      on_drop_(slot_);
    }
    join_->child_dropped(index_);
  }
  void set_drop_handler(void (*handler)(void*) noexcept, void* slot) noexcept {
    on_drop_ = handler;
    slot_ = slot;
  }

 private:
  join_state* join_ = nullptr;
  std::size_t index_ = 0;
  void (*on_drop_)(void*) noexcept = nullptr;
  void* slot_ = nullptr;
};

/// The coroutine that runs one child: awaits it in the child's branch, stores its outcome,
/// destroys itself and reports to the join state.
class join_child {
 public:
  struct promise_type : branch_member, frame_allocated {
    static constexpr bool any_thread = true;

    struct finish {
      [[nodiscard]] bool await_ready() const noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> done) noexcept {
        join_state* join = done.promise().join;
        const std::size_t index = done.promise().index;
        join->clear_handle(index);
        done.destroy();
        return join->child_done(index);
      }
      void await_resume() const noexcept {}
    };

    join_child get_return_object() noexcept {
      return join_child(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() const noexcept { return {}; }
    finish final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    void unhandled_exception() const noexcept { std::terminate(); }  // the body catches all

    join_state* join = nullptr;
    std::size_t index = 0;
  };

  template <typename T>
  static join_child run(task<T>& child, outcome<T>& slot) {
    try {
      if constexpr (std::is_void_v<T>) {
        co_await std::move(child);
        slot.set_value();
      } else {
        slot.set_value(co_await std::move(child));
      }
    } catch (...) {
      slot.set_error(std::current_exception());
    }
  }

  std::coroutine_handle<promise_type> handle;

 private:
  explicit join_child(std::coroutine_handle<promise_type> h) noexcept : handle(h) {}
};

template <typename T>
void mark_dropped(void* slot) noexcept {
  static_cast<outcome<T>*>(slot)->set_error(std::make_exception_ptr(task_cancelled{}));
}

/// A cyan operation when_any takes as a child besides tasks: an awaiter of a channel's send()
/// and receive(), an async_semaphore's acquire(), an async_mutex's scoped_lock(), an
/// async_event's or async_latch's wait() — one that can give back what it got (decline(), see
/// wait_list.h) and that moves before it is awaited.
template <typename Op>
concept declinable_operation =
    std::is_nothrow_move_constructible_v<Op> && !std::is_reference_v<Op> && requires(Op & op) {
  { op.await_ready() } -> std::convertible_to<bool>;
  op.await_resume();
  op.decline();
};

/// What an operation child yields.
template <typename Op>
using operation_result_t = decltype(std::declval<Op&>().await_resume());

/// Awaits an operation child of when_any (what operation_child runs). Its completion is its
/// child's: await_resume() claims the win before it takes the result, and an operation that
/// lost the claim — it completed while or after another child won — declines, so what it got
/// goes back (see decline in wait_list.h) and the child ends with operation_canceled. One that
/// lost before it started (an earlier child completed at once) does not start at all.
template <typename Op>
class claiming_awaiter {
 public:
  claiming_awaiter(Op& op, join_state& join, std::size_t index) noexcept
      : op_(op), join_(join), index_(index) {}
  [[nodiscard]] bool await_ready() {
    not_started_ = join_.lost(index_);
    return not_started_ || op_.await_ready();
  }
  template <typename Promise>
  decltype(auto) await_suspend(std::coroutine_handle<Promise> suspended) {
    return op_.await_suspend(suspended);
  }
  operation_result_t<Op> await_resume() {
    if (not_started_ || !join_.claim(index_)) {
      if (!not_started_) {
        op_.decline();
      }
      throw_operation_canceled("cyan::dispatch::when_any: another child finished first");
    }
    return op_.await_resume();
  }

 private:
  Op& op_;
  join_state& join_;
  std::size_t index_;
  bool not_started_ = false;
};

/// The task that runs operation child `index`. `join` lives in when_any's frame, which
/// outlives its children.
template <typename Op>
task<operation_result_t<Op>> operation_child(Op op, join_state* join, std::size_t index) {
  co_return co_await claiming_awaiter<Op>(op, *join, index);
}

template <typename C>
struct child_result;
template <typename T>
struct child_result<task<T>> {
  using type = T;
};
template <declinable_operation Op>
struct child_result<Op> {
  using type = operation_result_t<Op>;
};

/// What a when_any child (a task, or an operation) yields.
template <typename C>
using child_result_t = typename child_result<C>::type;

/// A child of when_any: a task, or a declinable operation.
template <typename C>
concept any_child = requires {
  typename child_result<C>::type;
};

/// Child `index` of when_any as a task: a task as it is, an operation in operation_child.
template <typename T>
task<T> as_child_task(task<T>&& child, join_state&, std::size_t) noexcept {
  return std::move(child);
}
template <declinable_operation Op>
task<operation_result_t<Op>> as_child_task(Op&& op, join_state& join, std::size_t index) {
  return operation_child(std::move(op), &join, index);
}

/// Starts the children and suspends the parent until all have finished.
class join_awaiter {
 public:
  explicit join_awaiter(join_state& join) noexcept : join_(join) {}
  [[nodiscard]] bool await_ready() const noexcept { return false; }
  template <typename Promise>
  bool await_suspend(std::coroutine_handle<Promise> parent) noexcept {
    return join_.start(parent, branch_of(parent), wants_home<Promise>);
  }
  void await_resume() const noexcept {}

 private:
  join_state& join_;
};

/// Reads the awaiting task's branch (for the children's stop token and root) without
/// suspending.
struct branch_reader {
  branch* found = nullptr;
  [[nodiscard]] bool await_ready() const noexcept { return false; }
  template <typename Promise>
  bool await_suspend(std::coroutine_handle<Promise> calling) noexcept {
    found = branch_of(calling);
    return false;
  }
  [[nodiscard]] branch* await_resume() const noexcept { return found; }
};

/// Prepares child `index`: its branch and wrapper.
template <typename T>
void prepare_child(join_state& join, std::size_t index, task<T>& child, outcome<T>& slot,
                   child_branch& where, std::stop_token stop, branch* parent) {
  if (!child.valid()) {
    throw std::logic_error("cyan::dispatch::when_all/when_any: an empty task");
  }
  where.bind(join, index, std::move(stop), parent);
  where.set_drop_handler(&mark_dropped<T>, &slot);
  join_child wrapper = join_child::run(child, slot);  // allocates: may throw
  wrapper.handle.promise().branch_ = &where;
  wrapper.handle.promise().join = &join;
  wrapper.handle.promise().index = index;
  join.set_handle(index, wrapper.handle);
}

}  // namespace detail

}  // namespace cyan::dispatch
