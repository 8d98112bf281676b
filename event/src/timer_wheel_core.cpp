#include "cyan/event/detail/timer_wheel_core.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <utility>

namespace cyan::event::detail {

timer_wheel_core::timer_wheel_core(error_handler on_error, unsigned levels, unsigned slot_bits)
    : levels_(levels), slot_bits_(slot_bits), on_error_(std::move(on_error)) {
  if (levels < 1 || levels > kMaxLevels || slot_bits < 1 || slot_bits > kMaxSlotBits) {
    throw std::invalid_argument("timer_wheel_core: unsupported geometry");
  }
  if (!on_error_) {
    throw std::invalid_argument("timer_wheel_core: an error handler is required");
  }
  slots_ = index_type{ 1 } << slot_bits;
  overflow_ = levels * slots_;
  first_entry_ = overflow_ + 1;
  grow(first_entry_);
  for (index_type s = 0; s < first_entry_; ++s) {
    nodes_[s].prev = nodes_[s].next = s;
  }
  for (unsigned level = 0; level < levels; ++level) {
    placement_[level] = placement{ static_cast<std::uint16_t>(level * slots_),
                                   static_cast<std::uint16_t>(slots_ - 1), level * slot_bits };
    level_max_[level] = (tick_type{ 1 } << ((level + 1) * slot_bits)) - 1;
  }
  placement_[levels] = placement{ static_cast<std::uint16_t>(overflow_), 0, 0 };
  level_max_[levels] = kNever;  // where the loop in list_for() stops
}

void timer_wheel_core::clear() noexcept {
  // One at a time, through the public path, so that a callback's destructor that cancels or
  // inserts still finds the core consistent. Until empty: an insert from such a destructor may
  // take a node this pass has already left behind (a freed node is reused first).
  while (size_ != 0) {
    for (std::size_t i = first_entry_; i < capacity_; ++i) {
      if (is_live(nodes_[i])) {
        cancel(id_of(i));
      }
    }
  }
}

void timer_wheel_core::reserve(std::size_t entries) {
  const std::size_t target = first_entry_ + entries;
  if (target > std::numeric_limits<index_type>::max()) {
    throw std::length_error("timer_wheel: too many entries");
  }
  if (target > capacity_) {
    grow(target);
  }
}

timer_wheel_core::id_type timer_wheel_core::insert(tick_type, std::nullptr_t) {
  throw std::invalid_argument("timer_wheel: empty callback");
}

void timer_wheel_core::grow(std::size_t capacity) {
  // Both arrays are allocated first (either may throw, leaving everything as it was), then the
  // nodes are copied and the live closures moved. Both are initialised, so that every page is
  // touched now: first touching a fresh page costs far more than an insert. The new entry nodes
  // go on the free list ahead of the old free ones, in index order, so allocate() has one path.
  auto nodes = std::make_unique<node[]>(capacity);
  auto payloads = std::make_unique<payload[]>(capacity);
  for (std::size_t i = 0; i < capacity_; ++i) {
    nodes[i] = nodes_[i];
    if (i >= first_entry_ && is_live(nodes_[i])) {
      payloads[i].due = payloads_[i].due;
      wheel_relocate(payloads_[i].fn, payloads[i].fn);
    }
  }
  const std::size_t fresh = std::max<std::size_t>(capacity_, first_entry_);
  if (fresh < capacity) {
    for (std::size_t i = fresh; i + 1 < capacity; ++i) {
      nodes[i].next = static_cast<index_type>(i + 1);
    }
    nodes[capacity - 1].next = free_head_;
    free_head_ = static_cast<index_type>(fresh);
  }
  nodes_ = std::move(nodes);
  payloads_ = std::move(payloads);
  capacity_ = capacity;
}

bool timer_wheel_core::postpone(id_type id, tick_type due) noexcept {
  if (!names_waiting(id)) {
    return false;
  }
  const auto i = static_cast<index_type>(id);
  if (due > payloads_[i].due) {
    unlink(i);
    payloads_[i].due = due;
    place(i);
  }
  return true;
}

void timer_wheel_core::advance_to(tick_type target) noexcept {
  assert(!advancing_ && "timer_wheel: advance_to() from a callback");
  advancing_ = true;
  interrupted_ = false;
  run_current_slot();  // what an interrupted advance left of the current tick
  while (!interrupted_) {
    const tick_type next = next_event();
    if (next > target) {
      now_ = std::max(now_, target);
      break;
    }
    now_ = next;
    process_tick();
  }
  advancing_ = false;
}

std::uint64_t timer_wheel_core::level_marks(unsigned level) const noexcept {
  // Eight 0/1 bytes at a time: the multiplication moves byte k's low bit to bit 56 + k (the
  // partial products below bit 56 are distinct powers of two, so nothing carries into the top
  // byte). Bytes past the level's slots (when it has fewer than 8) are masked off.
  const std::uint8_t* bytes = marked_.data() + std::size_t{ level } * slots_;
  std::uint64_t marks = 0;
  for (index_type s = 0; s < slots_; s += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, bytes + s, sizeof(word));
    marks |= ((word & 0x0101010101010101ULL) * 0x0102040810204080ULL >> 56) << s;
  }
  return slots_ == 64 ? marks : marks & ((std::uint64_t{ 1 } << slots_) - 1);
}

timer_wheel_core::tick_type timer_wheel_core::next_event() noexcept {
  // Marked slots of level k are after now's digit there (level 0: at or after, for the rest of
  // an interrupted tick), and all of level k comes before any of level k + 1.
  for (unsigned level = 0; level < levels_; ++level) {
    for (std::uint64_t marks = level_marks(level); marks != 0; marks &= marks - 1) {
      const auto slot = static_cast<index_type>(std::countr_zero(marks));
      const index_type list = level * slots_ + slot;
      if (list_empty(list)) {
        clear_occupied(list);  // emptied by cancel()
        continue;
      }
      const unsigned shift = level * slot_bits_;
      const tick_type block = now_ >> (shift + slot_bits_) << (shift + slot_bits_);
      return block | tick_type{ slot } << shift;
    }
  }
  if (!list_empty(overflow_)) {
    const unsigned span = levels_ * slot_bits_;
    return ((now_ >> span) + 1) << span;
  }
  return kNever;
}

timer_wheel_core::index_type timer_wheel_core::allocate_new() {
  // The slab is full (allocate() takes free and never used nodes first).
  constexpr std::size_t kLimit = std::numeric_limits<index_type>::max();  // kNone is not an index
  if (capacity_ >= kLimit) {
    throw std::bad_alloc();
  }
  grow(std::min(std::max<std::size_t>(capacity_ * 2, 64), kLimit));
  return allocate();
}

void timer_wheel_core::destroy_callback(index_type i) noexcept {
  // On the stack: a destructor that inserts may move the slab.
  wheel_callback_holder dying(payloads_[i].fn, true);
}

void timer_wheel_core::release(index_type i) noexcept {
  nodes_[i].stamp = freed(nodes_[i].stamp);
  free_node(i);
}

void timer_wheel_core::place(index_type i) noexcept {
  const index_type list = list_for(payloads_[i].due);
  link_back(list, i, nodes_[i].stamp);
}

void timer_wheel_core::process_tick() noexcept {
  // now_ > 0 here: every due tick is after the initial tick 0.
  const unsigned zero_bits = static_cast<unsigned>(std::countr_zero(now_));
  if (zero_bits >= levels_ * slot_bits_) {
    cascade_overflow();
  }
  for (unsigned level = std::min(zero_bits / slot_bits_, levels_ - 1); level >= 1; --level) {
    cascade(level);
  }
  run_current_slot();
}

void timer_wheel_core::cascade(unsigned level) noexcept {
  const auto slot = static_cast<index_type>(now_ >> (level * slot_bits_) & (slots_ - 1));
  const index_type list = level * slots_ + slot;
  // The whole list is detached at once and its entries re-placed in order: no unlinking.
  index_type i = nodes_[list].next;
  nodes_[list].next = nodes_[list].prev = list;
  while (i != list) {
    const index_type next = nodes_[i].next;
    assert(list_for(payloads_[i].due) != list && "timer_wheel: cascade must move an entry down");
    place(i);
    i = next;
  }
  clear_occupied(list);
}

void timer_wheel_core::cascade_overflow() noexcept {
  for (index_type i = nodes_[overflow_].next; i != overflow_;) {
    const index_type next = nodes_[i].next;
    const index_type list = list_for(payloads_[i].due);
    if (list != overflow_) {
      unlink(i);
      link_back(list, i, nodes_[i].stamp);
    }
    i = next;
  }
}

void timer_wheel_core::run_current_slot() noexcept {
  // Level 0's current slot holds exactly the entries due now: inserts go to later ticks.
  const index_type list = current_slot();
  while (!list_empty(list) && !interrupted_) {
    prefetch_after_first(list);
    run_first(list);
  }
  if (list_empty(list)) {
    clear_occupied(list);
  }
}

// The entries after the first of a due list run next: let their closures prefetch (see
// wheel_prefetchable), step 0 for the one kPrefetchNear places behind the first, step 1 for the
// one kPrefetchFar places behind, far enough ahead that a miss is served before it runs. Only
// entries in the list now: the first one's callback may cancel them afterwards, but it has not
// run yet.
void timer_wheel_core::prefetch_after_first(index_type list) noexcept {
  constexpr unsigned kPrefetchNear = 2;
  constexpr unsigned kPrefetchFar = 4;
  index_type i = nodes_[list].next;
  for (unsigned place = 1; place <= kPrefetchFar; ++place) {
    i = nodes_[i].next;
    if (i == list) {
      return;
    }
    if (place == kPrefetchNear) {
      wheel_prefetch(payloads_[i].fn, 0);
    }
  }
  wheel_prefetch(payloads_[i].fn, 1);
}

void timer_wheel_core::run_first(index_type list) noexcept {
  const index_type i = nodes_[list].next;
  const index_type next = nodes_[i].next;
  nodes_[list].next = next;  // next's prev is left stale: it is first now
  if (next == list) {
    nodes_[list].prev = list;
  }
  // Moved to the stack: the callback may insert and so move the slab.
  wheel_callback_holder fn(payloads_[i].fn, (nodes_[i].stamp & kNeedsDestroy) != 0);
  release(i);  // before the call: cancelling itself from its callback returns false
  --size_;
  try {
    fn();
  } catch (...) {
    on_error_(std::current_exception());
  }
}

}  // namespace cyan::event::detail
