// The withdrawal of a co_await continuation against the completion on another thread. Each
// round, a coroutine that is not cyan's suspends through a future's awaiter, then the test
// thread destroys the awaiter (as destroying the coroutine's frame does) at the moment a
// completer thread completes the task. Exactly one side wins: the completion resumes the
// coroutine, or it never does; either way the completer touches neither the destroyed awaiter
// nor a freed state (TSan would report a race, ASan a use-after-free), and the result stays in
// the future when the future outlives the awaiter.
//
// The awaiter stands alone here, apart from the coroutine it suspended: a frame destroyed while
// the completion resumes it is a race of the caller's (a coroutine must not be destroyed while
// another thread may resume it), so only the awaiter's destruction can race the completion.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include "cyan/common/unique_function.h"
#include "cyan/dispatch/future.h"
#include "support/owned_coroutine.h"
#include "support/stress_env.h"

namespace {

using cyan::dispatch::future;
using cyan::dispatch::detail::package;
using cyan::test::env_or;
using cyan::test::owned_coroutine;

// Suspends once, then counts its resumption: the coroutine the awaiter registers.
owned_coroutine count_resumption(std::atomic<int>& resumed) {
  co_await std::suspend_always{};
  resumed.fetch_add(1);
}

// Busy-waits for `steps` volatile stores, which the compiler may not drop: about 1 ns each.
void spin(int steps) {
  [[maybe_unused]] volatile int sink = 0;
  for (int step = 0; step < steps; ++step) {
    sink = step;
  }
}

// Runs each round's job on its own thread, lined up with the test thread: arm() hands a job
// over and returns once the completer spins, ready; go() lets it run the job after `delay`
// spins; finish() returns once the job has returned (its continuation, if it ran, included).
class completer {
 public:
  completer() : thread_([this] { run(); }) {}
  completer(const completer&) = delete;
  completer& operator=(const completer&) = delete;
  ~completer() {
    arm(cyan::unique_function<void()>(), 0);  // an empty job ends the thread
    go();
    thread_.join();
  }

  void arm(cyan::unique_function<void()> job, int delay) {
    job_ = std::move(job);
    delay_ = delay;
    // release: pairs with the acquire load in run(), publishing job_ and delay_.
    armed_.fetch_add(1, std::memory_order_release);
    // acquire: pairs with the release in run(); the completer now spins on go_.
    while (ready_.load(std::memory_order_acquire) != armed_.load(std::memory_order_relaxed)) {
      std::this_thread::yield();
    }
  }

  // relaxed: the job and its delay were published by arm().
  void go() { go_.fetch_add(1, std::memory_order_relaxed); }

  void finish() {
    // acquire: pairs with the release in run(), making what the job did visible.
    while (finished_.load(std::memory_order_acquire) != armed_.load(std::memory_order_relaxed)) {
      std::this_thread::yield();
    }
  }

 private:
  void run() {
    for (std::uint64_t round = 1;; ++round) {
      // acquire: pairs with the release in arm().
      while (armed_.load(std::memory_order_acquire) != round) {
        std::this_thread::yield();
      }
      // release: pairs with the acquire in arm().
      ready_.store(round, std::memory_order_release);
      // Spins first: go() follows at once, and a yield takes longer than the race lasts; then
      // yields, for a test thread that lost its CPU meanwhile.
      for (int checks = 0; go_.load(std::memory_order_relaxed) != round; ++checks) {
        if (checks > kSpinChecks) {
          std::this_thread::yield();
        }
      }
      if (!job_) {
        return;
      }
      spin(delay_);
      std::exchange(job_, {})();
      // release: pairs with the acquire in finish().
      finished_.store(round, std::memory_order_release);
    }
  }

  static constexpr int kSpinChecks = 10000;  // some microseconds

  cyan::unique_function<void()> job_;  // written by the test thread in arm()
  int delay_ = 0;                      // likewise
  std::atomic<std::uint64_t> armed_{ 0 };
  std::atomic<std::uint64_t> ready_{ 0 };
  std::atomic<std::uint64_t> go_{ 0 };
  std::atomic<std::uint64_t> finished_{ 0 };
  std::thread thread_;  // last: starts after the fields it reads
};

// Which side won how many rounds, and the lead: how many spins more the test thread waits
// before it destroys the awaiter than the completer waits before it completes (negative: fewer).
// Each round's winner moves the lead against itself, so that both sides keep winning rounds
// whatever the speed of the build and the load of the machine.
struct outcomes {
  // A step of 25 spins plus 1/32 of the lead: fine near zero, quick to cover a slow thread.
  static constexpr int kLeadStep = 25;
  static constexpr int kMaxLead = 1'000'000;  // about a millisecond of spins

  std::uint64_t withdrawn = 0;
  std::uint64_t resumed = 0;
  int lead = 0;

  void count(bool was_resumed) {
    ++(was_resumed ? resumed : withdrawn);
    const int step = kLeadStep + std::abs(lead) / 32;
    lead = std::clamp(lead + (was_resumed ? -step : step), -kMaxLead, kMaxLead);
  }
};

// One round: the awaiter is destroyed (then, with `drop_future`, the future too) while the
// completer completes the task, each after its share of the lead and a random jitter of spins.
// Expect the coroutine resumed exactly when the completion won, and never touched otherwise.
void race_one_round(completer& other, std::mt19937& random, bool drop_future, outcomes& seen) {
  std::uniform_int_distribution<int> jitter(0, 200);
  auto [result, job] = package([] { return 7; });
  std::atomic<int> resumed{ 0 };
  owned_coroutine coroutine = count_resumption(resumed);
  std::optional<decltype(result.operator co_await())> awaiter;
  awaiter.emplace(result);
  ASSERT_FALSE(awaiter->await_ready());
  ASSERT_TRUE(awaiter->await_suspend(coroutine.handle()));
  other.arm(cyan::unique_function<void()>(std::move(job)),
            std::max(-seen.lead, 0) + jitter(random));
  other.go();
  spin(std::max(seen.lead, 0) + jitter(random));
  awaiter.reset();
  if (drop_future) {
    result = future<int>();
  }
  other.finish();
  const int count = resumed.load();
  ASSERT_TRUE(count == 0 || count == 1) << count;
  EXPECT_EQ(coroutine.done(), count == 1);  // a resumption runs the coroutine to its end
  if (!drop_future) {
    EXPECT_EQ(result.get(), 7);  // the await_resume() that would have taken it never ran
  }
  seen.count(count == 1);
}

// CYAN_STRESS_ITEMS rounds (default 20,000) or 20 s, whichever ends first: a bound for a loaded
// machine and the sanitizers, not a deadline.
void race_rounds(bool drop_future) {
  const std::uint64_t rounds = env_or("CYAN_STRESS_ITEMS", 20000);
  std::mt19937 random(static_cast<std::mt19937::result_type>(env_or("CYAN_STRESS_SEED", 30)));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  outcomes seen;
  std::uint64_t run = 0;
  {
    completer other;
    for (; run < rounds && std::chrono::steady_clock::now() < deadline; ++run) {
      race_one_round(other, random, drop_future, seen);
      if (testing::Test::HasFatalFailure()) {
        return;
      }
    }
  }
  std::printf("%llu rounds: %llu withdrawn, %llu resumed (final lead %d spins)\n",
              static_cast<unsigned long long>(run), static_cast<unsigned long long>(seen.withdrawn),
              static_cast<unsigned long long>(seen.resumed), seen.lead);
  EXPECT_EQ(seen.withdrawn + seen.resumed, run);
  // The lead lets each side win within some hundred rounds: a side that never won means the
  // race was never run, or (withdrawn) that destroying the awaiter withdraws nothing.
  EXPECT_GT(seen.withdrawn, 0u);
  EXPECT_GT(seen.resumed, 0u);
}

TEST(future_stress, a_destroyed_awaiter_races_the_completion_with_the_future_alive) {
  race_rounds(false);
}

TEST(future_stress, a_destroyed_awaiter_and_future_race_the_completion) {
  race_rounds(true);
}

}  // namespace
