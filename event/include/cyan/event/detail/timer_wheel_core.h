#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <vector>

#include "cyan/common/noncopyable.h"
#include "cyan/common/unique_function.h"

namespace cyan::event::detail {

/// The clock-free heart of cyan::event::timer_wheel: a hashed, hierarchical timing wheel
/// (Varghese & Lauck, scheme 7) driven by an abstract tick counter, so it can be tested with a
/// virtual clock.
///
/// Layout: `levels` wheels of 2^slot_bits slots each, plus one overflow list for entries due
/// more than 2^(levels*slot_bits) ticks away. An entry due at tick `d` lives, relative to the
/// current tick `n`, at the level of the highest slot_bits-wide digit in which `d` and `n`
/// differ, in the slot named by `d`'s digit there. When `n` reaches the start of that slot's
/// range, the slot is cascaded: each entry is re-placed one or more levels lower. Level 0 slots
/// hold entries due exactly at one tick. All entries due at the same tick are always in the same
/// list, appended in post order, so equal due ticks fire in post order.
///
/// Entries live in a slab (one vector of nodes, with a free list) linked into circular,
/// doubly linked lists through sentinel nodes, so insert and cancel are O(1) and allocation-free
/// once the slab has grown to the peak number of entries. An id is generation << 32 | index;
/// a node's generation changes every time it is freed and a node whose generation would wrap is
/// retired, so an id is never reused. Id 0 is never issued.
///
/// Not thread-safe: one thread uses a core. Callbacks may insert and cancel (any entry) while
/// advance_to() runs; they must not call advance_to() or destroy the core.
class timer_wheel_core : noncopyable {
 public:
  using tick_type = std::uint64_t;
  using id_type = std::uint64_t;
  using callback = unique_function<void()>;
  /// Receives an exception thrown by a callback. Must not throw.
  using error_handler = unique_function<void(std::exception_ptr)>;

  /// next_event() when the core holds nothing.
  static constexpr tick_type kNever = ~tick_type{ 0 };
  static constexpr unsigned kMaxLevels = 8;
  static constexpr unsigned kMaxSlotBits = 6;  // a level's occupancy is one 64-bit mask

  /// `levels` in [1, kMaxLevels], `slot_bits` in [1, kMaxSlotBits] (so the levels span at most
  /// 2^48 ticks); throws std::invalid_argument otherwise, or when `on_error` is empty. The
  /// current tick starts at 0.
  explicit timer_wheel_core(error_handler on_error, unsigned levels = 6, unsigned slot_bits = 6);
  /// Destroys every callback still held without running it.
  ~timer_wheel_core();

  /// Adds `f` to run at tick `due`; a due tick not after now() is moved to now() + 1 (an entry
  /// never fires during the tick that is being processed, so a callback that posts with no delay
  /// runs on the next tick, not in an endless loop). Throws std::bad_alloc when the slab cannot
  /// grow (nothing is added then).
  id_type insert(tick_type due, callback f);

  /// Removes the entry `id` and destroys its callback. False when `id` is unknown, already fired
  /// or already cancelled. Never throws.
  bool cancel(id_type id) noexcept;

  /// Runs, in due-tick then post order, every entry due at or before `target`, and moves now()
  /// to `target` (never backwards). Callback exceptions go to the error handler and the rest
  /// still run. Returns early, leaving now() at the tick being processed, when interrupt() is
  /// called from a callback; the rest of that tick's entries run first on the next call.
  /// Must not be called from a callback.
  void advance_to(tick_type target) noexcept;

  /// Makes the running advance_to() return after the current callback.
  void interrupt() noexcept { interrupted_ = true; }

  /// The earliest tick at which advance_to() has work (an entry to run, or a slot to cascade
  /// closer to its due tick): now() itself when an interrupted tick has entries left, kNever
  /// when the core is empty.
  [[nodiscard]] tick_type next_event() const noexcept;

  /// The last tick processed.
  [[nodiscard]] tick_type now() const noexcept { return now_; }
  /// Entries waiting to run.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// True while advance_to() runs.
  [[nodiscard]] bool advancing() const noexcept { return advancing_; }
  /// Makes room for `entries` entries in total, so that holding that many never allocates.
  /// Throws std::bad_alloc, or std::length_error beyond 2^32 entries.
  void reserve(std::size_t entries);

 private:
  using index_type = std::uint32_t;
  static constexpr index_type kNone =
      ~index_type{ 0 };  // end of the free list; node::list of a free node

  struct node {
    callback fn;
    tick_type due = 0;
    index_type prev = kNone;
    index_type next = kNone;  // also the free list's link
    std::uint32_t generation = 1;
    index_type list = kNone;  // the sentinel of the list holding this node; kNone when free
  };

  index_type allocate();
  // Marks a node free (a new generation) and puts it on the free list.
  void release(index_type i) noexcept;
  void free_node(index_type i) noexcept;
  void link_back(index_type list, index_type i) noexcept;
  void unlink(index_type i) noexcept;
  [[nodiscard]] bool list_empty(index_type list) const noexcept {
    return nodes_[list].next == list;
  }
  [[nodiscard]] index_type list_for(tick_type due) const noexcept;
  void place(index_type i) noexcept;
  [[nodiscard]] index_type current_slot() const noexcept {
    return static_cast<index_type>(now_ & (slots_ - 1));
  }
  void process_tick() noexcept;
  void cascade(unsigned level) noexcept;
  void cascade_overflow() noexcept;
  void run_current_slot() noexcept;
  void run_one(index_type i) noexcept;

  std::vector<node> nodes_;  // sentinels first, then entries
  index_type free_head_ = kNone;
  tick_type now_ = 0;
  std::size_t size_ = 0;
  unsigned levels_;
  unsigned slot_bits_;
  index_type slots_;                                  // per level
  index_type overflow_;                               // sentinel of the overflow list
  index_type first_entry_;                            // first non-sentinel index
  std::array<std::uint64_t, kMaxLevels> occupied_{};  // bit s of [k]: level k slot s non-empty
  std::array<unsigned char, 65> level_of_width_{};    // bit_width(due ^ now) -> level
  error_handler on_error_;
  bool advancing_ = false;
  bool interrupted_ = false;
};

}  // namespace cyan::event::detail
