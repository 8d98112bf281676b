// Tests for cyan/event/detail/timer_wheel_core.h with a virtual clock: exact ticks, orders,
// cascades across levels and the overflow list, cancel results, re-entrancy and teardown.
#include "cyan/event/detail/timer_wheel_core.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "support/lifecycle.h"

namespace {

using core = cyan::event::detail::timer_wheel_core;
using tick = core::tick_type;
using cyan::test::lifecycle;

/// A 16-byte closure (stored inline) that must be moved with its move constructor: it knows its
/// own address, so a byte copy of it is caught when it runs or dies. Counts its runs.
struct self_aware {
  explicit self_aware(int* counter) : self(this), runs(counter) { ++live; }
  self_aware(self_aware&& other) noexcept : self(this), runs(other.runs) {
    EXPECT_EQ(other.self, &other) << "moved from a byte copy";
    ++live;
  }
  ~self_aware() {
    EXPECT_EQ(self, this) << "destroyed as a byte copy";
    --live;
  }
  void operator()() const {
    EXPECT_EQ(self, this) << "called as a byte copy";
    ++*runs;
  }
  self_aware* self;
  int* runs;
  static inline int live = 0;
};
static_assert(cyan::event::detail::wheel_stores_inline<self_aware>);
static_assert(!std::is_trivially_copyable_v<self_aware>);

class timer_wheel_core_test : public testing::Test {
 protected:
  void SetUp() override { lifecycle::reset(); }
  void TearDown() override { EXPECT_EQ(lifecycle::live(), 0) << "a callback was not destroyed"; }

  // Records (tag, tick it ran at) for each entry that runs.
  core::id_type record_at(tick due, int tag) {
    return wheel_.insert(due, [this, tag] { ran_.push_back({ tag, wheel_.now() }); });
  }

  struct run {
    int tag;
    tick at;
    bool operator==(const run&) const = default;
  };
  std::vector<std::exception_ptr> errors_;
  core wheel_{ [this](std::exception_ptr e) { errors_.push_back(e); } };
  std::vector<run> ran_;
};

TEST_F(timer_wheel_core_test, runs_entries_at_their_due_tick_in_due_then_post_order) {
  record_at(5, 0);
  record_at(3, 1);
  record_at(5, 2);
  record_at(1, 3);
  record_at(3, 4);
  wheel_.advance_to(4);
  EXPECT_EQ(ran_, (std::vector<run>{ { 3, 1 }, { 1, 3 }, { 4, 3 } }));
  EXPECT_EQ(wheel_.now(), 4u);
  EXPECT_EQ(wheel_.size(), 2u);
  wheel_.advance_to(100);
  EXPECT_EQ(ran_.size(), 5u);
  EXPECT_EQ(ran_[3], (run{ 0, 5 }));
  EXPECT_EQ(ran_[4], (run{ 2, 5 }));
  EXPECT_TRUE(wheel_.empty());
  EXPECT_EQ(wheel_.next_event(), core::kNever);
}

TEST_F(timer_wheel_core_test, a_due_tick_not_after_now_runs_on_the_next_tick) {
  wheel_.advance_to(10);
  record_at(10, 0);
  record_at(0, 1);
  wheel_.advance_to(10);
  EXPECT_TRUE(ran_.empty()) << "an entry ran during the tick it was posted in";
  wheel_.advance_to(11);
  EXPECT_EQ(ran_, (std::vector<run>{ { 0, 11 }, { 1, 11 } }));
}

TEST_F(timer_wheel_core_test, zero_delay_repost_from_a_callback_runs_once_per_tick) {
  // Each run re-posts itself for "now": it must run once per tick, not loop within one.
  std::vector<tick> runs;
  std::function<void()> again = [&] {
    runs.push_back(wheel_.now());
    if (runs.size() < 1000) {
      wheel_.insert(wheel_.now(), [&] { again(); });
    }
  };
  wheel_.insert(1, [&] { again(); });
  wheel_.advance_to(50);
  ASSERT_EQ(runs.size(), 50u);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i], i + 1);
  }
  wheel_.advance_to(2000);
  EXPECT_EQ(runs.size(), 1000u);
}

TEST_F(timer_wheel_core_test, cancel_reports_whether_it_removed_an_entry) {
  const core::id_type pending = record_at(7, 0);
  const core::id_type fired = record_at(2, 1);
  EXPECT_FALSE(wheel_.cancel(0)) << "id 0 is never issued";
  EXPECT_FALSE(wheel_.cancel(~std::uint64_t{ 0 }));
  EXPECT_FALSE(wheel_.cancel(pending + (std::uint64_t{ 1 } << 32))) << "another generation";
  wheel_.advance_to(3);
  EXPECT_FALSE(wheel_.cancel(fired)) << "already ran";
  EXPECT_TRUE(wheel_.cancel(pending));
  EXPECT_FALSE(wheel_.cancel(pending)) << "cancelled twice";
  wheel_.advance_to(100);
  EXPECT_EQ(ran_, (std::vector<run>{ { 1, 2 } }));
  EXPECT_TRUE(wheel_.empty());
}

TEST_F(timer_wheel_core_test, ids_of_sentinels_free_and_never_used_nodes_are_unknown) {
  const core::id_type live = record_at(5, 0);
  const auto index = static_cast<std::uint32_t>(live);
  for (std::uint64_t generation = 0; generation < 4; ++generation) {
    EXPECT_FALSE(wheel_.cancel(generation << 32 | 1)) << "a slot's sentinel";
    EXPECT_FALSE(wheel_.cancel(generation << 32 | (index + 1))) << "a node never used";
    EXPECT_FALSE(wheel_.cancel(generation << 32 | 0xfffffffeU)) << "beyond the slab";
  }
  EXPECT_TRUE(wheel_.cancel(live));
  for (std::uint64_t generation = 0; generation < 4; ++generation) {
    EXPECT_FALSE(wheel_.cancel(generation << 32 | index)) << "a free node";
  }
  const core::id_type reused = record_at(6, 1);
  EXPECT_EQ(static_cast<std::uint32_t>(reused), index) << "the freed node is taken again";
  EXPECT_NE(reused, live);
  EXPECT_FALSE(wheel_.cancel(live)) << "the old id names the old entry, not the new one";
  EXPECT_EQ(wheel_.size(), 1u);
  wheel_.advance_to(10);
  EXPECT_EQ(ran_, (std::vector<run>{ { 1, 6 } }));
}

// cancel() leaves a slot it empties marked; next_event() must look past such slots, on every
// level, and processing must not run or cascade anything from them.
TEST_F(timer_wheel_core_test, slots_emptied_by_cancel_do_not_bring_the_next_event_forward) {
  const core::id_type near = record_at(5, 0);    // level 0, slot 5
  record_at(40, 1);                              // level 0, slot 40
  const core::id_type mid = record_at(100, 2);   // level 1, slot 1 (cascades at 64)
  record_at(200, 3);                             // level 1, slot 3 (cascades at 192)
  const core::id_type far = record_at(5000, 4);  // level 2, slot 1 (cascades at 4096)
  record_at(9000, 5);                            // level 2, slot 2 (cascades at 8192)
  EXPECT_EQ(wheel_.next_event(), 5u);
  EXPECT_TRUE(wheel_.cancel(near));
  EXPECT_EQ(wheel_.next_event(), 40u);
  wheel_.advance_to(40);
  EXPECT_EQ(ran_, (std::vector<run>{ { 1, 40 } }));
  EXPECT_TRUE(wheel_.cancel(mid));
  EXPECT_EQ(wheel_.next_event(), 192u) << "slot 1 of level 1 is empty: slot 3 is next";
  EXPECT_TRUE(wheel_.cancel(far));
  wheel_.advance_to(4095);
  EXPECT_EQ(ran_, (std::vector<run>{ { 1, 40 }, { 3, 200 } }));
  EXPECT_EQ(wheel_.next_event(), 8192u) << "slot 1 of level 2 is empty: slot 2 is next";
  const core::id_type again = record_at(4100, 6);  // the emptied level-2 slot is used again
  EXPECT_EQ(wheel_.next_event(), 4096u);
  wheel_.advance_to(9000);
  EXPECT_EQ(ran_, (std::vector<run>{ { 1, 40 }, { 3, 200 }, { 6, 4100 }, { 5, 9000 } }));
  EXPECT_FALSE(wheel_.cancel(again));
  EXPECT_TRUE(wheel_.empty());
  EXPECT_EQ(wheel_.next_event(), core::kNever);
  const core::id_type last = record_at(9001, 7);
  EXPECT_TRUE(wheel_.cancel(last));
  EXPECT_EQ(wheel_.next_event(), core::kNever) << "only an emptied slot is marked";
}

// Taking out a list's first entry leaves its successor's prev stale (see the class comment);
// cancelling first, middle and last entries in turn, and appending in between, must still leave
// the list exact.
TEST_F(timer_wheel_core_test, cancelling_first_middle_and_last_entries_keeps_a_list_exact) {
  std::array<core::id_type, 6> ids{};
  for (int tag = 0; tag < 6; ++tag) {  // A..F = 0..5, all due at tick 5: one list
    ids[static_cast<std::size_t>(tag)] = record_at(5, tag);
  }
  EXPECT_TRUE(wheel_.cancel(ids[0]));  // first: B's prev is now stale
  EXPECT_TRUE(wheel_.cancel(ids[2]));  // middle, after the new first
  EXPECT_TRUE(wheel_.cancel(ids[1]));  // first again, its prev stale
  const core::id_type g = record_at(5, 6);
  EXPECT_TRUE(wheel_.cancel(ids[5]));  // in the middle now, before G
  EXPECT_TRUE(wheel_.cancel(ids[3]));  // first
  EXPECT_TRUE(wheel_.cancel(g));       // last
  record_at(5, 7);
  const core::id_type only = record_at(9, 8);  // a list of one, emptied and used again
  EXPECT_TRUE(wheel_.cancel(only));
  record_at(9, 9);
  EXPECT_EQ(wheel_.size(), 3u);
  wheel_.advance_to(20);
  EXPECT_EQ(ran_, (std::vector<run>{ { 4, 5 }, { 7, 5 }, { 9, 9 } }));
  EXPECT_TRUE(wheel_.empty());
}

TEST_F(timer_wheel_core_test, a_callback_may_cancel_itself_and_others_due_in_the_same_tick) {
  core::id_type self = 0;
  core::id_type later_same_tick = 0;
  core::id_type next_tick = 0;
  std::vector<bool> results;
  self = wheel_.insert(4, [&] {
    results.push_back(wheel_.cancel(self));             // running: false
    results.push_back(wheel_.cancel(later_same_tick));  // not run yet: true
    results.push_back(wheel_.cancel(next_tick));        // true
    results.push_back(wheel_.cancel(later_same_tick));  // twice: false
  });
  later_same_tick = record_at(4, 1);
  next_tick = record_at(5, 2);
  record_at(4, 3);
  wheel_.advance_to(10);
  EXPECT_EQ(results, (std::vector<bool>{ false, true, true, false }));
  EXPECT_EQ(ran_, (std::vector<run>{ { 3, 4 } }));
}

TEST_F(timer_wheel_core_test, long_delays_cascade_through_every_level_and_the_overflow_list) {
  // Default geometry: 6 levels of 64 slots span 2^36 ticks; the last ones overflow.
  const std::vector<tick> due = { 1,
                                  63,
                                  64,
                                  65,
                                  4095,
                                  4096,
                                  4097,
                                  (1u << 18) + 3,
                                  1u << 24,
                                  (tick{ 1 } << 30) + 12345,
                                  (tick{ 1 } << 36) - 1,
                                  tick{ 1 } << 36,
                                  (tick{ 1 } << 36) + 5,
                                  (tick{ 1 } << 40) + 99 };
  for (std::size_t i = 0; i < due.size(); ++i) {
    record_at(due[i], static_cast<int>(i));
  }
  // Jump in uneven steps, as a loop that slept would.
  for (tick target :
       { tick{ 70 }, tick{ 5000 }, tick{ 1 } << 29, tick{ 1 } << 37, tick{ 1 } << 41 }) {
    wheel_.advance_to(target);
  }
  ASSERT_EQ(ran_.size(), due.size());
  for (std::size_t i = 0; i < due.size(); ++i) {
    EXPECT_EQ(ran_[i], (run{ static_cast<int>(i), due[i] }));
  }
}

TEST_F(timer_wheel_core_test, a_far_entry_costs_only_a_few_wake_ups) {
  // Stepping from event to event, as the loop timer does: one step per level it cascades
  // through (and per overflow boundary), not one per tick.
  const auto steps_until_run = [&](tick due) {
    record_at(due, 0);
    int steps = 0;
    while (!wheel_.empty()) {
      wheel_.advance_to(wheel_.next_event());
      ++steps;
    }
    return steps;
  };
  EXPECT_LE(steps_until_run(wheel_.now() + (tick{ 1 } << 30) + 12345), 6);
  EXPECT_LE(steps_until_run(wheel_.now() + (tick{ 1 } << 40)), 6 + 17);
  EXPECT_EQ(ran_.size(), 2u);
}

// timer_wheel moves a batch of posts later this way when the clock passed a tick boundary
// before it checked them.
TEST_F(timer_wheel_core_test, postpone_moves_an_entry_only_later_and_after_those_due_there) {
  record_at(5, 0);
  const core::id_type moved = record_at(3, 1);
  const core::id_type kept = record_at(70, 2);  // on level 1 until tick 64
  EXPECT_TRUE(wheel_.postpone(moved, 5));       // after entry 0, already due at 5
  EXPECT_TRUE(wheel_.postpone(kept, 69));       // earlier than its due tick: stays at 70
  EXPECT_TRUE(wheel_.postpone(kept, 70));
  wheel_.advance_to(4);
  EXPECT_TRUE(ran_.empty()) << "entry 1 still ran at its old tick";
  wheel_.advance_to(100);
  EXPECT_EQ(ran_, (std::vector<run>{ { 0, 5 }, { 1, 5 }, { 2, 70 } }));
  EXPECT_FALSE(wheel_.postpone(moved, 200)) << "an entry that ran";
  const core::id_type cancelled = record_at(150, 3);
  ASSERT_TRUE(wheel_.cancel(cancelled));
  EXPECT_FALSE(wheel_.postpone(cancelled, 200));
  EXPECT_TRUE(wheel_.empty());
}

TEST_F(timer_wheel_core_test, ids_are_never_reused) {
  std::set<core::id_type> seen;
  for (int i = 0; i < 2000; ++i) {
    const core::id_type a = record_at(wheel_.now() + 1 + i % 3, i);
    EXPECT_NE(a, 0u);
    EXPECT_TRUE(seen.insert(a).second) << "id reused at " << i;
    if (i % 2 == 0) {
      EXPECT_TRUE(wheel_.cancel(a));
    } else {
      wheel_.advance_to(wheel_.now() + 4);
    }
  }
  EXPECT_EQ(ran_.size(), 1000u);
}

TEST_F(timer_wheel_core_test, callback_exceptions_go_to_the_handler_and_the_tick_goes_on) {
  wheel_.insert(3, [] { throw std::runtime_error("first"); });
  record_at(3, 1);
  wheel_.insert(3, [] { throw std::logic_error("second"); });
  record_at(3, 2);
  wheel_.advance_to(3);
  EXPECT_EQ(ran_, (std::vector<run>{ { 1, 3 }, { 2, 3 } }));
  ASSERT_EQ(errors_.size(), 2u);
  EXPECT_THROW(std::rethrow_exception(errors_[0]), std::runtime_error);
  EXPECT_THROW(std::rethrow_exception(errors_[1]), std::logic_error);
}

TEST_F(timer_wheel_core_test, interrupt_leaves_the_rest_of_the_tick_for_the_next_advance) {
  wheel_.insert(6, [&] {
    ran_.push_back({ 0, wheel_.now() });
    wheel_.interrupt();
  });
  record_at(6, 1);
  record_at(6, 2);
  record_at(7, 3);
  wheel_.advance_to(20);
  EXPECT_EQ(ran_, (std::vector<run>{ { 0, 6 } }));
  EXPECT_EQ(wheel_.now(), 6u);
  EXPECT_EQ(wheel_.next_event(), 6u) << "the rest of tick 6 is due now";
  EXPECT_EQ(wheel_.size(), 3u);
  wheel_.advance_to(20);
  EXPECT_EQ(ran_, (std::vector<run>{ { 0, 6 }, { 1, 6 }, { 2, 6 }, { 3, 7 } }));
}

TEST_F(timer_wheel_core_test, empty_wheel_jumps_straight_to_the_target) {
  wheel_.advance_to(tick{ 1 } << 45);
  EXPECT_EQ(wheel_.now(), tick{ 1 } << 45);
  EXPECT_EQ(wheel_.next_event(), core::kNever);
  wheel_.advance_to(5);
  EXPECT_EQ(wheel_.now(), tick{ 1 } << 45) << "time never goes backwards";
}

TEST_F(timer_wheel_core_test, destruction_destroys_callbacks_without_running_them) {
  int runs = 0;
  {
    core wheel{ [](std::exception_ptr) {} };
    std::vector<core::id_type> ids;
    for (int i = 0; i < 500; ++i) {
      // Half small (stored inline), half too big for inline storage (on the heap).
      if (i % 2 == 0) {
        auto l = std::make_shared<lifecycle>(i);
        ids.push_back(wheel.insert(10 + i * 977, [&runs, l] { ++runs; }));
      } else {
        std::array<char, 64> big{};
        ids.push_back(
            wheel.insert(10 + i * 977, [&runs, big, l = lifecycle(i)] { runs += big[0] + 1; }));
      }
    }
    // A callback whose destructor cancels another entry: the dying core must stay usable.
    struct canceller {
      core* wheel;
      core::id_type victim;
      ~canceller() {
        if (wheel != nullptr) {
          wheel->cancel(victim);
        }
      }
      canceller(core* w, core::id_type v) : wheel(w), victim(v) {}
      canceller(canceller&& other) noexcept
          : wheel(std::exchange(other.wheel, nullptr)), victim(other.victim) {}
    };
    wheel.insert(3, [c = canceller(&wheel, ids[499])] {});
    wheel.advance_to(2);
    EXPECT_EQ(lifecycle::live(), 500);
  }
  EXPECT_EQ(runs, 0);
  EXPECT_EQ(lifecycle::live(), 0);
}

TEST_F(timer_wheel_core_test, closures_of_every_size_survive_slab_growth_and_run_in_order) {
  // No reserve(): the slab grows many times while trivially copyable, inline movable and boxed
  // closures are held; each must move correctly, run once in order and be destroyed once.
  constexpr int kEntries = 4998;  // a multiple of 3
  int sum = 0;
  std::vector<int> order;
  for (int i = 0; i < kEntries; ++i) {
    const tick due = 1 + static_cast<tick>(i % 97);
    switch (i % 3) {
      case 0:
        wheel_.insert(due, [&order, i] { order.push_back(i); });
        break;
      case 1:
        wheel_.insert(due, self_aware(&sum));
        break;
      default:
        wheel_.insert(due, [&order, l = std::make_shared<lifecycle>(i)] {
          order.push_back(static_cast<int>(l->value));
        });
    }
  }
  EXPECT_EQ(self_aware::live, kEntries / 3);
  EXPECT_EQ(lifecycle::live(), kEntries / 3);
  wheel_.advance_to(200);
  EXPECT_EQ(sum, kEntries / 3);
  ASSERT_EQ(order.size(), static_cast<std::size_t>(kEntries - kEntries / 3));
  for (std::size_t k = 1; k < order.size(); ++k) {  // due tick, then post order
    const int a = order[k - 1];
    const int b = order[k];
    EXPECT_TRUE(a % 97 < b % 97 || (a % 97 == b % 97 && a < b)) << a << " before " << b;
  }
  EXPECT_EQ(self_aware::live, 0);
  EXPECT_TRUE(wheel_.empty());
}

TEST_F(timer_wheel_core_test, cancel_destroys_the_closure_at_once_whatever_its_storage) {
  int sum = 0;
  auto shared = std::make_shared<lifecycle>(7);
  const core::id_type boxed =
      wheel_.insert(5, [shared, pad = std::array<char, 40>{}] { (void)pad; });
  const core::id_type inline_closure = wheel_.insert(5, [shared] {});
  const core::id_type movable = wheel_.insert(5, self_aware(&sum));
  EXPECT_EQ(shared.use_count(), 3);
  EXPECT_TRUE(wheel_.cancel(boxed));
  EXPECT_TRUE(wheel_.cancel(inline_closure));
  EXPECT_EQ(shared.use_count(), 1) << "cancel must destroy the callback";
  EXPECT_TRUE(wheel_.cancel(movable));
  EXPECT_EQ(self_aware::live, 0);
  wheel_.advance_to(10);
  EXPECT_EQ(sum, 0);
}

TEST_F(timer_wheel_core_test, destructors_and_callbacks_that_insert_may_grow_the_slab) {
  // A cancelled inline closure whose destructor inserts enough to move the slab, and a running
  // one that does the same: each reads its own members afterwards, so it must not live in the
  // slab meanwhile (asan reports the use after free otherwise).
  int sum = 0;
  struct inserter {
    core* wheel;
    int* sum;
    inserter(core* w, int* s) : wheel(w), sum(s) {}
    inserter(inserter&& other) noexcept
        : wheel(std::exchange(other.wheel, nullptr)), sum(other.sum) {}
    ~inserter() {
      if (wheel != nullptr) {
        fill();
      }
    }
    void fill() {
      for (int i = 0; i < 3000; ++i) {
        wheel->insert(50, self_aware(sum));
      }
      *sum += 100;
    }
  };
  static_assert(cyan::event::detail::wheel_stores_inline<inserter>);
  const core::id_type doomed = wheel_.insert(3, [i = inserter(&wheel_, &sum)] {});
  wheel_.insert(4, [i = inserter(&wheel_, &sum)]() mutable {
    i.fill();
    i.wheel = nullptr;  // its destructor must not fill again
  });
  EXPECT_TRUE(wheel_.cancel(doomed));
  EXPECT_EQ(sum, 100);
  EXPECT_EQ(wheel_.size(), 3001u);
  wheel_.advance_to(10);
  EXPECT_EQ(sum, 200);
  EXPECT_EQ(wheel_.size(), 6000u);
  wheel_.advance_to(50);
  EXPECT_EQ(sum, 6200);
  EXPECT_EQ(self_aware::live, 0);
}

TEST_F(timer_wheel_core_test, a_closure_whose_construction_throws_adds_nothing) {
  record_at(2, 0);
  const lifecycle l(1);
  lifecycle::throw_countdown = 2;  // the capture's copy succeeds, its move into the box throws
  EXPECT_THROW(wheel_.insert(2, [l] {}), std::runtime_error);
  EXPECT_EQ(wheel_.size(), 1u);
  const core::id_type next = record_at(2, 1);
  EXPECT_NE(next, 0u);
  void (*null_function)() = nullptr;
  EXPECT_THROW(wheel_.insert(2, null_function), std::invalid_argument);
  EXPECT_THROW(wheel_.insert(2, cyan::unique_function<void()>{}), std::invalid_argument);
  EXPECT_EQ(wheel_.size(), 2u);
  wheel_.advance_to(2);
  EXPECT_EQ(ran_, (std::vector<run>{ { 0, 2 }, { 1, 2 } }));
}

TEST_F(timer_wheel_core_test, rejects_unsupported_geometry_and_empty_callbacks) {
  const auto make = [](unsigned levels, unsigned slot_bits) {
    core wheel([](std::exception_ptr) {}, levels, slot_bits);
  };
  EXPECT_THROW(make(0, 6), std::invalid_argument);
  EXPECT_THROW(make(9, 6), std::invalid_argument);
  EXPECT_THROW(make(4, 7), std::invalid_argument);
  EXPECT_NO_THROW(make(8, 6));
  EXPECT_NO_THROW(make(1, 1));
  EXPECT_THROW(core(nullptr), std::invalid_argument);
  EXPECT_THROW(wheel_.insert(1, nullptr), std::invalid_argument);
  EXPECT_TRUE(wheel_.empty());
}

}  // namespace
