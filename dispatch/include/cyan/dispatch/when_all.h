#pragma once

#include <array>
#include <atomic>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <stop_token>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "cyan/dispatch/detail/coro_env.h"
#include "cyan/dispatch/detail/frame_allocator.h"
#include "cyan/dispatch/errors.h"
#include "cyan/dispatch/task.h"

namespace cyan::dispatch {

namespace detail {

/// What a child of when_all/when_any contributes: its value, std::monostate for void.
template <typename T>
using child_value_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

/// One child's outcome.
template <typename T>
class child_slot {
 public:
  template <typename... V>
  void set_value(V&&... value) {
    if constexpr (std::is_void_v<T>) {
      result_.template emplace<1>();
    } else if constexpr (std::is_reference_v<T>) {
      result_.template emplace<1>(std::addressof(value)...);
    } else {
      result_.template emplace<1>(std::forward<V>(value)...);
    }
  }
  void set_error(std::exception_ptr error) noexcept { result_.template emplace<2>(error); }
  [[nodiscard]] bool failed() const noexcept { return result_.index() == 2; }

  child_value_t<T> take() {
    if (result_.index() == 2) {
      std::rethrow_exception(std::get<2>(result_));
    }
    if constexpr (std::is_void_v<T>) {
      return {};
    } else if constexpr (std::is_reference_v<T>) {
      return *std::get<1>(result_);
    } else {
      return std::move(std::get<1>(result_));
    }
  }

 private:
  using stored = std::conditional_t<
      std::is_void_v<T>, std::monostate,
      std::conditional_t<std::is_reference_v<T>, std::remove_reference_t<T>*, T>>;
  std::variant<std::monostate, stored, std::exception_ptr> result_;
};

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

  /// A child's end (after its result is stored, with its wrapper's handle cleared): returns
  /// the parent to go on with by symmetric transfer, or noop.
  std::coroutine_handle<> child_done(std::size_t index) noexcept {
    std::size_t none = kNone;
    if (stopper_ != nullptr &&
        winner_.compare_exchange_strong(none, index, std::memory_order_acq_rel)) {
      stopper_->request_stop();
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
  static join_child run(task<T>& child, child_slot<T>& slot) {
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
  static_cast<child_slot<T>*>(slot)->set_error(std::make_exception_ptr(task_cancelled{}));
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
void prepare_child(join_state& join, std::size_t index, task<T>& child, child_slot<T>& slot,
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

/// Runs the tasks concurrently and yields all their results, in argument order, as a tuple (a
/// void task contributes std::monostate). The children start one after another on the calling
/// thread, each running until it first suspends; from then on they go on where their awaited
/// operations resume them — interleaved on this thread, or in parallel if they schedule()
/// elsewhere. The awaiting task resumes on its home once every child has finished. If
/// children throw, all the others still finish and the exception of the first child to throw
/// (in argument order) is rethrown. The children inherit the awaiting task's stop token.
/// Throws std::logic_error for an empty (or already awaited) task, std::bad_alloc.
template <typename... T>
task<std::tuple<detail::child_value_t<T>...>> when_all(task<T>... children) {
  constexpr std::size_t n = sizeof...(T);
  detail::branch* parent = co_await detail::branch_reader{};
  const std::stop_token stop = parent != nullptr ? parent->token : std::stop_token();
  detail::join_state join(n);
  std::tuple<detail::child_slot<T>...> slots;
  std::array<detail::child_branch, n> branches;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (detail::prepare_child(join, I, children, std::get<I>(slots), branches[I], stop, parent), ...);
  }
  (std::index_sequence_for<T...>{});
  co_await detail::join_awaiter(join);
  co_return [&]<std::size_t... I>(std::index_sequence<I...>) {
    // Braces: the slots are taken (and the first failure rethrown) in argument order.
    return std::tuple<detail::child_value_t<T>...>{ std::get<I>(slots).take()... };
  }
  (std::index_sequence_for<T...>{});
}

/// when_all() over a vector of tasks: the results in the vector's order (std::monostate for
/// task<void>). An empty vector yields an empty vector at once.
template <typename T>
task<std::vector<detail::child_value_t<T>>> when_all(std::vector<task<T>> children) {
  const std::size_t n = children.size();
  detail::branch* parent = co_await detail::branch_reader{};
  const std::stop_token stop = parent != nullptr ? parent->token : std::stop_token();
  detail::join_state join(n);
  std::vector<detail::child_slot<T>> slots(n);
  std::unique_ptr<detail::child_branch[]> branches(new detail::child_branch[n]);
  for (std::size_t i = 0; i < n; ++i) {
    detail::prepare_child(join, i, children[i], slots[i], branches[i], stop, parent);
  }
  co_await detail::join_awaiter(join);
  std::vector<detail::child_value_t<T>> results;
  results.reserve(n);
  for (auto& slot : slots) {
    results.push_back(slot.take());
  }
  co_return results;
}

/// Runs the tasks concurrently (as when_all() does) until the first of them finishes; then
/// asks the others to stop (their stop token, which also follows the awaiting task's) and
/// waits for them, so nothing outlives the call. Yields a variant whose index() is the first
/// finisher's position and which holds its value (std::monostate for a void task); if that
/// child threw, its exception is rethrown instead. What the others return or throw (typically
/// operation_canceled) is discarded. Throws like when_all().
template <typename... T>
task<std::variant<detail::child_value_t<T>...>> when_any(task<T>... children) {
  static_assert(sizeof...(T) > 0, "when_any needs at least one task");
  constexpr std::size_t n = sizeof...(T);
  detail::branch* parent = co_await detail::branch_reader{};
  std::stop_source stop_children;
  struct forward_stop {
    std::stop_source* target;
    void operator()() const noexcept { target->request_stop(); }
  };
  std::optional<std::stop_callback<forward_stop>> follow_parent;
  if (parent != nullptr && parent->token.stop_possible()) {
    follow_parent.emplace(parent->token, forward_stop{ &stop_children });
  }
  detail::join_state join(n);
  join.stop_others_with(&stop_children);
  std::tuple<detail::child_slot<T>...> slots;
  std::array<detail::child_branch, n> branches;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (detail::prepare_child(join, I, children, std::get<I>(slots), branches[I],
                           stop_children.get_token(), parent),
     ...);
  }
  (std::index_sequence_for<T...>{});
  co_await detail::join_awaiter(join);
  const std::size_t winner = join.winner();
  using result = std::variant<detail::child_value_t<T>...>;
  std::optional<result> chosen;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((I == winner ? (void)chosen.emplace(std::in_place_index<I>, std::get<I>(slots).take())
                  : (void)0),
     ...);
  }
  (std::index_sequence_for<T...>{});
  co_return std::move(*chosen);
}

}  // namespace cyan::dispatch
