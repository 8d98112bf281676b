#pragma once

// The machinery behind join.h: join's forked half (a pool_job on the joiner's stack), and
// task_group's counted children.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include "cyan/dispatch/detail/fork_join.h"
#include "cyan/dispatch/detail/outcome.h"
#include "cyan/dispatch/errors.h"

namespace cyan::dispatch::detail {

/// Which half of a join threw first (0: neither yet). Both halves may throw on two threads at
/// once: the first to claim it wins.
class first_failure {
 public:
  void claim(int side) noexcept {
    int none = 0;
    // relaxed: only which side wins matters; each side's exception is published by the join's
    // own completion (the completion_word, or running inline).
    (void)side_.compare_exchange_strong(none, side, std::memory_order_relaxed);
  }
  [[nodiscard]] int side() const noexcept { return side_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int> side_{ 0 };
};

/// join's forked half: `f` and its outcome, run once by the joiner (popped back) or a thief.
/// Lives on the joiner's stack; the joiner returns only once done().
template <typename F>
class join_job final : public pool_job, public help_target {
 public:
  using result_type = std::invoke_result_t<F&>;

  join_job(F& f, first_failure& failure) noexcept
      : pool_job{ &execute }, f_(f), failure_(failure) {}

  /// Runs f and stores its outcome (the joiner's inline run, or through execute()).
  void run() noexcept {
    auto call = [this]() -> result_type { return f_(); };
    outcome_.set_result_of(call);
    if (outcome_.has_error()) {
      failure_.claim(1);
    }
  }

  bool done() noexcept override { return completion_.done(); }
  void park(std::chrono::nanoseconds timeout) noexcept override { completion_.park(timeout); }

  outcome<result_type>& result() noexcept { return outcome_; }

 private:
  // A join's half always runs, even under stop(discard): its joiner started already.
  static void execute(pool_job* job, bool) noexcept {
    auto* self = static_cast<join_job*>(job);
    self->run();
    self->completion_.mark_done();  // the last touch: the joiner may return at once
  }

  F& f_;
  first_failure& failure_;
  outcome<result_type> outcome_;
  completion_word completion_;
};

/// task_group's shared state: the count of children not finished, the first exception, the
/// cancellation flag. The count is a futex word: 2 per child, bit 0 set while someone parks.
class group_state : public help_target {
 public:
  void child_started() noexcept {
    // relaxed: the child's post publishes it; only the finishes must be ordered (release).
    word_.fetch_add(2, std::memory_order_relaxed);
  }
  /// The last touch of a child: its finish. [any thread]
  void child_finished() noexcept {
    // acq_rel: releases the child's work (and error_) to the waiter's acquire in done().
    const std::uint32_t before = word_.fetch_sub(2, std::memory_order_acq_rel);
    if (before == 3) {  // the last child, and a waiter parks
      futex_wake_every(word_);
    }
  }
  void fail(std::exception_ptr error) noexcept {
    // acq_rel: one winner; its store of error_ is released by its child_finished().
    if (!failed_.exchange(true, std::memory_order_acq_rel)) {
      error_ = std::move(error);
    }
    cancel();
  }
  void cancel() noexcept { cancelled_.store(true, std::memory_order_relaxed); }  // a hint
  [[nodiscard]] bool cancelled() const noexcept {
    return cancelled_.load(std::memory_order_relaxed);
  }
  bool done() noexcept override {
    // acquire: pairs with child_finished()'s release.
    return (word_.load(std::memory_order_acquire) >> 1) == 0;
  }
  void park(std::chrono::nanoseconds timeout) noexcept override {
    // acquire: as done().
    const std::uint32_t before = word_.fetch_or(1, std::memory_order_acquire);
    if ((before >> 1) != 0) {
      futex_wait_for(word_, before | 1, timeout);
    }
  }
  /// After done(): the first exception (consumed) and the flags reset for the next round.
  std::exception_ptr reset() noexcept {
    word_.fetch_and(~1U, std::memory_order_relaxed);
    cancelled_.store(false, std::memory_order_relaxed);
    std::exception_ptr error = std::move(error_);
    error_ = nullptr;
    failed_.store(false, std::memory_order_relaxed);
    return error;
  }

 private:
  std::atomic<std::uint32_t> word_{ 0 };
  std::atomic<bool> failed_{ false };
  std::atomic<bool> cancelled_{ false };
  std::exception_ptr error_;  // written by fail()'s winner, read after done()
};

/// One task_group child, as posted: runs `f` unless the group was cancelled; destroyed unrun
/// (the pool discarded it, or refused it) it reports task_cancelled. Either way it finishes
/// once, after `f` (and its captures) are gone.
template <typename F>
class group_child {
 public:
  template <typename G>
  group_child(group_state& group, G&& f) : group_(&group), f_(std::in_place, std::forward<G>(f)) {}
  group_child(group_child&& other) noexcept
      : group_(std::exchange(other.group_, nullptr)), f_(std::move(other.f_)), ran_(other.ran_) {
    other.f_.reset();
  }
  group_child& operator=(group_child&&) = delete;
  ~group_child() {
    if (group_ == nullptr) {
      return;
    }
    f_.reset();
    if (!ran_) {
      group_->fail(std::make_exception_ptr(task_cancelled{}));
    }
    group_->child_finished();
  }

  void operator()() noexcept {
    ran_ = true;
    if (group_->cancelled()) {
      return;
    }
    try {
      (*f_)();
    } catch (...) {
      group_->fail(std::current_exception());
    }
  }

 private:
  group_state* group_;
  std::optional<F> f_;
  bool ran_ = false;
};

}  // namespace cyan::dispatch::detail
