// coroutines: cyan::dispatch::task on handler threads — a task that awaits a pool computation,
// sleeps and hops; when_all / when_any; cancellation with a stop token; an async_scope for a
// graceful shutdown. It checks every result and exits by itself (status 1 on a wrong result),
// so a test runs it.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include <cyan/dispatch.h>

namespace {

using namespace std::chrono_literals;
namespace dispatch = cyan::dispatch;
using dispatch::task;

bool all_ok = true;

void check(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  all_ok = all_ok && ok;
}

std::uint64_t fib(unsigned n) {
  return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

// 1. A task on handler thread `ui` awaits a pool computation, sleeps, hops to `io` and back.
//    After every suspension it is back on its home thread.
task<std::string> ui_flow(dispatch::handler_thread& ui, dispatch::handler_thread& io) {
  const std::uint64_t f = co_await dispatch::async_awaitable([] { return fib(25); });
  check(ui.is_current(), "resumed on ui after the pool computation");
  co_await dispatch::sleep_for(5ms);
  check(ui.is_current(), "resumed on ui after sleep_for");
  co_await io.schedule();  // explicit move: io is home now
  check(io.is_current(), "running on io after schedule");
  co_await ui.schedule();
  co_return "fib(25) = " + std::to_string(f);
}

task<int> after(int value, std::chrono::milliseconds d) {
  co_await dispatch::sleep_for(d);
  co_return value;
}

// 2. when_all runs the children concurrently; when_any takes the first and stops the rest.
task<> compose() {
  auto [a, b] = co_await dispatch::when_all(after(1, 20ms), after(2, 1ms));
  check(a == 1 && b == 2, "when_all: results in argument order");
  auto first = co_await dispatch::when_any(after(10, 10s), after(20, 2ms));
  check(first.index() == 1 && std::get<1>(first) == 20, "when_any: the fastest child wins");
}

// 3. A stop request resumes a sleeping task at once with operation_canceled.
task<bool> wait_for_stop() {
  try {
    co_await dispatch::sleep_for(10s);
  } catch (const std::system_error& e) {
    co_return e.code() == std::errc::operation_canceled;
  }
  co_return false;
}

}  // namespace

int main() {
  dispatch::handler_thread::options ui_options;
  ui_options.name = "ui";
  dispatch::handler_thread::options io_options;
  io_options.name = "io";
  dispatch::handler_thread ui(ui_options);
  dispatch::handler_thread io(io_options);

  // The callable form keeps the lambda's captures alive until the task finishes.
  auto flow = dispatch::co_spawn(ui, [&ui, &io]() -> task<std::string> { return ui_flow(ui, io); });
  check(flow.get() == "fib(25) = 75025", "task result through the future");

  dispatch::co_spawn(ui, compose()).get();

  std::stop_source stop;
  auto waiting = dispatch::co_spawn(io, wait_for_stop(), stop.get_token());
  std::this_thread::sleep_for(5ms);
  stop.request_stop();
  check(waiting.get(), "stop token cancels sleep_for");

  // 4. async_scope: a "server" with connections on a pool; shutdown stops and joins them.
  std::atomic<int> served{ 0 };
  std::atomic<int> closed{ 0 };
  {
    dispatch::thread_pool workers(2);
    dispatch::async_scope connections;
    for (int i = 0; i < 8; ++i) {
      connections.spawn(workers, [&served, &closed, i]() -> task<> {
        try {
          co_await dispatch::sleep_for(std::chrono::milliseconds(i < 4 ? 1 : 60'000));
          served.fetch_add(1);
        } catch (const std::system_error&) {
          closed.fetch_add(1);  // cancelled by the shutdown
        }
      });
    }
    std::this_thread::sleep_for(50ms);
    connections.request_stop();
    connections.join_blocking();
  }
  check(served.load() + closed.load() == 8, "async_scope: every child finished");
  check(closed.load() >= 4, "async_scope: request_stop cancelled the long sleepers");

  return all_ok ? 0 : 1;
}
