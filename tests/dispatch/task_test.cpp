#include "cyan/dispatch/task.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cyan/dispatch.h"
#include "support/gated_task.h"
#include "support/lifecycle.h"
#include "support/owned_coroutine.h"
#include "support/sync_wait.h"

namespace {

using cyan::dispatch::future;
using cyan::dispatch::task;
using cyan::test::gated_task;
using cyan::test::lifecycle;
using cyan::test::owned_coroutine;
using cyan::test::sync_wait;

task<int> answer() {
  co_return 42;
}

task<int> count_start(int& started) {
  ++started;
  co_return 7;
}

TEST(task, does_not_start_until_awaited) {
  int started = 0;
  task<int> counted = count_start(started);
  // Expect the body untouched by the call, run once by the await.
  EXPECT_EQ(started, 0);
  EXPECT_TRUE(counted.valid());
  EXPECT_FALSE(counted.is_ready());
  EXPECT_EQ(sync_wait(std::move(counted)), 7);
  EXPECT_EQ(started, 1);
}

task<> set_to(int& target, int value) {
  target = value;
  co_return;
}

task<int&> larger_of(int& a, int& b) {
  co_return a > b ? a : b;
}

TEST(task, yields_a_value_nothing_or_a_reference) {
  EXPECT_EQ(sync_wait(answer()), 42);

  int target = 0;
  sync_wait(set_to(target, 5));
  EXPECT_EQ(target, 5);

  int a = 3;
  int b = 9;
  int& larger = sync_wait(larger_of(a, b));
  // Expect the very object returned, not a copy.
  EXPECT_EQ(&larger, &b);
  larger = 11;
  EXPECT_EQ(b, 11);
}

task<std::unique_ptr<int>> make_unique_int(int value) {
  co_return std::make_unique<int>(value);
}

task<int> unwrap(task<std::unique_ptr<int>> inner) {
  std::unique_ptr<int> owned = co_await std::move(inner);
  co_return *owned + 1;
}

TEST(task, moves_a_move_only_result_out) {
  std::unique_ptr<int> owned = sync_wait(make_unique_int(4));
  ASSERT_NE(owned, nullptr);
  EXPECT_EQ(*owned, 4);
  EXPECT_EQ(sync_wait(unwrap(make_unique_int(8))), 9);
}

task<lifecycle> make_lifecycle(std::int64_t value) {
  co_return lifecycle(value);
}

task<std::int64_t> await_lifecycle_twice(std::vector<std::string>& trace) {
  task<lifecycle> made = make_lifecycle(6);
  const lifecycle first = co_await made;  // an lvalue task: its result is still moved out
  trace.push_back("first " + std::to_string(first.value));
  try {
    (void)co_await made;
  } catch (const std::logic_error&) {
    trace.emplace_back("second await refused");
  }
  co_return first.value;
}

TEST(task, moves_the_result_out_once_and_refuses_a_second_await) {
  lifecycle::reset();
  std::vector<std::string> trace;
  EXPECT_EQ(sync_wait(await_lifecycle_twice(trace)), 6);
  EXPECT_EQ(trace, (std::vector<std::string>{ "first 6", "second await refused" }));
  EXPECT_EQ(lifecycle::live(), 0);
}

task<int> throw_after(std::vector<std::string>& trace) {
  trace.emplace_back("inner throws");
  throw std::runtime_error("inner failed");
  co_return 0;
}

task<int> pass_through(std::vector<std::string>& trace) {
  trace.emplace_back("middle awaits");
  const int value = co_await throw_after(trace);
  trace.emplace_back("middle after await");  // never reached
  co_return value;
}

task<std::string> catch_from_nested(std::vector<std::string>& trace) {
  try {
    (void)co_await pass_through(trace);
  } catch (const std::runtime_error& e) {
    trace.emplace_back("outer caught");
    co_return e.what();
  }
  co_return "nothing thrown";
}

TEST(task, an_exception_propagates_through_nested_awaits) {
  std::vector<std::string> trace;
  EXPECT_EQ(sync_wait(catch_from_nested(trace)), "inner failed");
  EXPECT_EQ(trace, (std::vector<std::string>{ "middle awaits", "inner throws", "outer caught" }));

  trace.clear();
  EXPECT_THROW((void)sync_wait(pass_through(trace)), std::runtime_error);
  EXPECT_EQ(trace, (std::vector<std::string>{ "middle awaits", "inner throws" }));
}

task<int> leaf(std::vector<std::string>& trace, int id) {
  trace.push_back("leaf " + std::to_string(id));
  co_return id;
}

task<int> middle(std::vector<std::string>& trace) {
  trace.emplace_back("middle begins");
  const int first = co_await leaf(trace, 1);
  const int second = co_await leaf(trace, 2);
  trace.emplace_back("middle ends");
  co_return first + second;
}

task<int> outer(std::vector<std::string>& trace) {
  trace.emplace_back("outer begins");
  task<int> later = leaf(trace, 3);  // created first, run last: tasks are lazy
  const int sum = co_await middle(trace);
  const int third = co_await std::move(later);
  trace.emplace_back("outer ends");
  co_return sum * 10 + third;
}

TEST(task, nested_awaits_run_in_program_order) {
  std::vector<std::string> trace;
  EXPECT_EQ(sync_wait(outer(trace)), 33);
  EXPECT_EQ(trace, (std::vector<std::string>{ "outer begins", "middle begins", "leaf 1", "leaf 2",
                                              "middle ends", "leaf 3", "outer ends" }));
}

task<int> one() {
  co_return 1;
}

task<long> sum_of_ones(long count) {
  long sum = 0;
  for (long i = 0; i < count; ++i) {
    sum += co_await one();
  }
  co_return sum;
}

// Runs `body` on a new thread with a stack of `stack_bytes`, and joins it.
template <typename Body>
void run_on_stack_of(std::size_t stack_bytes, Body body) {
  pthread_attr_t attributes;
  ASSERT_EQ(pthread_attr_init(&attributes), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attributes, stack_bytes), 0);
  pthread_t thread;
  auto run = [](void* context) -> void* {
    (*static_cast<Body*>(context))();
    return nullptr;
  };
  const int created = pthread_create(&thread, &attributes, run, &body);
  pthread_attr_destroy(&attributes);
  ASSERT_EQ(created, 0);
  ASSERT_EQ(pthread_join(thread, nullptr), 0);
}

TEST(task, a_million_synchronous_co_awaits_use_constant_stack) {
  // Each await starts a task that finishes at once. If going back to the awaiter nested a call
  // instead of returning to it (or jumping to it by a tail call), every iteration would leave at
  // least one call frame (16 bytes or more) on the stack: 1,000,000 of them overflow this 1 MiB
  // stack (a crash, not a failure) many times over.
  const long count = 1'000'000;
  long sum = 0;
  run_on_stack_of(std::size_t{ 1 } << 20, [&] { sum = sync_wait(sum_of_ones(count)); });
  EXPECT_EQ(sum, count);
}

task<> hold(lifecycle parameter, int& started) {
  ++started;
  const lifecycle local(parameter.value + 1);
  co_return;
}

TEST(task, destroying_a_never_started_task_destroys_its_frame_and_parameters) {
  lifecycle::reset();
  int started = 0;
  {
    task<> never_started = hold(lifecycle(1), started);
    // Expect the frame's copy of the parameter alive (the argument itself is gone).
    EXPECT_EQ(lifecycle::live(), 1);
  }
  EXPECT_EQ(lifecycle::live(), 0);
  EXPECT_EQ(started, 0);
}

// An awaitable the test resumes by hand (or never): it only records who waits on it.
struct manual_gate {
  std::coroutine_handle<> waiting;

  [[nodiscard]] bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> awaiting) noexcept { waiting = awaiting; }
  void await_resume() const noexcept {}
};

task<int> wait_at(manual_gate& gate, lifecycle parameter, int& resumed) {
  const lifecycle local(2);
  co_await gate;
  ++resumed;
  co_return static_cast<int>(parameter.value + local.value);
}

owned_coroutine await_into(task<int> awaited, int& out) {
  out = co_await std::move(awaited);
}

TEST(task, destroying_the_awaiter_of_a_suspended_task_destroys_both_frames) {
  lifecycle::reset();
  manual_gate gate;
  int resumed = 0;
  int out = -1;
  owned_coroutine awaiting = await_into(wait_at(gate, lifecycle(1), resumed), out);
  EXPECT_FALSE(awaiting.done());
  EXPECT_TRUE(gate.waiting);
  EXPECT_EQ(lifecycle::live(), 2);  // the task's parameter and local
  awaiting.destroy();               // destroys the task it holds, suspended at the gate
  EXPECT_EQ(lifecycle::live(), 0);
  EXPECT_EQ(resumed, 0);
  EXPECT_EQ(out, -1);
}

owned_coroutine await_by_reference(task<int>& awaited, int& out) {
  out = co_await awaited;
}

TEST(task, a_suspended_task_resumes_its_awaiter_once_or_is_destroyed_without_resuming) {
  lifecycle::reset();
  // Resumed: the awaiter gets the result and finishes.
  manual_gate gate;
  int resumed = 0;
  int out = -1;
  task<int> held = wait_at(gate, lifecycle(1), resumed);
  owned_coroutine awaiting = await_by_reference(held, out);
  EXPECT_FALSE(held.is_ready());
  gate.waiting.resume();
  EXPECT_TRUE(held.is_ready());
  EXPECT_TRUE(awaiting.done());
  EXPECT_EQ(out, 3);
  EXPECT_EQ(resumed, 1);

  // Destroyed while suspended: its frame goes, the awaiter stays suspended where it was.
  manual_gate second_gate;
  out = -1;
  task<int> second = wait_at(second_gate, lifecycle(5), resumed);
  owned_coroutine second_awaiting = await_by_reference(second, out);
  // Expect the suspended task's parameter and local, and the finished one's parameter: its
  // frame lives until the task is destroyed, its body's locals do not.
  EXPECT_EQ(lifecycle::live(), 2 + 1);
  second = task<int>();
  EXPECT_EQ(lifecycle::live(), 1);
  EXPECT_FALSE(second_awaiting.done());
  EXPECT_EQ(out, -1);
  EXPECT_EQ(resumed, 1);
  second_awaiting.destroy();
  held = task<int>();
  EXPECT_EQ(lifecycle::live(), 0);
}

task<int> add_one(future<int> awaited, std::atomic<int>& resumed) {
  const lifecycle alive(1);
  const int value = co_await awaited;
  resumed.fetch_add(1);
  co_return value + 1;
}

owned_coroutine await_into_atomic(task<int> awaited, std::atomic<int>& out) {
  out.store(co_await std::move(awaited));
}

TEST(task, awaits_a_future_completed_on_another_thread) {
  lifecycle::reset();
  cyan::dispatch::handler_thread thread;
  gated_task gated(thread);
  std::atomic<int> resumed{ 0 };
  std::atomic<int> out{ -1 };
  owned_coroutine awaiting = await_into_atomic(add_one(std::move(gated.result), resumed), out);
  EXPECT_FALSE(awaiting.done());  // suspended: the future's task waits for the gate
  ASSERT_TRUE(gated.open_and_wait_behind());
  EXPECT_TRUE(awaiting.done());
  EXPECT_EQ(out.load(), 8);
  EXPECT_EQ(resumed.load(), 1);
  thread.stop();
  thread.join();
  EXPECT_EQ(thread.stats().executed, 2u);
  EXPECT_EQ(lifecycle::live(), 0);
}

TEST(task, destroying_a_task_suspended_on_a_future_withdraws_its_continuation) {
  lifecycle::reset();
  cyan::dispatch::handler_thread thread;
  gated_task gated(thread);
  std::atomic<int> resumed{ 0 };
  std::atomic<int> out{ -1 };
  owned_coroutine awaiting = await_into_atomic(add_one(std::move(gated.result), resumed), out);
  EXPECT_FALSE(awaiting.done());
  EXPECT_EQ(lifecycle::live(), 1);
  awaiting.destroy();  // destroys the task, whose frame destroys the future: continuation withdrawn
  EXPECT_EQ(lifecycle::live(), 0);
  ASSERT_TRUE(gated.open_and_wait_behind());
  // Expect no resumption of the freed frames (ASan reports it as a heap-use-after-free).
  EXPECT_EQ(resumed.load(), 0);
  EXPECT_EQ(out.load(), -1);
  thread.stop();
  thread.join();
  EXPECT_EQ(thread.stats().executed, 2u);
}

// The README's example.
task<int> parse(std::string text) {
  co_return std::stoi(text);
}

task<int> total(std::string text) {
  const int parsed = co_await parse(std::move(text));
  const int tripled = co_await cyan::dispatch::async_awaitable([parsed] { return 3 * parsed; });
  co_return parsed + tripled;
}

TEST(task, sync_wait_blocks_until_a_task_resumed_elsewhere_finishes) {
  EXPECT_EQ(sync_wait(total("14")), 14 + 42);
}

TEST(task, awaiting_an_empty_or_moved_from_task_throws_logic_error) {
  task<int> empty;
  EXPECT_FALSE(empty.valid());
  EXPECT_FALSE(empty.is_ready());
  EXPECT_THROW((void)sync_wait(std::move(empty)), std::logic_error);

  task<int> original = answer();
  task<int> moved = std::move(original);
  EXPECT_FALSE(original.valid());  // NOLINT(bugprone-use-after-move): the point of the test
  EXPECT_THROW((void)sync_wait(std::move(original)), std::logic_error);
  EXPECT_EQ(sync_wait(std::move(moved)), 42);
}

}  // namespace
