#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <stop_token>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "cyan/dispatch/detail/forward_stop.h"
#include "cyan/dispatch/detail/join_state.h"
#include "cyan/dispatch/task.h"

namespace cyan::dispatch {

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
  std::tuple<detail::outcome<T>...> slots;
  std::array<detail::child_branch, n> branches;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (detail::prepare_child(join, I, children, std::get<I>(slots), branches[I], stop, parent), ...);
  }
  (std::index_sequence_for<T...>{});
  co_await detail::join_awaiter(join);
  co_return [&]<std::size_t... I>(std::index_sequence<I...>) {
    // Braces: the slots are taken (and the first failure rethrown) in argument order.
    return std::tuple<detail::child_value_t<T>...>{ detail::take_child(std::get<I>(slots))... };
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
  std::vector<detail::outcome<T>> slots(n);
  std::unique_ptr<detail::child_branch[]> branches(new detail::child_branch[n]);
  for (std::size_t i = 0; i < n; ++i) {
    detail::prepare_child(join, i, children[i], slots[i], branches[i], stop, parent);
  }
  co_await detail::join_awaiter(join);
  std::vector<detail::child_value_t<T>> results;
  results.reserve(n);
  for (auto& slot : slots) {
    results.push_back(detail::take_child(slot));
  }
  co_return results;
}

/// Runs the children concurrently (as when_all() does) until the first of them finishes; then
/// asks the others to stop (their stop token, which also follows the awaiting task's) and
/// waits for them, so nothing outlives the call. Yields a variant whose index() is the first
/// finisher's position and which holds its value (std::monostate for a void one); if that
/// child threw, its exception is rethrown instead. Throws like when_all().
///
/// A child is a task, or one of cyan's operations itself, not awaited yet: a channel's
/// receive() or send(), an async_semaphore's acquire(), an async_mutex's scoped_lock(), an
/// async_event's or async_latch's wait() — `co_await when_any(a.receive(), b.receive())` is a
/// select. An operation child finishes when its operation completes, and only one child wins:
/// an operation that completes while or after another child won gives back what it got — a
/// received item to the front of its channel (it leaves next, in its order), a unit to its
/// semaphore, the lock to the next waiter — and ends cancelled, so a select loop loses no item.
/// A send cannot be taken back: one that lost after its item went in leaves it sent. What a
/// losing task child returns is discarded (typically it throws operation_canceled): to select
/// without losing, give when_any the operations, not tasks that await them.
template <typename... C>
requires(detail::any_child<C>&&...)
    task<std::variant<detail::child_value_t<detail::child_result_t<C>>...>> when_any(
        C... children) {
  static_assert(sizeof...(C) > 0, "when_any needs at least one task");
  constexpr std::size_t n = sizeof...(C);
  detail::branch* parent = co_await detail::branch_reader{};
  std::stop_source stop_children;
  std::optional<detail::stop_forwarder> follow_parent;
  if (parent != nullptr && parent->token.stop_possible()) {
    follow_parent.emplace(parent->token, detail::forward_stop{ &stop_children });
  }
  detail::join_state join(n);
  join.stop_others_with(&stop_children);
  auto tasks = [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::tuple<task<detail::child_result_t<C>>...>{ detail::as_child_task(
        std::move(children), join, I)... };
  }
  (std::index_sequence_for<C...>{});
  std::tuple<detail::outcome<detail::child_result_t<C>>...> slots;
  std::array<detail::child_branch, n> branches;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (detail::prepare_child(join, I, std::get<I>(tasks), std::get<I>(slots), branches[I],
                           stop_children.get_token(), parent),
     ...);
  }
  (std::index_sequence_for<C...>{});
  co_await detail::join_awaiter(join);
  const std::size_t winner = join.winner();
  using result = std::variant<detail::child_value_t<detail::child_result_t<C>>...>;
  std::optional<result> chosen;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((I == winner
          ? (void)chosen.emplace(std::in_place_index<I>, detail::take_child(std::get<I>(slots)))
          : (void)0),
     ...);
  }
  (std::index_sequence_for<C...>{});
  co_return std::move(*chosen);
}

}  // namespace cyan::dispatch
