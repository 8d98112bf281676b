#pragma once

#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace cyan::event::detail {

/// How a timer_wheel entry's closure, stored in a wheel_callback_slot, is called, moved and
/// destroyed. One constant instance per closure type.
struct wheel_callback_ops {
  void (*invoke)(void* storage);
  // Move-constructs the closure at `to` from the one at `from`, then destroys the one at `from`;
  // nullptr when copying the slot's bytes does that.
  void (*relocate)(void* from, void* to) noexcept;
  void (*destroy)(void* storage) noexcept;  // nullptr when there is nothing to destroy
  // Asks the closure to prefetch what it will touch when it runs (see wheel_prefetchable);
  // nullptr when it has nothing to ask for.
  void (*prefetch)(const void* storage, unsigned step) noexcept;
};

/// A closure that can prefetch what it will touch: `f.prefetch(1)` a few entries before its
/// turn (it may load its own bytes' pointers only), `f.prefetch(0)` closer to it (what step 1
/// prefetched is in cache by then: it may follow it one level further). Running
/// many due entries that each point to memory touched for the first time in a while — 100,000
/// sleeping coroutines' frames — is mostly cache misses otherwise.
// (clang-format 14 would split the compound requirement's noexcept onto a line of its own.)
// clang-format off
template <typename F>
concept wheel_prefetchable = requires(const F& f, unsigned step) {
  { f.prefetch(step) } noexcept;
};
// clang-format on

/// The compact, trivially copyable storage of one timer_wheel callback: an ops pointer and a
/// 16-byte buffer holding either the closure itself (kInlineSize bytes at most, 8-byte aligned,
/// nothrow movable) or a pointer to it on the heap. Its lifetime is managed by its owner through
/// the functions below, so a slab of slots is plain memory. Not thread-safe.
struct wheel_callback_slot {
  static constexpr std::size_t kInlineSize = 16;
  const wheel_callback_ops* ops;
  alignas(8) unsigned char storage[kInlineSize];
};

/// True when a closure of type F lives in the slot itself (no allocation).
template <typename F>
inline constexpr bool wheel_stores_inline =
    sizeof(F) <= wheel_callback_slot::kInlineSize &&
    alignof(F) <= 8 && std::is_nothrow_move_constructible_v<F>;

/// True when destroying a slot holding an F does something (a heap box always does).
template <typename F>
inline constexpr bool wheel_needs_destroy =
    !wheel_stores_inline<F> || !std::is_trivially_destructible_v<F>;

template <typename F>
inline constexpr wheel_callback_ops kWheelInlineOps{
  [](void* storage) { std::invoke(*static_cast<F*>(storage)); },
  std::is_trivially_copyable_v<F> ? nullptr
                                  : +[](void* from, void* to) noexcept {
                                      ::new (to) F(std::move(*static_cast<F*>(from)));
                                      static_cast<F*>(from)->~F();
                                    },
  std::is_trivially_destructible_v<F> ? nullptr
                                      : +[](void* storage) noexcept {
                                          static_cast<F*>(storage)->~F();
                                        },
  [] {
    if constexpr (wheel_prefetchable<F>) {
      return +[](const void* storage, unsigned step) noexcept {
        static_cast<const F*>(storage)->prefetch(step);
      };
    } else {
      return static_cast<void (*)(const void*, unsigned) noexcept>(nullptr);
    }
  }(),
};

template <typename F>
inline constexpr wheel_callback_ops kWheelBoxedOps{
  [](void* storage) { std::invoke(**static_cast<F**>(storage)); },
  nullptr,  // the pointer moves with the slot's bytes
  [](void* storage) noexcept { delete *static_cast<F**>(storage); },
  nullptr,
};

/// Constructs `f` into `slot`, which holds nothing. Throws what constructing F throws, or
/// std::bad_alloc when F is boxed and the allocation fails; `slot` then still holds nothing.
template <typename F>
void wheel_emplace(wheel_callback_slot& slot, F&& f) {
  using closure = std::decay_t<F>;
  if constexpr (wheel_stores_inline<closure>) {
    ::new (static_cast<void*>(slot.storage)) closure(std::forward<F>(f));
    slot.ops = &kWheelInlineOps<closure>;
  } else {
    closure* boxed = new closure(std::forward<F>(f));
    ::new (static_cast<void*>(slot.storage)) closure*(boxed);
    slot.ops = &kWheelBoxedOps<closure>;
  }
}

/// Moves the closure held by `from` into `to`, which holds nothing; `from` then holds nothing.
inline void wheel_relocate(wheel_callback_slot& from, wheel_callback_slot& to) noexcept {
  to.ops = from.ops;
  if (from.ops->relocate != nullptr) {
    from.ops->relocate(from.storage, to.storage);
  } else {
    std::memcpy(to.storage, from.storage, sizeof(to.storage));
  }
}

/// See wheel_prefetchable.
inline void wheel_prefetch(const wheel_callback_slot& slot, unsigned step) noexcept {
  if (slot.ops->prefetch != nullptr) {
    slot.ops->prefetch(slot.storage, step);
  }
}

/// Destroys the closure held by `slot`; it then holds nothing.
inline void wheel_destroy(wheel_callback_slot& slot) noexcept {
  if (slot.ops->destroy != nullptr) {
    slot.ops->destroy(slot.storage);
  }
}

/// A closure moved out of a wheel slot onto the stack, destroyed with this object (when
/// `needs_destroy`), so that it outlives any change to the slab while it runs or dies.
class wheel_callback_holder {
 public:
  wheel_callback_holder(wheel_callback_slot& from, bool needs_destroy) noexcept
      : needs_destroy_(needs_destroy) {
    wheel_relocate(from, slot_);
  }
  ~wheel_callback_holder() {
    if (needs_destroy_) {
      wheel_destroy(slot_);
    }
  }
  wheel_callback_holder(const wheel_callback_holder&) = delete;
  wheel_callback_holder& operator=(const wheel_callback_holder&) = delete;

  void operator()() { slot_.ops->invoke(slot_.storage); }

 private:
  wheel_callback_slot slot_;
  bool needs_destroy_;
};

}  // namespace cyan::event::detail
