#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace cyan {

template <typename Signature>
class unique_function;

/// A move-only, type-erased callable: what std::function would be if it accepted move-only
/// closures (a std::packaged_task, a std::unique_ptr capture). std::move_only_function is C++23.
///
/// A closure of at most `inline_capacity` bytes whose move constructor and destructor are
/// noexcept is stored inline, with no allocation; any other is moved to the heap once, on
/// construction. Moving a unique_function never allocates and never throws (nor runs the
/// destructor of a closure whose destructor may throw).
///
/// A closure's destructor may throw (a capture with a `noexcept(false)` destructor): reset()
/// propagates that exception. The destructor, move assignment and `= nullptr` are noexcept, so
/// there it terminates the process: whoever may hold such a closure destroys it with reset().
/// Not thread-safe: one object is used by one thread at a time (it may be moved between threads).
template <typename R, typename... Args>
class unique_function<R(Args...)> {
 public:
  /// Bytes available for a closure stored without allocation (six pointers' worth).
  static constexpr std::size_t inline_capacity = 48;

  unique_function() noexcept = default;
  unique_function(std::nullptr_t) noexcept {}

  /// Wraps `f`; with R = void, what `f` returns is discarded. Throws whatever moving or copying
  /// `f` throws, or std::bad_alloc when `f` does not fit inline and the allocation fails;
  /// `*this` is then not constructed.
  template <typename F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, unique_function> &&
           std::is_invocable_r_v<R, std::decay_t<F>&, Args...>)
      unique_function(
          F&& f) {  // NOLINT(google-explicit-constructor): a callable converts implicitly
    using closure = std::decay_t<F>;
    if constexpr (stored_inline<closure>) {
      ::new (static_cast<void*>(storage_)) closure(std::forward<F>(f));
      ops_ = &inline_ops<closure>;
    } else {
      auto heap = std::make_unique<closure>(std::forward<F>(f));
      ::new (static_cast<void*>(storage_)) closure*(heap.release());
      ops_ = &heap_ops<closure>;
    }
  }

  unique_function(unique_function&& other) noexcept { take(other); }

  unique_function& operator=(unique_function&& other) noexcept {
    if (this != &other) {
      clear();
      take(other);
    }
    return *this;
  }

  unique_function& operator=(std::nullptr_t) noexcept {
    clear();
    return *this;
  }

  ~unique_function() { clear(); }

  /// Destroys the held closure, if any, leaving `*this` empty. Throws what the closure's
  /// destructor throws; the closure is destroyed and its memory freed all the same.
  void reset() {
    if (ops_ != nullptr) {
      std::exchange(ops_, nullptr)->destroy(storage_);
    }
  }

  /// Calls the wrapped closure. Throws std::bad_function_call when empty, and whatever the
  /// closure throws.
  R operator()(Args... args) {
    if (ops_ == nullptr) {
      throw std::bad_function_call();
    }
    return ops_->invoke(storage_, std::forward<Args>(args)...);
  }

  /// True when a closure is held.
  explicit operator bool() const noexcept { return ops_ != nullptr; }

  friend bool operator==(const unique_function& f, std::nullptr_t) noexcept { return !f; }

  void swap(unique_function& other) noexcept {
    unique_function tmp(std::move(other));
    other = std::move(*this);
    *this = std::move(tmp);
  }

  /// True when a closure of type F is stored without allocating.
  template <typename F>
  static constexpr bool stored_inline =
      sizeof(F) <= inline_capacity && alignof(F) <= alignof(std::max_align_t) &&
      std::is_nothrow_move_constructible_v<F>&& std::is_nothrow_destructible_v<F>;

 private:
  struct operations {
    R (*invoke)(void* storage, Args&&... args);
    // Move-constructs the closure from `from` into `to`, then destroys the one in `from`.
    void (*relocate)(void* from, void* to) noexcept;
    // May throw what the closure's destructor throws (only a heap-stored closure's may).
    void (*destroy)(void* storage);
  };

  // Invokes `f`; for R = void a result is discarded (like std::invoke_r, which is C++23).
  template <typename F>
  static R call(F& f, Args&&... args) {
    if constexpr (std::is_void_v<R>) {
      std::invoke(f, std::forward<Args>(args)...);
    } else {
      return std::invoke(f, std::forward<Args>(args)...);
    }
  }

  template <typename F>
  static constexpr operations inline_ops{
    [](void* storage, Args&&... args) -> R {
      return call(*static_cast<F*>(storage), std::forward<Args>(args)...);
    },
    [](void* from, void* to) noexcept {
      ::new (to) F(std::move(*static_cast<F*>(from)));
      static_cast<F*>(from)->~F();
    },
    [](void* storage) noexcept { static_cast<F*>(storage)->~F(); },  // stored_inline: nothrow
  };

  template <typename F>
  static constexpr operations heap_ops{
    [](void* storage, Args&&... args) -> R {
      return call(**static_cast<F**>(storage), std::forward<Args>(args)...);
    },
    [](void* from, void* to) noexcept { ::new (to) F*(*static_cast<F**>(from)); },
    // The delete expression frees the memory even when the destructor throws.
    [](void* storage) { delete *static_cast<F**>(storage); },
  };

  void take(unique_function& other) noexcept {
    if (other.ops_ != nullptr) {
      other.ops_->relocate(other.storage_, storage_);
      ops_ = std::exchange(other.ops_, nullptr);
    }
  }

  // reset() where nothing may throw: a throwing closure destructor terminates here.
  void clear() noexcept { reset(); }

  alignas(std::max_align_t) unsigned char storage_[inline_capacity];
  const operations* ops_ = nullptr;
};

template <typename R, typename... Args>
void swap(unique_function<R(Args...)>& a, unique_function<R(Args...)>& b) noexcept {
  a.swap(b);
}

}  // namespace cyan
