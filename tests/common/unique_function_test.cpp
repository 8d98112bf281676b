#include "cyan/common/unique_function.h"

#include <gtest/gtest.h>

#include <array>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "support/allocation_counter.h"
#include "support/lifecycle.h"

using cyan::test::lifecycle;

class unique_function_test : public ::testing::Test {
 protected:
  void SetUp() override { lifecycle::reset(); }
  void TearDown() override { EXPECT_EQ(lifecycle::live(), 0); }
};

TEST_F(unique_function_test, calls_with_arguments_and_returns_the_result) {
  cyan::unique_function<int(int, int)> add = [](int a, int b) { return a + b; };
  ASSERT_TRUE(add);
  EXPECT_EQ(add(2, 40), 42);
}

TEST_F(unique_function_test, empty_call_throws_bad_function_call) {
  cyan::unique_function<void()> empty;
  EXPECT_FALSE(empty);
  EXPECT_TRUE(empty == nullptr);
  EXPECT_THROW(empty(), std::bad_function_call);
}

TEST_F(unique_function_test, holds_move_only_closures) {
  auto owned = std::make_unique<int>(7);
  cyan::unique_function<int()> f = [p = std::move(owned)] { return *p * 6; };
  EXPECT_EQ(f(), 42);

  std::packaged_task<int()> task([] { return 5; });
  auto result = task.get_future();
  cyan::unique_function<void()> g = std::move(task);
  g();
  EXPECT_EQ(result.get(), 5);
}

TEST_F(unique_function_test, closure_of_48_bytes_is_stored_without_allocation) {
  std::array<char, 40> payload{};
  payload[39] = 3;
  long extra = 4;
  auto closure = [payload, extra] { return payload[39] + extra; };
  static_assert(sizeof(closure) == 48);
  static_assert(cyan::unique_function<long()>::stored_inline<decltype(closure)>);

  cyan::test::start_counting_allocations();
  cyan::unique_function<long()> f = closure;
  cyan::unique_function<long()> moved = std::move(f);
  EXPECT_EQ(cyan::test::stop_counting_allocations(), 0);
  EXPECT_EQ(moved(), 7);
  EXPECT_FALSE(f);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
}

TEST_F(unique_function_test, large_closure_allocates_once_and_moves_without_allocating) {
  std::array<char, 200> payload{};
  payload[199] = 9;
  auto closure = [payload] { return int{ payload[199] }; };
  static_assert(!cyan::unique_function<int()>::stored_inline<decltype(closure)>);

  cyan::test::start_counting_allocations();
  cyan::unique_function<int()> f = closure;
  cyan::unique_function<int()> moved = std::move(f);
  cyan::unique_function<int()> again;
  again = std::move(moved);
  EXPECT_EQ(cyan::test::stop_counting_allocations(), 1);
  EXPECT_EQ(again(), 9);
}

TEST_F(unique_function_test, destroys_the_closure_exactly_once) {
  {
    cyan::unique_function<std::int64_t()> f = [item = lifecycle(11)] { return item.value; };
    cyan::unique_function<std::int64_t()> g = std::move(f);
    cyan::unique_function<std::int64_t()> h;
    h = std::move(g);
    EXPECT_EQ(h(), 11);
    EXPECT_EQ(lifecycle::live(), 1);
    h = nullptr;
    EXPECT_EQ(lifecycle::live(), 0);
  }
  EXPECT_EQ(lifecycle::destroyed.load(), lifecycle::constructed.load());
}

TEST_F(unique_function_test, throwing_move_constructor_goes_to_the_heap) {
  // lifecycle's move constructor is not noexcept, so the closure must not be stored inline
  // (moving the wrapper must never throw).
  auto closure = [item = lifecycle(1)] { return item.value; };
  static_assert(!cyan::unique_function<std::int64_t()>::stored_inline<decltype(closure)>);
  cyan::unique_function<std::int64_t()> f = std::move(closure);
  static_assert(std::is_nothrow_move_constructible_v<cyan::unique_function<std::int64_t()>>);
  EXPECT_EQ(f(), 1);
}

TEST_F(unique_function_test, exception_from_the_closure_propagates) {
  cyan::unique_function<void()> f = [] { throw std::runtime_error("boom"); };
  EXPECT_THROW(f(), std::runtime_error);
  EXPECT_TRUE(f);
}

TEST_F(unique_function_test, swap_exchanges_closures) {
  cyan::unique_function<std::string()> a = [] { return std::string("a"); };
  cyan::unique_function<std::string()> b = [] { return std::string("b"); };
  swap(a, b);
  EXPECT_EQ(a(), "b");
  EXPECT_EQ(b(), "a");
}

TEST_F(unique_function_test, mutable_closure_keeps_its_state) {
  cyan::unique_function<int()> counter = [n = 0]() mutable { return ++n; };
  EXPECT_EQ(counter(), 1);
  EXPECT_EQ(counter(), 2);
  auto moved = std::move(counter);
  EXPECT_EQ(moved(), 3);
}

// A unique_function<void()> accepts a closure that returns a value and discards the result;
// inline, boxed and move-only closures alike (each runs exactly once per call).
TEST(unique_function, void_signature_discards_what_the_closure_returns) {
  int calls = 0;
  auto inline_closure = [&calls] { return ++calls; };
  std::array<char, 200> payload{};
  payload[0] = 10;
  auto boxed_closure = [&calls, payload] {
    calls += payload[0];
    return std::string("ignored");
  };
  static_assert(cyan::unique_function<void()>::stored_inline<decltype(inline_closure)>);
  static_assert(!cyan::unique_function<void()>::stored_inline<decltype(boxed_closure)>);
  cyan::unique_function<void()> small = inline_closure;
  cyan::unique_function<void()> large = boxed_closure;
  cyan::unique_function<void(int)> move_only =
      [&calls, owned = std::make_unique<int>(100)](int times) mutable {
        calls += *owned * times;
        return std::move(owned);
      };
  small();
  large();
  move_only(2);
  EXPECT_EQ(calls, 1 + 10 + 200);
}

// Throws from its destructor, unless moved from; counts those destructions.
struct throws_when_destroyed {
  int* destroyed;
  explicit throws_when_destroyed(int* d) : destroyed(d) {}
  throws_when_destroyed(throws_when_destroyed&& other) noexcept
      : destroyed(std::exchange(other.destroyed, nullptr)) {}
  ~throws_when_destroyed() noexcept(false) {
    if (destroyed != nullptr) {
      ++*destroyed;
      throw std::runtime_error("destructor");
    }
  }
};

// reset() destroys the closure (all of it: the other captures and the heap box too), leaves the
// object empty and propagates what the destructor threw; moving never runs that destructor.
TEST(unique_function, reset_propagates_what_the_closures_destructor_throws) {
  lifecycle::reset();
  int destroyed = 0;
  auto closure = [thrower = throws_when_destroyed(&destroyed), item = lifecycle(1)] {};
  static_assert(sizeof(closure) <= cyan::unique_function<void()>::inline_capacity);
  static_assert(!cyan::unique_function<void()>::stored_inline<decltype(closure)>);
  cyan::unique_function<void()> f = std::move(closure);
  cyan::unique_function<void()> moved = std::move(f);
  moved();
  EXPECT_EQ(destroyed, 0);
  EXPECT_EQ(lifecycle::live(), 2);  // the moved-from local closure's and the held one's
  EXPECT_THROW(moved.reset(), std::runtime_error);
  EXPECT_FALSE(moved);
  EXPECT_EQ(destroyed, 1);
  EXPECT_EQ(lifecycle::live(), 1);  // only the local closure's moved-from copy is left
  EXPECT_NO_THROW(moved.reset());   // empty: nothing to destroy
  EXPECT_EQ(destroyed, 1);
}
