// async: the global pool's free functions — fire-and-forget tasks, a serial token, futures
// (get, errors, std::future, co_await) and delayed tasks. It checks every result and exits by
// itself (status 1 on a wrong result), so a test runs it. Returning from main drains the pool.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <latch>
#include <stdexcept>
#include <string>
#include <vector>

#include <cyan/dispatch.h>

namespace {

using namespace std::chrono_literals;
namespace dispatch = cyan::dispatch;

bool all_ok = true;

void check(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  all_ok = all_ok && ok;
}

// 1. Fire-and-forget: tasks run on whichever pool thread is free.
void fire_and_forget() {
  constexpr int kTasks = 1000;
  std::atomic<long> sum{ 0 };
  std::latch done(kTasks);
  for (int i = 1; i <= kTasks; ++i) {
    dispatch::async([&sum, &done, i] {
      sum.fetch_add(i, std::memory_order_relaxed);
      done.count_down();
    });
  }
  done.wait();
  check(sum.load() == 500500, "async: 1 + 2 + ... + 1000 = 500500");
}

// 2. A serial token: its tasks run one at a time, in post order, so they can share state
// without a lock — here a log that only token tasks touch.
void serial_log() {
  dispatch::serial_token token;
  std::vector<std::string> log;
  for (int i = 0; i < 10; ++i) {
    dispatch::async(token, [&log, i] { log.push_back("entry " + std::to_string(i)); });
  }
  // Also in the token's order: runs after the ten appends.
  auto size = dispatch::async_awaitable(token, [&log] { return log.size(); });
  check(size.get() == 10 && log.front() == "entry 0" && log.back() == "entry 9",
        "async(token, f): ten log entries, in order");
}

// 3. Futures: a value, an exception, and the standard type.
void futures() {
  auto answer = dispatch::async_awaitable([] { return 6 * 7; });
  check(answer.get() == 42, "async_awaitable: get() returns 42");

  auto failing = dispatch::async_awaitable([]() -> int { throw std::runtime_error("no luck"); });
  try {
    failing.get();
    check(false, "async_awaitable: get() rethrows");
  } catch (const std::runtime_error& e) {
    check(std::string(e.what()) == "no luck", "async_awaitable: get() rethrows \"no luck\"");
  }

  std::future<std::string> standard = dispatch::async_awaitable([] { return std::string("std"); });
  check(standard.get() == "std", "async_awaitable converts to std::future");
}

// 4. co_await: a task suspends until the awaited work is done. co_spawn(..., detached) starts
// it on the global pool with no future (what it throws goes to the pool's error callback); the
// promise carries the result out.
dispatch::task<> add_remotely(int a, int b, std::promise<int>& result) {
  int first = co_await dispatch::async_awaitable([a] { return a * a; });
  int second = co_await dispatch::async_awaitable([b] { return b * b; });
  result.set_value(first + second);
}

void coroutines() {
  std::promise<int> result;
  dispatch::co_spawn([&result] { return add_remotely(3, 4, result); }, dispatch::detached);
  check(result.get_future().get() == 25, "co_await async_awaitable: 3*3 + 4*4 = 25");
}

// 5. Delays: the task runs once the delay has passed.
void delays() {
  const auto start = std::chrono::steady_clock::now();
  auto later = dispatch::async_awaitable(
      [start] { return std::chrono::steady_clock::now() - start; }, 100ms);
  std::latch fired(1);
  dispatch::async([&fired] { fired.count_down(); }, 50ms);
  fired.wait();
  const auto waited = later.get();
  std::printf("     (the 100 ms task ran after %.1f ms)\n",
              std::chrono::duration<double, std::milli>(waited).count());
  check(waited >= 100ms, "async_awaitable(f, 100ms) ran after at least 100 ms");
}

}  // namespace

int main() {
  fire_and_forget();
  serial_log();
  futures();
  coroutines();
  delays();
  // Posted last and not waited for: the global pool runs it while the program exits.
  dispatch::async([] { std::puts("     (a task posted just before main returned ran at exit)"); });
  return all_ok ? 0 : 1;
}
