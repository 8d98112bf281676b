#include "cyan/lockfree/spsc_ring.h"

#include <gtest/gtest.h>

#include "support/lifecycle.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using cyan::lockfree::spsc_ring;
using cyan::test::lifecycle;

// An element without a default constructor or assignment: the ring must not need either.
struct no_default {
  explicit no_default(int a, std::string b) : number(a), text(std::move(b)) {}
  no_default(no_default&&) = default;
  no_default& operator=(no_default&&) = delete;
  int number;
  std::string text;
};

// noexcept follows the element type.
static_assert(noexcept(std::declval<spsc_ring<int>&>().try_push(1)));
static_assert(noexcept(std::declval<spsc_ring<int>&>().try_pop()));
static_assert(!noexcept(std::declval<spsc_ring<lifecycle>&>().try_push(std::declval<lifecycle>())));
static_assert(!noexcept(std::declval<spsc_ring<lifecycle>&>().try_pop()));
static_assert(noexcept(std::declval<spsc_ring<lifecycle>&>().try_pop(std::declval<lifecycle&>())));
static_assert(noexcept(std::declval<spsc_ring<lifecycle>&>().consume_all([](lifecycle&&) noexcept {
})));
static_assert(!noexcept(std::declval<spsc_ring<lifecycle>&>().consume_all([](lifecycle&&) {})));

class spsc_ring_test : public ::testing::Test {
 protected:
  void SetUp() override { lifecycle::reset(); }
  void TearDown() override { EXPECT_EQ(lifecycle::live(), 0) << "an element leaked or died twice"; }
};

TEST_F(spsc_ring_test, zero_capacity_throws) {
  EXPECT_THROW(spsc_ring<int>{ 0 }, std::invalid_argument);
  EXPECT_THROW(spsc_ring<int>{ std::numeric_limits<std::size_t>::max() }, std::length_error);
}

TEST_F(spsc_ring_test, capacity_one_holds_exactly_one_element) {
  spsc_ring<int> ring(1);
  EXPECT_EQ(ring.capacity(), 1u);
  EXPECT_TRUE(ring.try_push(7));
  EXPECT_FALSE(ring.try_push(8));
  EXPECT_EQ(ring.try_pop(), std::optional<int>(7));
  EXPECT_TRUE(ring.try_push(9));
  EXPECT_EQ(ring.try_pop(), std::optional<int>(9));
  EXPECT_EQ(ring.try_pop(), std::nullopt);
}

TEST_F(spsc_ring_test, capacity_rounds_up_to_a_power_of_two) {
  const std::array<std::pair<std::size_t, std::size_t>, 6> cases{
    { { 2, 2 }, { 3, 4 }, { 5, 8 }, { 1000, 1024 }, { 1024, 1024 }, { 1025, 2048 } }
  };
  for (const auto& [requested, expected] : cases) {
    spsc_ring<int> ring(requested);
    EXPECT_EQ(ring.capacity(), expected) << "requested " << requested;
    std::size_t pushed = 0;
    while (ring.try_push(static_cast<int>(pushed))) {
      ++pushed;
    }
    EXPECT_EQ(pushed, expected) << "the whole rounded capacity is usable";
  }
}

TEST_F(spsc_ring_test, full_ring_rejects_every_push_and_leaves_the_argument_alone) {
  spsc_ring<lifecycle> ring(4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(ring.try_emplace(i));
  }
  const lifecycle copy_source{ 10 };
  lifecycle move_source{ 11 };
  const auto constructed_before = lifecycle::constructed.load();
  EXPECT_FALSE(ring.try_push(copy_source));
  EXPECT_FALSE(ring.try_push(std::move(move_source)));
  EXPECT_FALSE(ring.try_emplace(12));
  EXPECT_EQ(move_source.value, 11) << "a rejected rvalue must not be moved from";
  EXPECT_EQ(lifecycle::constructed.load(), constructed_before) << "nothing is built when full";
  EXPECT_EQ(ring.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(ring.try_pop()->value, i);
  }
}

TEST_F(spsc_ring_test, stays_fifo_across_many_wrap_arounds) {
  spsc_ring<std::uint64_t> ring(4);
  std::uint64_t next_in = 0;
  std::uint64_t next_out = 0;
  for (int round = 0; round < 10'000; ++round) {
    const int burst = 1 + round % 4;  // 1..4 keeps head and tail crossing the end at every offset
    for (int i = 0; i < burst; ++i) {
      ASSERT_TRUE(ring.try_push(next_in++));
    }
    ASSERT_EQ(ring.size(), static_cast<std::size_t>(burst));
    for (int i = 0; i < burst; ++i) {
      std::uint64_t value = 0;
      ASSERT_TRUE(ring.try_pop(value));
      ASSERT_EQ(value, next_out++);
    }
    ASSERT_TRUE(ring.empty());
  }
  EXPECT_EQ(next_out, next_in);
  EXPECT_GT(next_in, 4u * 1000) << "the indexes wrapped the ring thousands of times";
}

TEST_F(spsc_ring_test, holds_move_only_elements) {
  spsc_ring<std::unique_ptr<int>> ring(8);
  for (int i = 0; i < 6; ++i) {
    EXPECT_TRUE(ring.try_push(std::make_unique<int>(i)));
  }
  std::unique_ptr<int> out;
  ASSERT_TRUE(ring.try_pop(out));
  EXPECT_EQ(*out, 0);
  std::optional<std::unique_ptr<int>> popped = ring.try_pop();
  ASSERT_TRUE(popped.has_value());
  EXPECT_EQ(**popped, 1);
  std::vector<std::unique_ptr<int>> batch;
  EXPECT_EQ(ring.pop_n(std::back_inserter(batch), 2), 2u);
  EXPECT_EQ(*batch.at(0), 2);
  EXPECT_EQ(*batch.at(1), 3);
  std::vector<int> consumed;
  EXPECT_EQ(ring.consume_all([&](std::unique_ptr<int>&& p) { consumed.push_back(*p); }), 2u);
  EXPECT_EQ(consumed, (std::vector<int>{ 4, 5 }));
}

TEST_F(spsc_ring_test, needs_no_default_constructor_or_assignment) {
  spsc_ring<no_default> ring(2);
  EXPECT_TRUE(ring.try_emplace(1, "one"));
  EXPECT_TRUE(ring.try_push(no_default{ 2, "two" }));
  std::optional<no_default> first = ring.try_pop();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->number, 1);
  EXPECT_EQ(first->text, "one");
  ASSERT_NE(ring.front(), nullptr);
  EXPECT_EQ(ring.front()->text, "two");
  ring.pop();
  EXPECT_TRUE(ring.empty());
}

TEST_F(spsc_ring_test, builds_and_destroys_each_element_exactly_once) {
  {
    spsc_ring<lifecycle> ring(8);
    for (int i = 0; i < 6; ++i) {
      ASSERT_TRUE(ring.try_emplace(i));  // 6 constructions in place
    }
    lifecycle out;                   // 1 construction
    ASSERT_TRUE(ring.try_pop(out));  // move-assigned: no construction, 1 destruction
    EXPECT_EQ(out.value, 0);
    ASSERT_TRUE(ring.try_pop().has_value());  // 1 move construction, 2 destructions
    for (int i = 6; i < 10; ++i) {
      ASSERT_TRUE(ring.try_emplace(i));  // 4 more: the live elements now wrap past the end
    }
    EXPECT_EQ(lifecycle::constructed.load(), 6 + 1 + 1 + 4);
    EXPECT_EQ(lifecycle::destroyed.load(), 1 + 2);
    EXPECT_EQ(ring.size(), 8u);
  }  // the ring destroys its 8 elements, `out` dies too
  EXPECT_EQ(lifecycle::constructed.load(), 12);
  EXPECT_EQ(lifecycle::destroyed.load(), 12);
}

TEST_F(spsc_ring_test, front_shows_the_oldest_element_until_pop) {
  spsc_ring<int> ring(4);
  EXPECT_EQ(ring.front(), nullptr);
  ASSERT_TRUE(ring.try_push(1));
  ASSERT_TRUE(ring.try_push(2));
  int* first = ring.front();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(*first, 1);
  EXPECT_EQ(ring.front(), first) << "front() does not remove";
  *first = 10;
  ring.pop();
  ASSERT_NE(ring.front(), nullptr);
  EXPECT_EQ(*ring.front(), 2);
  ring.pop();
  EXPECT_EQ(ring.front(), nullptr);
  ASSERT_TRUE(ring.try_push(3));
  EXPECT_EQ(ring.try_pop(), std::optional<int>(3));
}

TEST_F(spsc_ring_test, try_push_n_pushes_what_fits_in_order) {
  spsc_ring<int> ring(8);
  std::vector<int> input(10);
  std::iota(input.begin(), input.end(), 100);
  EXPECT_EQ(ring.try_push_n(input.begin(), 0), 0u);
  EXPECT_EQ(ring.try_push_n(input.begin(), 3), 3u);
  EXPECT_EQ(ring.try_push_n(input.begin() + 3, 7), 5u) << "only 5 slots were free";
  EXPECT_EQ(ring.try_push_n(input.begin() + 8, 2), 0u) << "a full ring takes nothing";
  std::vector<int> out;
  EXPECT_EQ(ring.pop_n(std::back_inserter(out), 100), 8u);
  EXPECT_EQ(out, std::vector<int>(input.begin(), input.begin() + 8));
}

TEST_F(spsc_ring_test, try_push_n_moves_from_a_move_iterator) {
  spsc_ring<std::unique_ptr<int>> ring(4);
  std::vector<std::unique_ptr<int>> input;
  for (int i = 0; i < 3; ++i) {
    input.push_back(std::make_unique<int>(i));
  }
  EXPECT_EQ(ring.try_push_n(std::make_move_iterator(input.begin()), input.size()), 3u);
  EXPECT_EQ(input[0], nullptr);
  EXPECT_EQ(*ring.try_pop().value(), 0);
}

TEST_F(spsc_ring_test, try_push_n_keeps_the_elements_built_before_a_throw) {
  spsc_ring<lifecycle> ring(8);
  std::vector<lifecycle> input;
  for (int i = 0; i < 5; ++i) {
    input.emplace_back(i);
  }
  lifecycle::throw_countdown = 3;  // the third copy throws
  EXPECT_THROW((void)ring.try_push_n(input.cbegin(), input.size()), std::runtime_error);
  EXPECT_EQ(ring.size(), 2u) << "the two copies made before the throw are published";
  EXPECT_EQ(ring.try_pop()->value, 0);
  EXPECT_EQ(ring.try_pop()->value, 1);
  EXPECT_TRUE(ring.empty());
}

TEST_F(spsc_ring_test, batch_calls_wrap_past_the_end_of_the_slots) {
  spsc_ring<lifecycle> ring(8);
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(ring.try_emplace(i));
  }
  EXPECT_EQ(ring.consume_all([](lifecycle&&) {}), 6u);  // head and tail now at slot 6
  std::vector<lifecycle> input;
  for (int i = 10; i < 15; ++i) {
    input.emplace_back(i);
  }
  lifecycle::throw_countdown = 4;  // slots 6 and 7, then slot 0, then the 4th copy (slot 1) throws
  EXPECT_THROW((void)ring.try_push_n(input.cbegin(), input.size()), std::runtime_error);
  ASSERT_EQ(ring.size(), 3u) << "the copies before the wrap and after it are published";
  EXPECT_EQ(ring.try_push_n(input.cbegin() + 3, 2), 2u);  // slots 1 and 2
  std::vector<lifecycle> out;
  EXPECT_EQ(ring.pop_n(std::back_inserter(out), 3), 3u);  // slots 6, 7, 0
  std::vector<std::int64_t> seen;
  for (const lifecycle& item : out) {
    seen.push_back(item.value);
  }
  EXPECT_EQ(ring.consume_all([&](lifecycle&& item) { seen.push_back(item.value); }), 2u);
  EXPECT_EQ(seen, (std::vector<std::int64_t>{ 10, 11, 12, 13, 14 }));
  EXPECT_TRUE(ring.empty());
}

TEST_F(spsc_ring_test, pop_n_takes_at_most_max_oldest_first) {
  spsc_ring<int> ring(8);
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(ring.try_push(i));
  }
  std::array<int, 4> first{};
  EXPECT_EQ(ring.pop_n(first.begin(), first.size()), 4u);
  EXPECT_EQ(first, (std::array<int, 4>{ 0, 1, 2, 3 }));
  std::vector<int> rest;
  EXPECT_EQ(ring.pop_n(std::back_inserter(rest), 100), 2u);
  EXPECT_EQ(rest, (std::vector<int>{ 4, 5 }));
  EXPECT_EQ(ring.pop_n(std::back_inserter(rest), 100), 0u);
}

TEST_F(spsc_ring_test, consume_all_takes_everything_present_once) {
  spsc_ring<lifecycle> ring(8);
  int calls = 0;
  EXPECT_EQ(ring.consume_all([&](lifecycle&&) { ++calls; }), 0u);
  EXPECT_EQ(calls, 0);
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(ring.try_emplace(i));
  }
  std::vector<std::int64_t> seen;
  EXPECT_EQ(ring.consume_all([&](lifecycle&& item) { seen.push_back(item.value); }), 7u);
  EXPECT_EQ(seen, (std::vector<std::int64_t>{ 0, 1, 2, 3, 4, 5, 6 }));
  EXPECT_TRUE(ring.empty());
  EXPECT_EQ(lifecycle::live(), 0) << "consumed elements are destroyed";
}

TEST_F(spsc_ring_test, consume_n_stops_at_max) {
  spsc_ring<int> ring(8);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(ring.try_push(i));
  }
  std::vector<int> seen;
  EXPECT_EQ(ring.consume_n(3, [&](int&& v) { seen.push_back(v); }), 3u);
  EXPECT_EQ(seen, (std::vector<int>{ 0, 1, 2 }));
  EXPECT_EQ(ring.size(), 2u);
}

TEST_F(spsc_ring_test, consume_all_keeps_the_rest_when_the_callback_throws) {
  spsc_ring<lifecycle> ring(8);
  for (int i = 1; i <= 6; ++i) {
    ASSERT_TRUE(ring.try_emplace(i));
  }
  std::vector<std::int64_t> seen;
  const auto throw_on_three = [&](lifecycle&& item) {
    seen.push_back(item.value);
    if (item.value == 3) {
      throw std::runtime_error("callback failed");
    }
  };
  EXPECT_THROW(ring.consume_all(throw_on_three), std::runtime_error);
  EXPECT_EQ(seen, (std::vector<std::int64_t>{ 1, 2, 3 }));
  EXPECT_EQ(lifecycle::destroyed.load(), 3) << "1, 2 and the throwing 3 are consumed";
  EXPECT_EQ(ring.size(), 3u);
  ASSERT_TRUE(ring.try_emplace(7)) << "the freed slots are reusable";
  seen.clear();
  EXPECT_EQ(ring.consume_all([&](lifecycle&& item) { seen.push_back(item.value); }), 4u);
  EXPECT_EQ(seen, (std::vector<std::int64_t>{ 4, 5, 6, 7 }));
}

TEST_F(spsc_ring_test, size_and_empty_follow_pushes_and_pops) {
  spsc_ring<int> ring(4);
  EXPECT_TRUE(ring.empty());
  EXPECT_EQ(ring.size(), 0u);
  ASSERT_TRUE(ring.try_push(1));
  ASSERT_TRUE(ring.try_push(2));
  EXPECT_FALSE(ring.empty());
  EXPECT_EQ(ring.size(), 2u);
  ASSERT_TRUE(ring.try_pop().has_value());
  EXPECT_EQ(ring.size(), 1u);
}

TEST_F(spsc_ring_test, producer_and_consumer_on_different_threads_are_allowed) {
  spsc_ring<int> ring(4);
  std::thread producer([&] {
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(ring.try_push(i));
    }
  });
  producer.join();
  std::vector<int> seen;
  EXPECT_EQ(ring.consume_all([&](int&& v) { seen.push_back(v); }), 3u);
  EXPECT_EQ(seen, (std::vector<int>{ 0, 1, 2 }));
}

#ifndef NDEBUG
using spsc_ring_DeathTest = spsc_ring_test;

TEST_F(spsc_ring_DeathTest, second_producer_thread_aborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        spsc_ring<int> ring(4);
        (void)ring.try_push(1);
        std::thread second([&] { (void)ring.try_push(2); });
        second.join();
      },
      "spsc_ring: called from a second producer thread");
}

TEST_F(spsc_ring_DeathTest, second_consumer_thread_aborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        spsc_ring<int> ring(4);
        (void)ring.try_push(1);
        (void)ring.try_push(2);
        (void)ring.try_pop();
        std::thread second([&] { (void)ring.front(); });
        second.join();
      },
      "spsc_ring: called from a second consumer thread");
}
#endif

}  // namespace
