#include "cyan/event/detail/timer_wheel_core.h"

#include <algorithm>
#include <bit>
#include <cassert>
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
  nodes_.resize(first_entry_);
  for (index_type s = 0; s < first_entry_; ++s) {
    nodes_[s].prev = nodes_[s].next = nodes_[s].list = s;
  }
  for (unsigned width = 1; width < level_of_width_.size(); ++width) {
    level_of_width_[width] = static_cast<unsigned char>(std::min((width - 1) / slot_bits, levels));
  }
}

timer_wheel_core::~timer_wheel_core() {
  // One at a time, through the public path, so that a callback's destructor that cancels or
  // inserts still finds the core consistent.
  for (index_type i = first_entry_; i < nodes_.size(); ++i) {
    if (nodes_[i].list != kNone) {
      cancel(std::uint64_t{ nodes_[i].generation } << 32 | i);
    }
  }
}

void timer_wheel_core::reserve(std::size_t entries) {
  // Built now, not just reserved: first touching fresh pages costs far more than an insert.
  const std::size_t target = first_entry_ + entries;
  if (target <= nodes_.size()) {
    return;
  }
  if (target > std::numeric_limits<index_type>::max()) {
    throw std::length_error("timer_wheel: too many entries");
  }
  const auto first_new = static_cast<index_type>(nodes_.size());
  nodes_.resize(target);
  for (auto i = static_cast<index_type>(target); i-- > first_new;) {  // lowest index first out
    nodes_[i].next = free_head_;
    free_head_ = i;
  }
}

timer_wheel_core::id_type timer_wheel_core::insert(tick_type due, callback f) {
  if (!f) {
    throw std::invalid_argument("timer_wheel: empty callback");
  }
  const index_type i = allocate();
  node& entry = nodes_[i];
  entry.fn = std::move(f);
  entry.due = due > now_ ? due : now_ + 1;
  place(i);
  ++size_;
  return id_type{ entry.generation } << 32 | i;
}

bool timer_wheel_core::cancel(id_type id) noexcept {
  const auto i = static_cast<index_type>(id);
  if (i < first_entry_ || i >= nodes_.size()) {
    return false;
  }
  node& entry = nodes_[i];
  if (entry.list == kNone || entry.generation != static_cast<std::uint32_t>(id >> 32)) {
    return false;
  }
  unlink(i);
  --size_;
  // Retired before the callback is destroyed, and freed after: a destructor that cancels sees
  // it gone, one that inserts cannot be handed this node.
  entry.list = kNone;
  ++entry.generation;
  entry.fn = nullptr;
  free_node(i);
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

timer_wheel_core::tick_type timer_wheel_core::next_event() const noexcept {
  // Occupied slots of level k are after now's digit there (level 0: at or after, for the rest of
  // an interrupted tick), and all of level k comes before any of level k + 1.
  for (unsigned level = 0; level < levels_; ++level) {
    if (occupied_[level] != 0) {
      const unsigned shift = level * slot_bits_;
      const tick_type slot = static_cast<tick_type>(std::countr_zero(occupied_[level]));
      const tick_type block = now_ >> (shift + slot_bits_) << (shift + slot_bits_);
      return block | slot << shift;
    }
  }
  if (!list_empty(overflow_)) {
    const unsigned span = levels_ * slot_bits_;
    return ((now_ >> span) + 1) << span;
  }
  return kNever;
}

timer_wheel_core::index_type timer_wheel_core::allocate() {
  if (free_head_ != kNone) {
    const index_type i = free_head_;
    free_head_ = nodes_[i].next;
    return i;
  }
  if (nodes_.size() >= std::numeric_limits<index_type>::max()) {
    throw std::bad_alloc();
  }
  nodes_.emplace_back();
  return static_cast<index_type>(nodes_.size() - 1);
}

void timer_wheel_core::release(index_type i) noexcept {
  node& entry = nodes_[i];
  entry.list = kNone;
  ++entry.generation;
  free_node(i);
}

void timer_wheel_core::free_node(index_type i) noexcept {
  if (nodes_[i].generation == 0) {
    return;  // the generation wrapped: reusing the node could reissue an id, so it is retired
  }
  nodes_[i].next = free_head_;
  free_head_ = i;
}

void timer_wheel_core::link_back(index_type list, index_type i) noexcept {
  node& entry = nodes_[i];
  node& head = nodes_[list];
  entry.prev = head.prev;
  entry.next = list;
  entry.list = list;
  nodes_[head.prev].next = i;
  head.prev = i;
  if (list < overflow_) {
    occupied_[list >> slot_bits_] |= std::uint64_t{ 1 } << (list & (slots_ - 1));
  }
}

void timer_wheel_core::unlink(index_type i) noexcept {
  const node& entry = nodes_[i];
  nodes_[entry.prev].next = entry.next;
  nodes_[entry.next].prev = entry.prev;
  const index_type list = entry.list;
  if (list < overflow_ && list_empty(list)) {
    occupied_[list >> slot_bits_] &= ~(std::uint64_t{ 1 } << (list & (slots_ - 1)));
  }
}

timer_wheel_core::index_type timer_wheel_core::list_for(tick_type due) const noexcept {
  const unsigned level = level_of_width_[std::bit_width(due ^ now_)];
  if (level >= levels_) {
    return overflow_;
  }
  const auto slot = static_cast<index_type>(due >> (level * slot_bits_) & (slots_ - 1));
  return level * slots_ + slot;
}

void timer_wheel_core::place(index_type i) noexcept {
  link_back(list_for(nodes_[i].due), i);
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
  for (index_type i = nodes_[list].next; i != list;) {
    const index_type next = nodes_[i].next;
    unlink(i);
    place(i);
    assert(nodes_[i].list != list && "timer_wheel: cascade must move an entry down");
    i = next;
  }
}

void timer_wheel_core::cascade_overflow() noexcept {
  for (index_type i = nodes_[overflow_].next; i != overflow_;) {
    const index_type next = nodes_[i].next;
    const index_type list = list_for(nodes_[i].due);
    if (list != overflow_) {
      unlink(i);
      link_back(list, i);
    }
    i = next;
  }
}

void timer_wheel_core::run_current_slot() noexcept {
  // Level 0's current slot holds exactly the entries due now: inserts go to later ticks.
  const index_type list = current_slot();
  while (!list_empty(list) && !interrupted_) {
    run_one(nodes_[list].next);
  }
}

void timer_wheel_core::run_one(index_type i) noexcept {
  unlink(i);
  callback fn = std::move(nodes_[i].fn);
  release(i);  // before the call: cancelling itself from its callback returns false
  --size_;
  try {
    fn();
  } catch (...) {
    on_error_(std::current_exception());
  }
}

}  // namespace cyan::event::detail
