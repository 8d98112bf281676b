#pragma once

// The one value-or-exception result of cyan's tasks and futures: what a task's promise keeps
// for its awaiter, what a future's shared state keeps for its owner, what a child of
// when_all/when_any keeps for the join.

#include <cassert>
#include <exception>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>
#include <variant>

namespace cyan::dispatch::detail {

/// Empty, a value or an exception: for an object type T, the value itself; for T&, the address
/// of the referred-to object; for void, nothing (an outcome<void> without an exception holds
/// its "value"). Not synchronised: whoever stores it orders that before whoever takes it (a
/// rendezvous, a release/acquire pair). Stored once, taken once; a later store replaces an
/// earlier one.
template <typename T>
class outcome {
 public:
  /// Stores `value` (the referred-to object's address for T&). Throws what constructing T
  /// throws.
  template <typename... V>
  void set_value(V&&... value) {
    if constexpr (std::is_reference_v<T>) {
      result_.template emplace<kValue>(std::addressof(value)...);
    } else {
      result_.template emplace<kValue>(std::forward<V>(value)...);
    }
  }

  /// Stores `error` in place of whatever was stored.
  void set_error(std::exception_ptr error) noexcept {
    result_.template emplace<kError>(std::move(error));
  }

  /// Invokes `f` (as an rvalue) and stores what it returns or throws.
  template <typename F>
  void set_result_of(F& f) noexcept {
    try {
      if constexpr (std::is_reference_v<T>) {
        set_value(std::invoke(std::move(f)));
      } else {
        result_.template emplace<kValue>(std::invoke(std::move(f)));
      }
    } catch (...) {
      set_error(std::current_exception());
    }
  }

  [[nodiscard]] bool has_error() const noexcept { return result_.index() == kError; }

  /// The value (moved out; the object for T&) or, when an exception was stored, rethrows it.
  /// Only once something was stored.
  T take() {
    assert(result_.index() != kNothing);
    if (result_.index() == kError) {
      std::rethrow_exception(std::get<kError>(result_));
    }
    if constexpr (std::is_reference_v<T>) {
      return *std::get<kValue>(result_);
    } else {
      return std::move(std::get<kValue>(result_));
    }
  }

 private:
  // Indexes, not types: T may itself be std::exception_ptr.
  static constexpr std::size_t kNothing = 0;
  static constexpr std::size_t kValue = 1;
  static constexpr std::size_t kError = 2;
  using stored = std::conditional_t<std::is_reference_v<T>, std::remove_reference_t<T>*, T>;

  std::variant<std::monostate, stored, std::exception_ptr> result_;
};

/// outcome<void>: only an exception to keep, so nothing but the exception_ptr (a task<void>'s
/// promise holds one per frame).
template <>
class outcome<void> {
 public:
  void set_value() noexcept { error_ = nullptr; }
  void set_error(std::exception_ptr error) noexcept { error_ = std::move(error); }

  template <typename F>
  void set_result_of(F& f) noexcept {
    try {
      std::invoke(std::move(f));
      set_value();
    } catch (...) {
      set_error(std::current_exception());
    }
  }

  [[nodiscard]] bool has_error() const noexcept { return static_cast<bool>(error_); }

  /// Rethrows the stored exception, if any.
  void take() const {
    if (error_) {
      std::rethrow_exception(error_);
    }
  }

 private:
  std::exception_ptr error_;
};

}  // namespace cyan::dispatch::detail
