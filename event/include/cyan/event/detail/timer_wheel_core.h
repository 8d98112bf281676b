#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "cyan/common/noncopyable.h"
#include "cyan/common/unique_function.h"
#include "cyan/event/detail/wheel_callback.h"

namespace cyan::event::detail {

/// True for what a timer wheel can call: no arguments, any result, called as an lvalue.
template <typename F>
concept wheel_callable = std::is_invocable_v<std::add_lvalue_reference_t<std::decay_t<F>>>;

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
/// Entries live in a slab with a free list, linked into circular, doubly linked lists through
/// sentinel nodes, so insert and cancel are O(1) and allocation-free once the slab has grown to
/// the peak number of entries (for closures stored inline, see wheel_callback_slot). The slab is
/// split in two arrays indexed alike: 16-byte links (list pointers, the list's sentinel and a
/// stamp), all that cancel touches for a trivially destructible closure, and 32-byte payloads
/// (due tick and callback),
/// written by insert and read when the entry fires or cascades. A closure that is running or
/// being destroyed is first moved off the slab, so it may insert (and grow the slab).
/// A node's stamp holds, from bit 2 up, how many times the node has been freed; bit 0 is set
/// while it holds an entry (never for sentinels and never used nodes, whose stamp is 0) and
/// bit 1 when that entry's closure needs destroying. An id is (stamp >> 1) << 32 | index, so it
/// is never reused (a node whose count would wrap is retired), and an id names a live entry
/// exactly when its node's stamp matches: cancel needs no other check. Id 0 is never issued.
///
/// The first entry of a list may have a stale `prev`: taking the first entry out (every run, and
/// the cancel of the oldest timeout in a slot) leaves its successor's `prev` alone, so it writes
/// only the sentinel, never a node further on whose cache line is usually cold. A node is first
/// exactly when its sentinel's `next` names it, and every other node's `prev` is exact. A cascade
/// detaches its whole list and re-links each entry where it belongs, unlinking nothing.
///
/// Each slot has a mark byte, set (one plain store) when an entry is put there; next_event()
/// packs a level's marks into a 64-bit mask, so the next slot with work is a count of trailing
/// zeros away. cancel() leaves the mark of a slot it empties; next_event() drops such marks when
/// it meets them and processing a slot clears its mark, so a cancel does no bookkeeping beyond
/// unlinking.
///
/// Not thread-safe: one thread uses a core. Callbacks may insert and cancel (any entry) while
/// advance_to() runs; they must not call advance_to() or destroy the core.
class timer_wheel_core : noncopyable {
 public:
  using tick_type = std::uint64_t;
  using id_type = std::uint64_t;
  /// Receives an exception thrown by a callback. Must not throw.
  using error_handler = unique_function<void(std::exception_ptr)>;

  /// next_event() when the core holds nothing.
  static constexpr tick_type kNever = ~tick_type{ 0 };
  static constexpr unsigned kMaxLevels = 8;
  static constexpr unsigned kMaxSlotBits = 6;  // a level's occupancy is one 64-bit mask
  static constexpr std::size_t kMaxSentinels = std::size_t{ kMaxLevels } << kMaxSlotBits;

  /// `levels` in [1, kMaxLevels], `slot_bits` in [1, kMaxSlotBits] (so the levels span at most
  /// 2^48 ticks); throws std::invalid_argument otherwise, or when `on_error` is empty. The
  /// current tick starts at 0.
  explicit timer_wheel_core(error_handler on_error, unsigned levels = 6, unsigned slot_bits = 6);
  /// Destroys every callback still held without running it (clear()).
  ~timer_wheel_core() { clear(); }

  /// Destroys every entry without running it, leaving the core empty. A callback's destructor
  /// may insert and cancel meanwhile: what it inserts is destroyed too before clear() returns.
  /// Must not be called from a callback.
  void clear() noexcept;

  /// Adds `f` (any callable with no arguments; its result is ignored) to run at tick `due`; a
  /// due tick not after now() is moved to now() + 1 (an entry never fires during the tick that is
  /// being processed, so a callback that posts with no delay runs on the next tick, not in an
  /// endless loop). Throws std::invalid_argument when `f` is empty (a null function pointer, an
  /// empty cyan::unique_function or std::function), std::bad_alloc when the slab cannot grow or
  /// a closure too big for inline storage cannot be boxed, and what moving `f` throws; nothing is
  /// added then.
  template <wheel_callable F>
  id_type insert(tick_type due, F&& f) {
    if constexpr (std::is_constructible_v<bool, const std::decay_t<F>&>) {
      if (!static_cast<bool>(f)) {
        throw std::invalid_argument("timer_wheel: empty callback");
      }
    }
    const index_type i = allocate();
    try {
      wheel_emplace(payloads_[i].fn, std::forward<F>(f));
    } catch (...) {
      push_free(i);  // never linked, no id issued: back as it was
      throw;
    }
    return link_new(i, due, wheel_needs_destroy<std::decay_t<F>>);
  }
  [[noreturn]] id_type insert(tick_type due, std::nullptr_t);

  /// Removes the entry `id` and destroys its callback. False when `id` is unknown, already fired
  /// or already cancelled. Never throws.
  bool cancel(id_type id) noexcept;

  /// Moves the entry `id` to tick `due` when that is later than its due tick; it then runs after
  /// the entries already due there. False when `id` names no waiting entry. Never throws.
  bool postpone(id_type id, tick_type due) noexcept;

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
  /// when the core is empty. Drops the marks of slots that cancel() emptied on the way.
  [[nodiscard]] tick_type next_event() noexcept;

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
  static constexpr index_type kNone = ~index_type{ 0 };  // end of the free list
  // node::stamp bits (see the class comment).
  static constexpr std::uint32_t kLive = 1;
  static constexpr std::uint32_t kNeedsDestroy = 2;

  // The hot part of an entry: 16 bytes.
  struct node {
    index_type prev = kNone;  // stale in a list's first node (see the class comment)
    index_type next = kNone;  // also the free list's link
    std::uint32_t stamp = 0;
    index_type list = kNone;  // the sentinel of the list holding the node
  };
  struct payload {  // the cold half: 32 bytes
    tick_type due;
    wheel_callback_slot fn;
  };
  static_assert(sizeof(node) == 16 && sizeof(payload) == 32);
  // Where list_for() puts an entry, by the level of the highest digit where due and now differ.
  struct placement {
    std::uint16_t base;   // the level's first sentinel (the overflow list's)
    std::uint16_t mask;   // slots - 1 (0 for the overflow list)
    std::uint32_t shift;  // level * slot_bits: the digit's position
  };
  static_assert(std::is_trivially_copyable_v<payload>);

  index_type allocate();
  index_type allocate_new();  // allocate() when the free list is empty: grows the slab
  void grow(std::size_t capacity);
  void destroy_callback(index_type i) noexcept;
  void prefetch_after_first(index_type list) noexcept;
  void push_free(index_type i) noexcept { nodes_[i].next = std::exchange(free_head_, i); }
  id_type link_new(index_type i, tick_type due, bool needs_destroy) noexcept;
  // Marks a node free (the next count, no flags) and puts it on the free list.
  void release(index_type i) noexcept;
  [[nodiscard]] static std::uint32_t freed(std::uint32_t stamp) noexcept {
    return (stamp | kLive | kNeedsDestroy) + 1;  // 0 when the count wraps
  }
  [[nodiscard]] static bool is_live(const node& n) noexcept { return (n.stamp & kLive) != 0; }
  // True when `id` names an entry waiting to run.
  [[nodiscard]] bool names_waiting(id_type id) const noexcept;
  [[nodiscard]] id_type id_of(index_type i) const noexcept {
    return id_type{ nodes_[i].stamp >> 1 } << 32 | i;
  }
  void free_node(index_type i) noexcept;
  // now + 1, out of line (see link_new).
  [[gnu::cold, gnu::noinline]] static tick_type next_tick(tick_type now) noexcept {
    return now + 1;
  }
  // Appends node i to `list`, stamping it `stamp`, and marks the slot.
  void link_back(index_type list, index_type i, std::uint32_t stamp) noexcept;
  void mark_occupied(index_type list) noexcept { marked_[list] = 1; }
  void clear_occupied(index_type list) noexcept { marked_[list] = 0; }
  // Bit s: slot s of `level` is marked.
  [[nodiscard]] std::uint64_t level_marks(unsigned level) const noexcept;
  // Takes node i out of its list (its slot's mark stays; see the class comment).
  void unlink(index_type i) noexcept;
  [[nodiscard]] bool list_empty(index_type list) const noexcept {
    return nodes_[list].next == list;
  }
  // The list for an entry due at `due` when the current tick is `now` (default: now()).
  [[nodiscard]] index_type list_for(tick_type due, tick_type now) const noexcept;
  [[nodiscard]] index_type list_for(tick_type due) const noexcept { return list_for(due, now_); }
  void place(index_type i) noexcept;
  [[nodiscard]] index_type current_slot() const noexcept {
    return static_cast<index_type>(now_ & (slots_ - 1));
  }
  void process_tick() noexcept;
  void cascade(unsigned level) noexcept;
  void cascade_overflow() noexcept;
  void run_current_slot() noexcept;
  // Takes the first entry out of `list` and runs it.
  void run_first(index_type list) noexcept;

  // The slab: capacity_ nodes and payloads, indexed alike; sentinels first, then entries. Every
  // entry node not linked is on the free list (never used ones too, threaded in index order by
  // grow()). A payload's closure lives while its node is linked.
  std::unique_ptr<node[]> nodes_;
  std::unique_ptr<payload[]> payloads_;
  std::size_t capacity_ = 0;
  index_type free_head_ = kNone;
  tick_type now_ = 0;
  std::size_t size_ = 0;
  unsigned levels_;
  unsigned slot_bits_;
  index_type slots_;        // per level
  index_type overflow_;     // sentinel of the overflow list
  index_type first_entry_;  // first non-sentinel index
  // By sentinel index: 1 when the slot has had an entry put in it since it was last processed or
  // found empty (a mark without entries is one cancel() left). The overflow list's is never
  // read, which keeps link branch-free; 8 bytes of slack let level_marks() read whole words.
  std::array<std::uint8_t, kMaxSentinels + 8> marked_{};
  // By level (levels_: the overflow list). due ^ now is at most level_max_[k] exactly when the
  // two differ in no digit above level k; level_max_[levels_] is kNever.
  std::array<placement, kMaxLevels + 1> placement_{};
  std::array<tick_type, kMaxLevels + 1> level_max_{};
  error_handler on_error_;
  bool advancing_ = false;
  bool interrupted_ = false;
};

// The insert and cancel paths, inline: they run once per timer_wheel post and cancel.

inline timer_wheel_core::index_type timer_wheel_core::allocate() {
  const index_type i = free_head_;
  if (i == kNone) [[unlikely]] {
    return allocate_new();
  }
  free_head_ = nodes_[i].next;
  return i;
}

inline timer_wheel_core::id_type timer_wheel_core::link_new(index_type i, tick_type due,
                                                            bool needs_destroy) noexcept {
  const tick_type now = now_;
  if (due <= now) [[unlikely]] {
    due = next_tick(now);  // a call, so a predicted branch rather than a select on the way
  }
  payloads_[i].due = due;
  const std::uint32_t stamp = nodes_[i].stamp | kLive | (needs_destroy ? kNeedsDestroy : 0);
  const index_type list = list_for(due, now);
  link_back(list, i, stamp);
  ++size_;
  return id_type{ stamp >> 1 } << 32 | i;
}

inline bool timer_wheel_core::names_waiting(id_type id) const noexcept {
  const auto i = static_cast<index_type>(id);
  // Sentinels, never used and free nodes lack kLive, so they never match.
  return i < capacity_ && nodes_[i].stamp == (id >> 32 << 1 | kLive);
}

inline bool timer_wheel_core::cancel(id_type id) noexcept {
  if (!names_waiting(id)) {
    return false;
  }
  const auto i = static_cast<index_type>(id);
  unlink(i);
  --size_;
  // Retired before the callback is destroyed, and freed after: a destructor that cancels sees
  // it gone, one that inserts cannot be handed this node.
  const std::uint32_t stamp = nodes_[i].stamp;
  nodes_[i].stamp = freed(stamp);
  if ((stamp & kNeedsDestroy) != 0) {
    destroy_callback(i);
  }
  free_node(i);
  return true;
}

inline void timer_wheel_core::free_node(index_type i) noexcept {
  if (nodes_[i].stamp == 0) {
    return;  // the count wrapped: reusing the node could reissue an id, so it is retired
  }
  push_free(i);
}

inline void timer_wheel_core::link_back(index_type list, index_type i,
                                        std::uint32_t stamp) noexcept {
  node* const nodes = nodes_.get();
  const index_type tail = nodes[list].prev;
  nodes[i] = node{ tail, list, stamp, list };  // the sentinel is its next
  nodes[tail].next = i;
  nodes[list].prev = i;
  mark_occupied(list);
}

inline void timer_wheel_core::unlink(index_type i) noexcept {
  const node& entry = nodes_[i];
  const index_type next = entry.next;
  node& head = nodes_[entry.list];
  if (head.next == i) {
    // The first node's prev may be stale, and its successor's prev is left as it is (that node
    // is first now), unless the list is empty now.
    head.next = next;
    if (next == entry.list) {
      head.prev = next;
    }
  } else {
    nodes_[entry.prev].next = next;
    nodes_[next].prev = entry.prev;
  }
}

inline timer_wheel_core::index_type timer_wheel_core::list_for(tick_type due,
                                                               tick_type now) const noexcept {
  // The level is found by comparisons, which the branch predictor sees through (an entry's level
  // usually repeats), rather than from the highest differing bit and a table lookup: the
  // slot's address then waits only for the shift below, not for the level.
  const tick_type differing = due ^ now;
  unsigned level = 0;
  while (differing > level_max_[level]) {
    ++level;
  }
  const placement& where = placement_[level];
  return where.base + (static_cast<index_type>(due >> where.shift) & where.mask);
}

}  // namespace cyan::event::detail
