#include "cyan/dispatch/future.h"

#include <gtest/gtest.h>

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <latch>
#include <memory>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "cyan/common/unique_function.h"
#include "cyan/dispatch/async.h"
#include "cyan/dispatch/co_spawn.h"
#include "cyan/dispatch/detail/frame_allocator.h"
#include "cyan/dispatch/handler_thread.h"
#include "cyan/dispatch/serial_token.h"
#include "cyan/dispatch/task.h"
#include "cyan/dispatch/thread_pool.h"
#include "support/allocation_counter.h"
#include "support/cpu_time.h"
#include "support/detached.h"
#include "support/gated_task.h"
#include "support/lifecycle.h"
#include "support/owned_coroutine.h"
#include "support/stop_support.h"
#include "support/stress_env.h"

namespace {

using cyan::dispatch::co_spawn;
using cyan::dispatch::future;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::dispatch::task_cancelled;
using cyan::dispatch::thread_pool;
using cyan::dispatch::detail::package;
using cyan::test::cpu_time;
using cyan::test::is_canceled;
using cyan::test::lifecycle;
using cyan::test::wait_started;
using outcome = cyan::test::stop_outcome;
using namespace std::chrono_literals;

TEST(future, get_returns_the_value_and_consumes_the_future) {
  auto [result, job] = package([] { return 42; });
  EXPECT_TRUE(result.valid());
  EXPECT_FALSE(result.is_ready());
  job();
  EXPECT_TRUE(result.is_ready());
  EXPECT_EQ(result.get(), 42);
  EXPECT_FALSE(result.valid());
  EXPECT_THROW(result.get(), std::future_error);
  EXPECT_THROW(result.wait(), std::future_error);
  EXPECT_THROW((void)result.is_ready(), std::future_error);
}

TEST(future, default_constructed_is_not_valid) {
  future<int> empty;
  EXPECT_FALSE(empty.valid());
  EXPECT_THROW((void)empty.wait_for(1ms), std::future_error);
}

TEST(future, get_rethrows_the_task_exception) {
  auto [result, job] = package([]() -> int { throw std::runtime_error("boom"); });
  job();
  try {
    result.get();
    FAIL() << "get() should have thrown";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "boom");
  }
  EXPECT_FALSE(result.valid());
}

TEST(future, a_job_destroyed_unrun_cancels_its_future) {
  lifecycle::reset();
  future<int> result;
  {
    auto [f, job] = package([captured = lifecycle(1)] { return 1; });
    result = std::move(f);
    EXPECT_EQ(lifecycle::live(), 1);
  }
  // Expect the closure gone and the future ready with task_cancelled.
  EXPECT_EQ(lifecycle::live(), 0);
  EXPECT_TRUE(result.is_ready());
  EXPECT_THROW(result.get(), task_cancelled);
}

TEST(future, void_and_reference_results) {
  int target = 5;
  auto [void_result, void_job] = package([&target] { target = 6; });
  auto [ref_result, ref_job] = package([&target]() -> int& { return target; });
  void_job();
  ref_job();
  void_result.get();
  int& ref = ref_result.get();
  EXPECT_EQ(&ref, &target);
  EXPECT_EQ(ref, 6);
}

TEST(future, move_only_results_and_closures) {
  auto [result, job] = package([p = std::make_unique<int>(7)]() mutable { return std::move(p); });
  job();
  std::unique_ptr<int> value = result.get();
  ASSERT_NE(value, nullptr);
  EXPECT_EQ(*value, 7);
}

TEST(future, the_closure_is_destroyed_before_the_result_is_ready) {
  lifecycle::reset();
  auto [result, job] = package([captured = lifecycle(3)] { return captured.value; });
  std::thread producer([job = std::move(job)]() mutable { job(); });
  EXPECT_EQ(result.get(), 3);
  EXPECT_EQ(lifecycle::live(), 0);  // released before get() returned
  producer.join();
}

TEST(future, wait_for_and_wait_until_time_out_while_the_job_is_held) {
  auto [result, job] = package([] { return 1; });
  // Expect timeouts: the job cannot run before it is handed to the producer below.
  EXPECT_EQ(result.wait_for(20ms), std::future_status::timeout);
  EXPECT_EQ(result.wait_until(std::chrono::system_clock::now() + 20ms),
            std::future_status::timeout);
  EXPECT_EQ(result.wait_for(-1s), std::future_status::timeout);
  std::thread producer([job = std::move(job)]() mutable { job(); });
  EXPECT_EQ(result.wait_for(std::chrono::hours::max()), std::future_status::ready);
  EXPECT_EQ(result.wait_until(std::chrono::steady_clock::now()), std::future_status::ready);
  EXPECT_EQ(result.get(), 1);
  producer.join();
}

// Measures the waiter's CPU, so the producer sleeps: the thing measured is a get() that waits
// 300 ms. It yields for at most 200 us and then sleeps: well under 20 ms of CPU.
TEST(future, a_long_get_sleeps_instead_of_spinning) {
  auto [result, job] = package([] { return 5; });
  std::thread producer([job = std::move(job)]() mutable {
    std::this_thread::sleep_for(300ms);
    job();
  });
  const auto before = cpu_time(CLOCK_THREAD_CPUTIME_ID);
  EXPECT_EQ(result.get(), 5);
  const auto used = cpu_time(CLOCK_THREAD_CPUTIME_ID) - before;
  producer.join();
  EXPECT_LT(used, 20ms) << "get() burned "
                        << std::chrono::duration<double, std::milli>(used).count()
                        << " ms of CPU while waiting 300 ms";
}

// The block comes from the frame pool (ASan builds: operator new); the first package() of a
// closure of this size on this thread fills the thread's free list for the size.
TEST(future, an_awaitable_task_is_one_pooled_block_and_waiting_when_ready_allocates_nothing) {
  const auto make = [] { return package([a = 1L, b = 2L, c = 3L] { return a + b + c; }); };
  make().second();
  cyan::test::start_counting_allocations();
  auto [result, job] = make();
  cyan::unique_function<void()> posted(std::move(job));  // what an executor stores
  int allocations = cyan::test::stop_counting_allocations();
  EXPECT_EQ(allocations, CYAN_FRAME_POOL ? 0 : 1);
  cyan::test::start_counting_allocations();
  posted();
  result.wait();
  EXPECT_EQ(result.wait_for(1s), std::future_status::ready);
  EXPECT_EQ(result.get(), 6);
  EXPECT_EQ(cyan::test::stop_counting_allocations(), 0);
}

TEST(future, converts_to_std_future_before_and_after_completion) {
  auto [late, late_job] = package([] { return std::string("late"); });
  std::future<std::string> late_std = std::move(late);
  EXPECT_FALSE(late.valid());
  std::thread producer([job = std::move(late_job)]() mutable { job(); });
  EXPECT_EQ(late_std.get(), "late");
  producer.join();

  auto [early, early_job] = package([]() -> int { throw std::logic_error("early"); });
  early_job();
  std::future<int> early_std = std::move(early);
  EXPECT_THROW(early_std.get(), std::logic_error);

  auto [cancelled, cancelled_job] = package([] {});
  std::future<void> cancelled_std = std::move(cancelled);
  { auto drop = std::move(cancelled_job); }
  EXPECT_THROW(cancelled_std.get(), task_cancelled);
}

using cyan::test::detached;

detached await_into(future<int> f, std::atomic<int>& out, std::thread::id& resumed_on) {
  int value = co_await f;
  resumed_on = std::this_thread::get_id();
  out.store(value, std::memory_order_release);
}

detached await_error(future<int> f, std::atomic<int>& caught) {
  try {
    co_await f;
  } catch (const task_cancelled&) {
    caught.store(1);
  }
}

TEST(future, co_await_resumes_on_the_completing_thread) {
  auto [result, job] = package([] { return 11; });
  std::atomic<int> out{ 0 };
  std::thread::id resumed_on;
  await_into(std::move(result), out, resumed_on);
  EXPECT_EQ(out.load(), 0);  // suspended: the job has not run
  std::thread::id producer_id;
  std::thread producer([&, job = std::move(job)]() mutable {
    producer_id = std::this_thread::get_id();
    job();
  });
  producer.join();
  EXPECT_EQ(out.load(std::memory_order_acquire), 11);
  EXPECT_EQ(resumed_on, producer_id);
}

TEST(future, co_await_on_a_ready_future_does_not_suspend) {
  auto [result, job] = package([] { return 12; });
  job();
  std::atomic<int> out{ 0 };
  std::thread::id resumed_on;
  await_into(std::move(result), out, resumed_on);
  EXPECT_EQ(out.load(), 12);
  EXPECT_EQ(resumed_on, std::this_thread::get_id());

  auto [cancelled, cancelled_job] = package([] { return 0; });
  std::atomic<int> caught{ 0 };
  await_error(std::move(cancelled), caught);
  { auto drop = std::move(cancelled_job); }
  EXPECT_EQ(caught.load(), 1);
}

using cyan::test::owned_coroutine;

// Counts its resumption past the co_await; `alive` lives in the frame, so the lifecycle
// counters show when the frame is freed.
owned_coroutine await_and_count(future<int> f, std::atomic<int>& resumed) {
  const lifecycle alive(1);
  (void)co_await f;
  resumed.fetch_add(1);
}

// Suspends once, then counts its resumption: a frame the test can hand to an awaiter by hand.
owned_coroutine count_resumption(std::atomic<int>& resumed) {
  co_await std::suspend_always{};
  resumed.fetch_add(1);
}

using cyan::test::gated_task;

TEST(future, destroying_a_coroutine_suspended_in_co_await_withdraws_its_continuation) {
  lifecycle::reset();
  cyan::dispatch::handler_thread thread;
  gated_task gated(thread);
  std::atomic<int> resumed{ 0 };
  owned_coroutine coroutine = await_and_count(std::move(gated.result), resumed);
  EXPECT_FALSE(coroutine.done());  // suspended: the task waits for the gate
  EXPECT_EQ(lifecycle::live(), 1);
  coroutine.destroy();  // destroys the future in the frame: its continuation is withdrawn
  EXPECT_EQ(lifecycle::live(), 0);
  ASSERT_TRUE(gated.open_and_wait_behind());
  // Expect no resumption of the freed frame (ASan reports it as a heap-use-after-free).
  EXPECT_EQ(resumed.load(), 0);
  thread.stop();
  thread.join();
  EXPECT_EQ(thread.stats().executed, 2u);
  EXPECT_EQ(lifecycle::live(), 0);
}

TEST(future, destroying_a_future_after_its_awaiter_suspended_withdraws_the_continuation) {
  cyan::dispatch::handler_thread thread;
  std::atomic<int> resumed{ 0 };
  owned_coroutine coroutine = count_resumption(resumed);
  {
    gated_task gated(thread);
    auto awaiter = gated.result.operator co_await();
    EXPECT_FALSE(awaiter.await_ready());  // EXPECT: the gate must open below in any case
    EXPECT_TRUE(awaiter.await_suspend(coroutine.handle()));
    gated.result = future<int>();  // destroys the awaited one, its continuation registered
    ASSERT_TRUE(gated.open_and_wait_behind());
  }
  // Expect the coroutine still suspended where the test left it, never resumed.
  EXPECT_EQ(resumed.load(), 0);
  EXPECT_FALSE(coroutine.done());
  coroutine.destroy();
  thread.stop();
  thread.join();
  EXPECT_EQ(thread.stats().executed, 2u);
}

// A minimal lazy coroutine type as an application writes one (its promise is not cyan's): the
// body starts at start(), stops at its end, and the destructor frees the frame wherever it is.
class lazy_coroutine {
 public:
  struct promise_type {
    lazy_coroutine get_return_object() noexcept {
      return lazy_coroutine(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };

  lazy_coroutine(lazy_coroutine&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)) {}
  lazy_coroutine& operator=(lazy_coroutine&&) = delete;
  ~lazy_coroutine() {
    if (handle_) {
      handle_.destroy();
    }
  }

  void start() { handle_.resume(); }
  [[nodiscard]] bool done() const { return handle_.done(); }

 private:
  explicit lazy_coroutine(std::coroutine_handle<promise_type> handle) noexcept : handle_(handle) {}

  std::coroutine_handle<promise_type> handle_;
};

// Awaits a future that the test keeps (and outlives the frame): destroying the frame leaves the
// future alive. `alive` lives in the frame, so the lifecycle counters show when it is freed.
template <typename T>
lazy_coroutine await_kept_future(future<T>& kept, std::atomic<int>& resumed) {
  const lifecycle alive(1);
  (void)co_await kept;
  resumed.fetch_add(1);
}

// The same await one level down, in a cyan task that the foreign coroutine awaits.
template <typename T>
cyan::dispatch::task<> task_awaiting_kept_future(future<T>& kept, std::atomic<int>& resumed) {
  const lifecycle alive(1);
  (void)co_await kept;
  resumed.fetch_add(1);
}

lazy_coroutine await_task(cyan::dispatch::task<> awaited) {
  co_await std::move(awaited);
}

// Issue #30 item 8: a foreign coroutine (or a cyan task it awaits) suspended in co_await on
// async_awaitable()'s future is destroyed; then the task completes while the future is alive.
// Expect the frame freed at once and never resumed, and the task's result (checked by `check`)
// still in the future. The gate orders the steps; the token runs the task behind the gated one
// only after that one returned, its continuation (if it still had one) included.
template <typename Coroutine, typename F, typename Check>
void expect_no_resumption_after_destroy(Coroutine start_awaiting, F body, Check check) {
  lifecycle::reset();
  cyan::dispatch::serial_token token;
  std::latch gate{ 1 };
  std::atomic<int> resumed{ 0 };
  auto result = cyan::dispatch::async_awaitable(token, [&gate, body]() mutable {
    gate.wait();
    return body();
  });
  {
    lazy_coroutine coroutine = start_awaiting(result, resumed);
    coroutine.start();
    EXPECT_FALSE(coroutine.done());  // suspended: the task waits for the gate
    EXPECT_EQ(lifecycle::live(), 1);
  }
  EXPECT_EQ(lifecycle::live(), 0);
  EXPECT_TRUE(result.valid());
  gate.count_down();
  auto behind = cyan::dispatch::async_awaitable(token, [] { return 8; });
  // 10 s: a bound for a loaded machine, not a deadline; the tasks take microseconds.
  ASSERT_EQ(behind.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(behind.get(), 8);
  // Expect no resumption of the freed frame (ASan and TSan report it as a heap-use-after-free).
  EXPECT_EQ(resumed.load(), 0);
  check(std::move(result));
  EXPECT_EQ(lifecycle::live(), 0);
}

TEST(future, destroying_a_foreign_coroutine_suspended_on_a_future_that_lives_on_withdraws_it) {
  expect_no_resumption_after_destroy(
      [](future<int>& kept, std::atomic<int>& resumed) { return await_kept_future(kept, resumed); },
      [] { return 7; }, [](future<int> result) { EXPECT_EQ(result.get(), 7); });
}

TEST(future, a_destroyed_foreign_awaiter_of_a_void_future_is_not_resumed) {
  std::atomic<int> ran{ 0 };
  expect_no_resumption_after_destroy(
      [](future<void>& kept, std::atomic<int>& resumed) {
        return await_kept_future(kept, resumed);
      },
      [&ran] { ran.fetch_add(1); },
      [&ran](future<void> result) {
        result.get();
        EXPECT_EQ(ran.load(), 1);
      });
}

TEST(future, a_destroyed_foreign_awaiter_of_a_move_only_future_is_not_resumed) {
  expect_no_resumption_after_destroy(
      [](future<std::unique_ptr<int>>& kept, std::atomic<int>& resumed) {
        return await_kept_future(kept, resumed);
      },
      [] { return std::make_unique<int>(9); },
      [](future<std::unique_ptr<int>> result) {
        std::unique_ptr<int> value = result.get();
        ASSERT_NE(value, nullptr);
        EXPECT_EQ(*value, 9);
      });
}

TEST(future, destroying_a_task_suspended_on_a_future_that_lives_on_withdraws_it) {
  expect_no_resumption_after_destroy(
      [](future<int>& kept, std::atomic<int>& resumed) {
        return await_task(task_awaiting_kept_future(kept, resumed));
      },
      [] { return 7; }, [](future<int> result) { EXPECT_EQ(result.get(), 7); });
}

// The future goes first (its continuation withdrawn), the task completes, then the frame of the
// foreign coroutine that awaited it goes: expect no resumption, and the destroyed awaiter not to
// touch the state that the future and the task have both left (ASan would report it).
TEST(future, a_foreign_awaiter_destroyed_after_its_future_and_the_task_is_not_resumed) {
  lifecycle::reset();
  cyan::dispatch::serial_token token;
  std::latch gate{ 1 };
  std::atomic<int> resumed{ 0 };
  auto result = cyan::dispatch::async_awaitable(token, [&gate] {
    gate.wait();
    return 7;
  });
  {
    lazy_coroutine coroutine = await_kept_future(result, resumed);
    coroutine.start();
    EXPECT_FALSE(coroutine.done());
    result = future<int>();
    gate.count_down();
    auto behind = cyan::dispatch::async_awaitable(token, [] { return 8; });
    ASSERT_EQ(behind.wait_for(10s), std::future_status::ready);
    EXPECT_EQ(behind.get(), 8);
    EXPECT_EQ(resumed.load(), 0);
    EXPECT_EQ(lifecycle::live(), 1);
  }
  EXPECT_EQ(resumed.load(), 0);
  EXPECT_EQ(lifecycle::live(), 0);
}

TEST(future, racing_producers_and_blocking_consumers_see_every_result) {
  const int count = 20000;
  std::vector<future<int>> results;
  std::vector<cyan::unique_function<void()>> jobs;
  for (int i = 0; i < count; ++i) {
    auto [f, job] = package([i] { return i; });
    results.push_back(std::move(f));
    jobs.emplace_back(std::move(job));
  }
  std::thread producer([&] {
    for (auto& job : jobs) {
      job();
    }
  });
  long long sum = 0;
  for (auto& f : results) {
    sum += f.get();
  }
  producer.join();
  EXPECT_EQ(sum, static_cast<long long>(count) * (count - 1) / 2);
}

// Throws std::runtime_error("destructor") from its destructor, unless moved from.
struct throws_when_destroyed {
  bool armed = true;
  throws_when_destroyed() = default;
  throws_when_destroyed(throws_when_destroyed&& other) noexcept
      : armed(std::exchange(other.armed, false)) {}
  ~throws_when_destroyed() noexcept(false) {
    if (armed) {
      throw std::runtime_error("destructor");
    }
  }
};

// What the closure's destructor throws becomes the future's result, whether the job ran it
// (in place of its value) or was destroyed unrun (in place of task_cancelled); nothing escapes
// the job, and the rest of the closure is destroyed all the same.
TEST(future, a_throwing_closure_destructor_is_reported_by_the_future) {
  lifecycle::reset();
  auto [ran, ran_job] = package([t = throws_when_destroyed(), item = lifecycle(1)] { return 1; });
  auto [cancelled, cancelled_job] =
      package([t = throws_when_destroyed(), item = lifecycle(2)] { return 2; });
  EXPECT_EQ(lifecycle::live(), 2);
  ran_job();
  { auto dropped = std::move(cancelled_job); }
  EXPECT_EQ(lifecycle::live(), 0);
  for (auto* result : { &ran, &cancelled }) {
    try {
      result->get();
      ADD_FAILURE() << "get() should have thrown";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "destructor");
    }
  }
}

TEST(cancel, a_stop_request_ends_a_future_await_and_the_late_completion_is_harmless) {
  handler_thread h;
  thread_pool pool(1);
  std::latch gate{ 1 };
  std::stop_source stop;
  auto f = co_spawn(
      h,
      [&]() -> task<outcome> {
        outcome o;
        future<int> blocked = pool.post_awaitable([&gate] {
          gate.wait();
          return 1;
        });
        try {
          (void)co_await blocked;
        } catch (const std::system_error& e) {
          o.canceled = is_canceled(e);
        }
        o.on_home = h.is_current();
        co_return o;
      },
      stop.get_token());
  wait_started(h, 1);
  stop.request_stop();
  const outcome o = f.get();
  EXPECT_TRUE(o.canceled);
  EXPECT_TRUE(o.on_home);
  gate.count_down();  // the pool task completes a future nobody awaits any more
}

// Completions racing with stop requests: each task sees exactly one outcome.
TEST(cancel, completion_and_stop_race_without_losing_or_doubling_a_resumption) {
  const std::size_t rounds = cyan::test::env_or("CYAN_STRESS_CANCEL_ROUNDS", 2000);
  handler_thread h;
  thread_pool pool(2);
  std::atomic<std::uint64_t> values{ 0 };
  std::atomic<std::uint64_t> canceled{ 0 };
  for (std::size_t i = 0; i < rounds; ++i) {
    std::stop_source stop;
    auto f = co_spawn(
        h,
        [&]() -> task<> {
          try {
            (void)co_await pool.post_awaitable([] { return 1; });
            values.fetch_add(1);
          } catch (const std::system_error& e) {
            canceled += is_canceled(e);
          }
        },
        stop.get_token());
    pool.post([stop]() mutable { stop.request_stop(); });
    f.get();
  }
  EXPECT_EQ(values.load() + canceled.load(), rounds);
}

}  // namespace
