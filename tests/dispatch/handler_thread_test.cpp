// cyan/dispatch/handler_thread.h: posting, awaitables, delays, serial tokens, stop modes,
// options, stats, the event loop and idleness.

#include "cyan/dispatch/handler_thread.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <latch>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "cyan/common/thread.h"
#include "cyan/dispatch/detail/asymmetric_fence.h"
#include "cyan/dispatch/handler.h"
#include "cyan/event/detail/ring.h"
#include "cyan/event/io.h"
#include "cyan/event/timer.h"
#include "support/cpu_time.h"
#include "support/descriptors.h"
#include "support/discard_ring.h"
#include "support/lifecycle.h"
#include "support/weighted_tasks.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::executor_stopped;
using cyan::dispatch::handler_thread;
using cyan::dispatch::stop_mode;
using cyan::dispatch::task_cancelled;
using cyan::test::lifecycle;

// Blocks the handler thread until release() so that work piles up behind it.
class gate {
 public:
  void block(handler_thread& thread) {
    thread.post([this] {
      entered_.count_down();
      released_.wait();
    });
    entered_.wait();
  }
  void release() { released_.count_down(); }

 private:
  std::latch entered_{ 1 };
  std::latch released_{ 1 };
};

// Counts a latch down when it goes out of scope, also when a check before that fails, so that
// no thread is left blocked on it.
class count_down_at_exit {
 public:
  explicit count_down_at_exit(std::latch& latch) : latch_(latch) {}
  ~count_down_at_exit() { latch_.count_down(); }
  count_down_at_exit(const count_down_at_exit&) = delete;
  count_down_at_exit& operator=(const count_down_at_exit&) = delete;

 private:
  std::latch& latch_;
};

TEST(handler_thread, post_runs_on_the_thread_in_post_order) {
  handler_thread thread;
  std::vector<int> order;  // touched only on the handler thread until join()
  std::vector<std::thread::id> ran_on;
  for (int i = 0; i < 1000; ++i) {
    thread.post([&, i] {
      order.push_back(i);
      ran_on.push_back(std::this_thread::get_id());
    });
  }
  thread.stop();
  thread.join();
  ASSERT_EQ(order.size(), 1000u);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(order[i], i);
    EXPECT_EQ(ran_on[i], thread.get_id());
  }
  EXPECT_NE(thread.get_id(), std::this_thread::get_id());
}

TEST(handler_thread, move_only_and_large_closures_run_and_are_destroyed_once) {
  lifecycle::reset();
  {
    handler_thread thread;
    auto owned = std::make_unique<int>(5);
    std::atomic<int> sum{ 0 };
    thread.post([&sum, owned = std::move(owned), item = lifecycle(1)] { sum += *owned; });
    struct big {
      char bytes[200] = {};
    };
    thread.post([&sum, payload = big{}, item = lifecycle(2)] { sum += 1 + payload.bytes[0]; });
    EXPECT_EQ(thread.post_awaitable([&sum] { return sum.load(); }).get(), 6);
  }
  EXPECT_EQ(lifecycle::live(), 0);
}

// Every post form takes a closure that returns a value (the result is ignored), and a move-only
// one: each runs exactly once (distinct weights, so a lost or doubled one changes the sum).
TEST(handler_thread, post_accepts_closures_that_return_a_value) {
  handler_thread thread;
  cyan::dispatch::serial_token token;
  cyan::test::weighted_tasks tasks(6);
  thread.post(tasks.returning_int(1));
  thread.post(tasks.returning_int(2), 1ms);
  thread.post(token, tasks.returning_int(4));
  thread.post(tasks.move_only(8));
  thread.post(tasks.move_only(16), 1ms);
  thread.post(token, tasks.move_only(32));
  EXPECT_EQ(tasks.wait_for_sum(), 63);
  thread.stop();
  thread.join();
}

TEST(handler_thread, post_awaitable_returns_values_and_exceptions) {
  handler_thread thread;
  auto number = thread.post_awaitable([] { return 42; });
  auto text = thread.post_awaitable([] { return std::string("cyan"); });
  auto failure = thread.post_awaitable([]() -> int { throw std::domain_error("bad"); });
  auto nothing = thread.post_awaitable([] {});
  EXPECT_EQ(number.get(), 42);
  EXPECT_EQ(text.get(), "cyan");
  EXPECT_THROW(failure.get(), std::domain_error);
  EXPECT_NO_THROW(nothing.get());
}

TEST(handler_thread, delayed_posts_run_no_earlier_than_their_delay_in_deadline_order) {
  handler_thread thread;
  std::vector<int> order;
  const auto start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::duration ran_after_30{};
  thread.post([&] { order.push_back(3); }, 50ms);
  thread.post(
      [&] {
        order.push_back(2);
        ran_after_30 = std::chrono::steady_clock::now() - start;
      },
      30ms);
  // A plain post, then a zero delay: the delayed one runs as soon as possible, which is after
  // the earlier plain post (whether it is due before the thread sees it or not).
  thread.post([&] { order.push_back(0); });
  thread.post([&] { order.push_back(1); }, 0ms);
  auto last = thread.post_awaitable([&] { return order; }, 70ms);
  EXPECT_EQ(last.get(), (std::vector<int>{ 0, 1, 2, 3 }));
  EXPECT_GE(ran_after_30, 30ms);
  EXPECT_LE(ran_after_30, 30ms + 5s);  // generous: a lost timer fails, a slow machine does not
}

TEST(handler_thread, stop_drain_runs_everything_already_posted) {
  handler_thread thread;
  gate blocked;
  blocked.block(thread);
  int ran = 0;
  for (int i = 0; i < 1000; ++i) {
    thread.post([&] { ++ran; });
  }
  EXPECT_EQ(thread.stats().queued, 1000u);
  thread.stop(stop_mode::drain);
  EXPECT_TRUE(thread.is_stopping());
  blocked.release();
  thread.join();
  EXPECT_EQ(ran, 1000);
  EXPECT_FALSE(thread.is_running());
  EXPECT_FALSE(thread.is_stopping());
  const auto stats = thread.stats();
  EXPECT_EQ(stats.posted, 1001u);
  EXPECT_EQ(stats.executed, 1001u);
  EXPECT_EQ(stats.cancelled, 0u);
  EXPECT_EQ(stats.queued, 0u);
}

TEST(handler_thread, stop_discard_runs_nothing_queued_and_cancels_awaitables) {
  lifecycle::reset();
  handler_thread thread;
  gate blocked;
  blocked.block(thread);
  std::atomic<int> ran{ 0 };
  std::vector<cyan::dispatch::future<int>> futures;
  for (int i = 0; i < 500; ++i) {
    thread.post([&ran, item = lifecycle(i)] { ++ran; });
    futures.push_back(thread.post_awaitable([&ran] { return ++ran; }));
  }
  thread.stop(stop_mode::discard);
  blocked.release();
  thread.join();
  EXPECT_EQ(ran.load(), 0);
  for (auto& f : futures) {
    EXPECT_THROW(f.get(), task_cancelled);
  }
  EXPECT_EQ(lifecycle::live(), 0);
  const auto stats = thread.stats();
  EXPECT_EQ(stats.executed, 1u);  // the gate
  EXPECT_EQ(stats.cancelled, 1000u);
  EXPECT_EQ(stats.queued, 0u);
}

// As thread_pool's test of the same name: tasks on two handler threads busy handing items to
// each other through channels, then stop(discard) of both. No task runs more after its thread's
// discard: no catch block, and every future reports task_cancelled.
TEST(handler_thread, stop_discard_runs_no_more_of_tasks_that_wait_on_each_other) {
  for (int round = 0; round < 20; ++round) {
    cyan::test::discard_ring ring(100);
    {
      handler_thread a;
      handler_thread b;
      for (std::size_t i = 0; i < 100; ++i) {
        ring.spawn(i < 50 ? a : b, i);  // runs of 50: hand-offs on one thread run inline
      }
      ring.wait_until_busy(2'000);
      a.stop(stop_mode::discard);
      b.stop(stop_mode::discard);
      a.join();
      b.join();
    }
    EXPECT_EQ(ring.caught(), 0) << "round " << round;
    EXPECT_EQ(ring.not_task_cancelled(), 0) << "round " << round;
  }
}

TEST(handler_thread, delayed_work_at_stop_is_cancelled_unless_due) {
  handler_thread thread;
  gate blocked;
  blocked.block(thread);
  const auto posted_at = std::chrono::steady_clock::now();
  auto due = thread.post_awaitable([] { return 1; }, 1ms);
  auto not_due = thread.post_awaitable([] { return 2; }, 1h);
  auto never = thread.post_awaitable([] { return 3; }, std::chrono::hours::max());
  // "Due" is a matter of time: let 1 ms pass (with margin) while the thread is blocked.
  std::this_thread::sleep_until(posted_at + 5ms);
  thread.stop();
  blocked.release();
  thread.join();
  EXPECT_EQ(due.get(), 1);
  EXPECT_THROW(not_due.get(), task_cancelled);
  EXPECT_THROW(never.get(), task_cancelled);
  EXPECT_EQ(thread.stats().cancelled, 2u);
}

TEST(handler_thread, post_after_stop_throws) {
  handler_thread thread;
  thread.stop();
  EXPECT_THROW(thread.post([] {}), executor_stopped);
  EXPECT_THROW(thread.post([] {}, 1ms), executor_stopped);
  EXPECT_THROW((void)thread.post_awaitable([] { return 1; }), executor_stopped);
  EXPECT_THROW(thread.send(1), executor_stopped);
  EXPECT_THROW(thread.send_delayed(1, 1ms), executor_stopped);
  cyan::dispatch::serial_token token;
  EXPECT_THROW(thread.post(token, [] {}), executor_stopped);
  thread.join();
  EXPECT_THROW(thread.post([] {}), executor_stopped);  // and after it finished
}

TEST(handler_thread, post_after_stop_throws_for_a_thread_that_has_its_own_lane) {
  handler_thread thread;
  for (int i = 0; i < 100; ++i) {  // more than kPromoteAfter: this thread gets a lane
    thread.post([] {});
  }
  thread.stop();
  EXPECT_THROW(thread.post([] {}), executor_stopped);
  thread.join();
  EXPECT_EQ(thread.stats().executed, 100u);
}

TEST(handler_thread, stop_and_post_from_the_thread_itself_do_not_deadlock) {
  handler_thread thread;
  std::promise<bool> threw;
  thread.post([&] {
    thread.stop();
    try {
      thread.post([] {});
      threw.set_value(false);
    } catch (const executor_stopped&) {
      threw.set_value(true);
    }
  });
  EXPECT_TRUE(threw.get_future().get());
  thread.join();
  EXPECT_FALSE(thread.is_running());
}

TEST(handler_thread, join_on_the_thread_itself_throws) {
  handler_thread thread;
  auto error = thread.post_awaitable([&] {
    try {
      thread.join();
    } catch (const std::system_error& e) {
      return e.code() == std::errc::resource_deadlock_would_occur;
    }
    return false;
  });
  EXPECT_TRUE(error.get());
}

TEST(handler_thread, tasks_can_post_to_their_own_thread) {
  handler_thread thread;
  std::promise<int> done;
  std::function<void(int)> step = [&](int n) {
    if (n == 100) {
      done.set_value(n);
      return;
    }
    thread.post([&step, n] { step(n + 1); });
  };
  thread.post([&] { step(0); });
  EXPECT_EQ(done.get_future().get(), 100);
}

TEST(handler_thread, options_name_and_affinity) {
  handler_thread::options opts;
  opts.name = "cyan-inbox-test";
  opts.cpu = 0;
  handler_thread thread(opts);
  auto seen = thread.post_awaitable([] {
    return std::pair{ cyan::this_thread::get_name(), sched_getcpu() };
  });
  const auto [name, cpu] = seen.get();
  EXPECT_EQ(name, "cyan-inbox-test");
  EXPECT_EQ(cpu, 0);
}

TEST(handler_thread, impossible_affinity_throws_from_the_constructor) {
  handler_thread::options opts;
  opts.cpu = 1u << 20;
  EXPECT_THROW(handler_thread thread(opts), std::system_error);
}

TEST(handler_thread, event_loop_is_usable_from_posted_work) {
  handler_thread thread;
  auto loop = thread.get_event_loop();
  ASSERT_NE(loop, nullptr);
  std::promise<std::thread::id> fired;
  std::unique_ptr<cyan::event::timer> timer;
  thread.post([&] {
    EXPECT_TRUE(loop->is_loop_thread());
    timer = std::make_unique<cyan::event::timer>(loop);
    timer->set_timeout(5ms);
    timer->set_callback([&] { fired.set_value(std::this_thread::get_id()); });
    timer->start();
  });
  EXPECT_EQ(fired.get_future().get(), thread.get_id());
  thread.post([&] { timer.reset(); });  // a watcher is destroyed on its loop's thread
  thread.stop();
  thread.join();
}

TEST(handler_thread, serial_token_tasks_on_two_threads_never_overlap_and_keep_order) {
  handler_thread first;
  handler_thread second;
  cyan::dispatch::serial_token token;
  std::atomic<int> running{ 0 };
  std::atomic<int> overlaps{ 0 };
  std::vector<int> order;  // guarded by the token itself
  std::vector<cyan::dispatch::future<void>> done;
  for (int i = 0; i < 200; ++i) {
    handler_thread& target = (i % 2 == 0) ? first : second;
    done.push_back(target.post_awaitable(token, [&, i] {
      if (running.fetch_add(1) != 0) {
        ++overlaps;
      }
      order.push_back(i);
      if (i == 100) {
        running.fetch_sub(1);
        throw std::runtime_error("a throwing task does not block the token");
      }
      running.fetch_sub(1);
    }));
  }
  for (int i = 0; i < 200; ++i) {
    if (i == 100) {
      EXPECT_THROW(done[i].get(), std::runtime_error);
    } else {
      done[i].get();
    }
  }
  EXPECT_EQ(overlaps.load(), 0);
  ASSERT_EQ(order.size(), 200u);
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(order[i], i);
  }
}

// A token's next task is handed over by the task before it, here after stop(drain): it was
// accepted before the stop, so the drain runs it (issue #11, item 3, exactly as reported).
TEST(handler_thread, stop_drain_runs_a_token_task_handed_over_after_the_stop) {
  cyan::dispatch::handler_thread h;
  cyan::dispatch::serial_token t;
  std::latch gate{ 1 };
  h.post(t, [&] { gate.wait(); });
  auto b = h.post_awaitable(t, [] { return 5; });
  h.stop();  // drain
  gate.count_down();
  EXPECT_EQ(b.get(), 5);
  h.join();
  const auto stats = h.stats();
  EXPECT_EQ(stats.posted, 2u);
  EXPECT_EQ(stats.executed, 2u);
  EXPECT_EQ(stats.cancelled, 0u);
  EXPECT_EQ(t.pending(), 0u);
}

TEST(handler_thread, stats_count_posted_executed_and_queued) {
  handler_thread thread;
  gate blocked;
  blocked.block(thread);
  for (int i = 0; i < 10; ++i) {
    thread.post([] {});
  }
  thread.post([] {}, 1h);
  auto stats = thread.stats();
  EXPECT_EQ(stats.posted, 12u);
  EXPECT_EQ(stats.executed, 1u);
  EXPECT_EQ(stats.queued, 11u);
  blocked.release();
  thread.post_awaitable([] {}).get();
  stats = thread.stats();
  EXPECT_EQ(stats.posted, 13u);
  EXPECT_EQ(stats.executed, 12u);
  EXPECT_EQ(stats.queued, 1u);  // the delayed one
  thread.stop();
  thread.join();
  stats = thread.stats();
  EXPECT_EQ(stats.cancelled, 1u);
  EXPECT_EQ(stats.queued, 0u);
}

// Process CPU time used over `wall` of idleness.
std::chrono::nanoseconds cpu_used_while_idle(std::chrono::milliseconds wall) {
  const auto before = cyan::test::cpu_time(CLOCK_PROCESS_CPUTIME_ID);
  std::this_thread::sleep_for(wall);  // the thing measured: a second of doing nothing
  return cyan::test::cpu_time(CLOCK_PROCESS_CPUTIME_ID) - before;
}

TEST(handler_thread, an_idle_thread_uses_no_cpu) {
  handler_thread thread;
  thread.post_awaitable([] {}).get();  // it has worked, spun and gone to sleep since
  const auto used = cpu_used_while_idle(1000ms);
  EXPECT_LT(used, 20ms) << "an idle handler_thread must sleep, not spin (2% of one core)";
}

// A thread that its loop woke (io here) polls the loop without sleeping while events keep
// coming; the first poll that finds nothing must put it back to sleep, not keep it polling.
TEST(handler_thread, a_thread_woken_by_io_sleeps_again_once_nothing_is_ready) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
  handler_thread thread;
  auto loop = thread.get_event_loop();
  std::unique_ptr<cyan::event::io> watcher;
  std::atomic<int> bytes{ 0 };
  std::latch got_three(3);
  thread
      .post_awaitable([&] {
        watcher = std::make_unique<cyan::event::io>(loop);
        watcher->set_file_descriptor(fds[0]);
        watcher->set_events(cyan::event::io::read);
        watcher->set_callback([&](cyan::event::io_events) {
          char byte = 0;
          while (::read(fds[0], &byte, 1) == 1) {
            bytes.fetch_add(1);
            got_three.count_down();
          }
        });
        watcher->start();
      })
      .get();
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(::write(fds[1], "x", 1), 1);
  }
  got_three.wait();
  const auto used = cpu_used_while_idle(1000ms);
  EXPECT_LT(used, 20ms) << "a thread woken by io must sleep again once nothing is ready";
  EXPECT_EQ(bytes.load(), 3);
  thread.post_awaitable([&] { watcher.reset(); }).get();
  thread.stop();
  thread.join();
  ::close(fds[0]);
  ::close(fds[1]);
}

// A chain of `gaps` delayed tasks, each posted by the one before on `thread`, `gap` apart:
// between two of them the thread has nothing to do and sleeps. Returns how many sleeps and naps
// the chain took (stats() differences). The calling thread blocks meanwhile (a futex wait),
// so no other thread of the process runs unless the caller started one.
struct sleeps_and_naps {
  std::uint64_t sleeps = 0;
  std::uint64_t naps = 0;
  std::uint64_t dear_fences = 0;
};
sleeps_and_naps sleep_through_a_chain(handler_thread& thread, int gaps,
                                      std::chrono::milliseconds gap) {
  const auto before = thread.stats();
  std::promise<void> done;
  std::function<void(int)> link = [&](int left) {
    if (left == 0) {
      done.set_value();
      return;
    }
    thread.post([&link, left] { link(left - 1); }, gap);
  };
  thread.post([&] { link(gaps); });
  done.get_future().wait();
  const auto after = thread.stats();
  return { after.sleeps - before.sleeps, after.naps - before.naps,
           after.dear_fences - before.dear_fences };
}

// The heavy fence costs a system call when no other thread of the process runs: then the
// thread announces its sleeps with it and sleeps without a bound, instead of napping first
// (a nap's bounded wait and timers cost more; see handler_thread_runtime::sleep()).
TEST(handler_thread, a_thread_alone_in_its_process_sleeps_without_naps) {
  handler_thread::options options;
  options.spin_before_sleep = 0ns;  // sleep at once: one sleep per gap at least
  handler_thread thread(options);
  thread.post_awaitable([] {}).get();
  constexpr int kGaps = 40;
  const sleeps_and_naps took = sleep_through_a_chain(thread, kGaps, 2ms);
  EXPECT_GE(took.sleeps, static_cast<std::uint64_t>(kGaps));
  // Before: a nap in every gap (kGaps), the fence never tried. The fence is cheap here, but a
  // busy host makes some timings dear (10-50 us where 2 us is usual: the vCPU or the thread
  // preempted); only two dear ones in a row make the thread nap, 15 naps before the next try,
  // twice as many after each retry that is dear again (common/detail/adaptive_attempts.h).
  // Counted since the thread started: a dear one before the chain pairs with one in it.
  const std::uint64_t dear_fences = thread.stats().dear_fences;
  if (dear_fences < 2) {
    EXPECT_EQ(took.naps, 0u) << "sleeps " << took.sleeps << ", dear fences " << dear_fences
                             << ": the fence is cheap here, yet the thread napped";
  } else {
    std::uint64_t allowed = 0;
    for (std::uint64_t retry = 0; retry + 1 < dear_fences; ++retry) {
      allowed += (std::uint64_t{ 1 } << std::min<std::uint64_t>(4 + retry, 8)) - 1;
    }
    EXPECT_LE(took.naps, allowed) << "sleeps " << took.sleeps << ", dear fences " << dear_fences
                                  << ": more naps than those dear fences make";
  }
}

// While another thread of the process runs, the fence interrupts it (a VM exit on a virtual
// machine, ~26 us here): the thread naps first, as before, retrying the fence now and then.
TEST(handler_thread, a_thread_naps_while_its_fence_would_interrupt_a_running_thread) {
  ::cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(::sched_getaffinity(0, sizeof allowed, &allowed), 0);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE && cpus.size() < 2; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) {
      cpus.push_back(cpu);
    }
  }
  if (cpus.size() < 2) {
    GTEST_SKIP() << "needs two CPUs: one for the running thread, one for the handler thread";
  }
  // The runner keeps one CPU busy; the handler thread lives on the other.
  std::atomic<bool> spinning{ true };
  std::thread runner([&] {
    cyan::this_thread::set_affinity(static_cast<unsigned>(cpus[0]));
    while (spinning.load(std::memory_order_relaxed)) {
    }
  });
  handler_thread::options options;
  options.cpu = cpus[1];
  options.spin_before_sleep = 0ns;
  options.nap = 500us;
  sleeps_and_naps took;
  std::chrono::nanoseconds median_cost{};
  {
    handler_thread thread(options);
    // What the fence costs there with the runner running (measured after the chain, when the
    // runner has long been on its CPU).
    took = sleep_through_a_chain(thread, 40, 2ms);
    median_cost = thread
                      .post_awaitable([] {
                        std::vector<std::chrono::nanoseconds> costs;
                        for (int i = 0; i < 21; ++i) {
                          const auto start = std::chrono::steady_clock::now();
                          cyan::dispatch::detail::asymmetric_fence::heavy();
                          costs.push_back(std::chrono::steady_clock::now() - start);
                        }
                        std::nth_element(costs.begin(), costs.begin() + 10, costs.end());
                        return costs[10];
                      })
                      .get();
  }
  spinning.store(false);
  runner.join();
  if (median_cost <= 10us) {
    GTEST_SKIP() << "the fence costs " << median_cost.count()
                 << " ns here even with a running thread: cheap enough to use every time";
  }
  // Two tries, then one after 16 gaps: naps in the 37 others. A try that finds the runner off
  // its CPU (a busy machine: other tests) is cheap and makes the thread try again, so fewer;
  // paying the fence every time, as a thread alone does, makes none.
  EXPECT_GE(took.naps, 10u) << "sleeps " << took.sleeps << ", fence " << median_cost.count()
                            << " ns: the thread paid the dear fence instead of napping";
}

// While a stopped thread waits for a token task held up by another executor, it serves its
// inbox as usual (delayed work that comes due runs) and sleeps in its loop meanwhile.
TEST(handler_thread, a_stopped_thread_waiting_for_a_token_hand_over_serves_and_sleeps) {
  std::latch entered(1);  // before the threads, which may use them until they are joined
  std::latch gate(1);
  handler_thread elsewhere;
  handler_thread thread;
  cyan::dispatch::serial_token token;
  elsewhere.post(token, [&] {
    entered.count_down();
    gate.wait();
  });
  entered.wait();
  auto parked = thread.post_awaitable(token, [] { return 1; });
  auto delayed = thread.post_awaitable([] { return 2; }, 20ms);
  {
    const count_down_at_exit opener(gate);
    thread.stop();
    ASSERT_EQ(delayed.wait_for(10s), std::future_status::ready);
    EXPECT_EQ(delayed.get(), 2);
    EXPECT_TRUE(thread.is_stopping());
    const auto used = cpu_used_while_idle(1000ms);
    EXPECT_LT(used, 20ms) << "a thread waiting at stop must sleep, not spin (2% of one core)";
  }
  EXPECT_EQ(parked.get(), 1);
  thread.join();
  EXPECT_FALSE(thread.is_running());
  EXPECT_EQ(thread.stats().executed, 2u);
  elsewhere.stop();
  elsewhere.join();
  EXPECT_EQ(token.pending(), 0u);
}

TEST(handler_thread, destructor_drains_and_joins) {
  std::atomic<int> ran{ 0 };
  {
    handler_thread thread;
    for (int i = 0; i < 100; ++i) {
      thread.post([&] { ++ran; });
    }
  }
  EXPECT_EQ(ran.load(), 100);
}

// A thread's own descriptors all close with it: its loop's (libev's epoll and eventfd), its
// io_uring ring and the eventfd the ring signals (where a ring can be set up), and the timerfd
// of a wait shorter than epoll's millisecond. The check after every test counts these kinds
// only beyond what the threads still alive can own (see support/descriptors.h); this counts
// each one.
TEST(handler_thread, destruction_closes_its_loop_ring_and_timer_descriptors) {
  const cyan::test::descriptor_table before = cyan::test::read_descriptor_table();
  std::vector<cyan::test::open_descriptor> during;
  bool has_ring = false;
  {
    handler_thread thread;
    const auto loop = thread.get_event_loop();
    std::promise<void> fired;
    std::unique_ptr<cyan::event::timer> timer;
    thread.post([&] {
      has_ring = cyan::event::detail::ring::this_thread() != nullptr;
      timer = std::make_unique<cyan::event::timer>(loop);
      timer->set_timeout(500us);  // shorter than the backend's wait: armed on the timerfd
      timer->set_callback([&] { fired.set_value(); });
      timer->start();
    });
    fired.get_future().get();
    during = cyan::test::added_descriptors(before.descriptors,
                                           cyan::test::read_descriptor_table().descriptors);
    thread.post([&] { timer.reset(); });  // a watcher is destroyed on its loop's thread
    thread.stop();
    thread.join();  // before `timer` goes
  }
  std::vector<std::string> kinds;
  for (const cyan::test::open_descriptor& d : during) {
    kinds.push_back(d.target);
  }
  std::sort(kinds.begin(), kinds.end());
  std::vector<std::string> expected{ "anon_inode:[eventfd]", "anon_inode:[eventpoll]",
                                     "anon_inode:[timerfd]" };
  if (has_ring) {
    expected.insert(expected.begin(), "anon_inode:[eventfd]");
    expected.insert(expected.end() - 1, "anon_inode:[io_uring]");
  }
  EXPECT_EQ(kinds, expected);
  EXPECT_EQ(cyan::test::describe(cyan::test::added_descriptors(
                before.descriptors, cyan::test::read_descriptor_table().descriptors)),
            "");
}

TEST(handler_thread, many_short_lived_threads_from_one_producer) {
  // Each thread gets a lane from this producer; the producer's cache must forget the lanes of
  // destroyed threads (asan checks for leaks and use-after-free).
  int total = 0;
  for (int round = 0; round < 100; ++round) {
    handler_thread thread;
    for (int i = 0; i < 40; ++i) {
      thread.post([&total] { ++total; });
    }
  }
  EXPECT_EQ(total, 4000);
}

// Each producer posts more than kPromoteAfter times, so it gets a lane; once it has exited and
// its lane is empty, the thread retires the lane. Expect the live-lane count up by one while a
// producer is alive, and back to its baseline once they all exited.
TEST(handler_thread, lanes_of_exited_producers_are_retired) {
  handler_thread thread;
  std::atomic<int> ran{ 0 };
  const std::uint64_t baseline = thread.stats().lanes;
  std::vector<std::uint64_t> lanes_seen_by_producer;
  for (int round = 0; round < 20; ++round) {
    std::thread producer([&] {
      for (int i = 0; i < 100; ++i) {
        thread.post([&] { ++ran; });
      }
      thread.post_awaitable([] {}).get();  // its lane is known to the thread by now
      lanes_seen_by_producer.push_back(thread.stats().lanes);
    });
    producer.join();
  }
  // Retiring happens in the thread's rounds: post (from this thread, which has no lane) until
  // the count is back, for at most 5 s.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  std::uint64_t polls = 0;
  while (thread.stats().lanes != baseline && std::chrono::steady_clock::now() < deadline) {
    thread.post_awaitable([] {}).get();
    ++polls;
  }
  EXPECT_EQ(thread.stats().lanes, baseline);
  for (const std::uint64_t lanes : lanes_seen_by_producer) {
    EXPECT_GE(lanes, baseline + 1) << "a live producer's lane is counted";
  }
  thread.stop();
  thread.join();
  EXPECT_EQ(ran.load(), 2000);
  EXPECT_EQ(thread.stats().posted, 2000u + 20u + polls);  // counts survive retirement
  EXPECT_EQ(thread.stats().queued, 0u);
}

// Posts to its handler_thread from its destructor, unless moved from: after the thread's stop,
// that post throws executor_stopped out of the destructor.
struct reposter {
  handler_thread* thread;
  explicit reposter(handler_thread* t) : thread(t) {}
  reposter(reposter&& other) noexcept : thread(std::exchange(other.thread, nullptr)) {}
  ~reposter() noexcept(false) {
    if (thread != nullptr) {
      thread->post([] {});
    }
  }
};

// Counts what reaches on_error(): executor_stopped, and anything else.
class counts_errors : public cyan::dispatch::handler {
 public:
  std::atomic<int> stopped{ 0 };
  std::atomic<int> other{ 0 };

 protected:
  void on_error(std::exception& error) noexcept override {
    (dynamic_cast<executor_stopped*>(&error) != nullptr ? stopped : other).fetch_add(1);
  }
};

// A closure whose destructor throws (it posts to the stopped thread) is reported to on_error()
// when stop(discard) destroys it, whichever way it came (the shared queue, a lane, the delayed
// list, a token), and the stop goes on: every other task is cancelled, nothing leaks. An
// awaitable's future reports the exception instead.
TEST(handler_thread, a_discarded_closure_whose_destructor_throws_goes_to_on_error) {
  lifecycle::reset();
  counts_errors errors;
  handler_thread thread(errors);
  cyan::dispatch::serial_token token;
  gate blocked;
  blocked.block(thread);
  std::atomic<int> ran{ 0 };
  thread.post([&ran, r = reposter(&thread)] { ++ran; });  // among the first posts: shared queue
  for (int i = 0; i < 40; ++i) {  // more than kPromoteAfter: the later posts use a lane
    thread.post([&ran, item = lifecycle(i)] { ++ran; });
  }
  thread.post([&ran, r = reposter(&thread)] { ++ran; });
  thread.post([&ran, r = reposter(&thread)] { ++ran; }, 1h);
  thread.post(token, [&ran, r = reposter(&thread)] { ++ran; });
  auto awaited = thread.post_awaitable([&ran, r = reposter(&thread)] { return ++ran; });
  thread.stop(stop_mode::discard);
  blocked.release();
  thread.join();
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(errors.stopped.load(), 4);
  EXPECT_EQ(errors.other.load(), 0);
  EXPECT_THROW(awaited.get(), executor_stopped);
  EXPECT_EQ(lifecycle::live(), 0);
  const auto stats = thread.stats();
  EXPECT_EQ(stats.executed, 1u);  // the gate
  EXPECT_EQ(stats.cancelled, 45u);
  EXPECT_EQ(stats.queued, 0u);
}

// The same for closures that ran during stop(drain) and throw when destroyed afterwards: each
// destructor's exception reaches on_error() once, and every other task still runs.
TEST(handler_thread, a_closure_whose_destructor_throws_after_it_ran_goes_to_on_error) {
  counts_errors errors;
  handler_thread thread(errors);
  cyan::dispatch::serial_token token;
  gate blocked;
  blocked.block(thread);
  std::atomic<int> ran{ 0 };
  thread.post([&ran, r = reposter(&thread)] { ++ran; });
  for (int i = 0; i < 40; ++i) {
    thread.post([&ran] { ++ran; });
  }
  thread.post([&ran, r = reposter(&thread)] { ++ran; });
  thread.post([&ran, r = reposter(&thread)] { ++ran; }, 0ms);  // due at the stop: runs
  thread.post(token, [&ran, r = reposter(&thread)] { ++ran; });
  auto awaited = thread.post_awaitable([&ran, r = reposter(&thread)] { return ++ran; });
  thread.stop(stop_mode::drain);
  blocked.release();
  thread.join();
  EXPECT_EQ(ran.load(), 45);
  EXPECT_EQ(errors.stopped.load(), 4);
  EXPECT_EQ(errors.other.load(), 0);
  EXPECT_THROW(awaited.get(), executor_stopped);  // it ran, then its destructor threw
  const auto stats = thread.stats();
  EXPECT_EQ(stats.executed, 46u);
  EXPECT_EQ(stats.cancelled, 0u);
}

}  // namespace
