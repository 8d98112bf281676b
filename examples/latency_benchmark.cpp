// Latency benchmark: how long an idle thread takes to notice work, as histograms.
//   post -> run   a closure posted to an idle handler_thread (spin_before_sleep = 0, so every
//                 post finds the thread napping or deeply asleep), from the post to the moment
//                 the closure starts; posts are spaced by random gaps of 0..3 ms, so they meet
//                 every stage of the thread's idle cycle. Against boost::asio::post to an
//                 io_context whose one thread blocks in run().
//   timer         how late a cyan::event::timer fires after its timeout (250 us and 2 ms), on the
//                 default backend (epoll here) and on the select backend: libev raises any
//                 wait shorter than the backend's minimum (1 ms for epoll and poll) to it.
// Each figure is the distribution of CYAN_BENCH_LATENCY_SAMPLES samples (default 2000 posts and
// 500 timer expiries per row): p50, p90, p99, max, and a histogram.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <cyan/dispatch.h>
#include <cyan/event.h>

#include "bench/harness.h"

namespace {

using clock_type = std::chrono::steady_clock;
using micros = std::chrono::duration<double, std::micro>;

void print_distribution(const std::string& name, std::vector<double> us) {
  std::sort(us.begin(), us.end());
  auto at = [&](double q) {
    return us[static_cast<std::size_t>(q * static_cast<double>(us.size() - 1))];
  };
  std::printf("  %-44s p50 %8.1f us  p90 %8.1f  p99 %8.1f  max %8.1f  (%zu samples)\n",
              name.c_str(), at(0.5), at(0.9), at(0.99), us.back(), us.size());
  constexpr double kEdges[] = { 10, 50, 100, 200, 500, 1000, 1100, 1500, 2000, 5000 };
  std::printf("  %-44s", "");
  double lower = 0;
  for (const double edge : kEdges) {
    const auto n =
        std::count_if(us.begin(), us.end(), [&](double v) { return v >= lower && v < edge; });
    std::printf(" <%g:%ld", edge, static_cast<long>(n));
    lower = edge;
  }
  std::printf(
      " >=%g:%ld\n", lower,
      static_cast<long>(std::count_if(us.begin(), us.end(), [&](double v) { return v >= lower; })));
}

// Posts one closure at a time after a random gap and records post -> start of the closure.
template <typename Post>
std::vector<double> post_to_run(std::size_t samples, Post&& post) {
  std::mt19937_64 random(42);
  std::uniform_int_distribution<int> gap_us(0, 3000);
  std::vector<double> us;
  us.reserve(samples);
  for (std::size_t i = 0; i < samples; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(gap_us(random)));
    std::promise<clock_type::time_point> started;
    auto when = started.get_future();
    const auto posted = clock_type::now();
    post([&started] { started.set_value(clock_type::now()); });
    us.push_back(micros(when.get() - posted).count());
  }
  return us;
}

// Starts a one-shot timer of `timeout` on `loop` (run by this thread) `samples` times and records
// how much later than its timeout it fired.
std::vector<double> timer_lateness(const std::shared_ptr<cyan::event::loop>& loop,
                                   std::chrono::microseconds timeout, std::size_t samples) {
  std::vector<double> us;
  us.reserve(samples);
  cyan::event::timer timer{ loop };
  timer.set_timeout(timeout);
  clock_type::time_point started;
  timer.set_callback([&] {
    us.push_back(micros(clock_type::now() - started - timeout).count());
    if (us.size() < samples) {
      started = clock_type::now();
      timer.start();
    } else {
      loop->stop();
    }
  });
  started = clock_type::now();
  timer.start();
  loop->run();
  return us;
}

}  // namespace

int main() {
  const std::size_t posts = cyan::bench::env_or("CYAN_BENCH_LATENCY_SAMPLES", 2000);
  const std::size_t expiries = std::max<std::size_t>(1, posts / 4);
  std::printf("latency benchmark: post -> run on an idle thread, and timer lateness\n");

  std::printf("\npost -> run, idle consumer, random gaps of 0..3 ms\n");
  {
    cyan::dispatch::handler_thread::options options;
    options.spin_before_sleep = std::chrono::nanoseconds::zero();
    cyan::dispatch::handler_thread thread(options);
    print_distribution("cyan handler_thread (spin_before_sleep 0)",
                       post_to_run(posts, [&](auto f) { thread.post(std::move(f)); }));
  }
  {
    cyan::dispatch::handler_thread thread;  // default: spins up to 50 us first
    print_distribution("cyan handler_thread (default spin)",
                       post_to_run(posts, [&](auto f) { thread.post(std::move(f)); }));
  }
  {
    boost::asio::io_context context;
    auto guard = boost::asio::make_work_guard(context);
    std::thread runner([&] { context.run(); });
    print_distribution("boost::asio::post to io_context::run", post_to_run(posts, [&](auto f) {
                         boost::asio::post(context, std::move(f));
                       }));
    guard.reset();
    runner.join();
  }

  std::printf("\ntimer lateness (fired - started - timeout)\n");
  using namespace std::chrono_literals;
  for (const auto timeout : { 250us, 2000us }) {
    auto default_loop = std::make_shared<cyan::event::loop>();
    print_distribution(std::to_string(timeout.count()) + " us timer, default backend (epoll)",
                       timer_lateness(default_loop, timeout, expiries));
    auto select_loop = std::make_shared<cyan::event::loop>(cyan::event::backend::select);
    print_distribution(std::to_string(timeout.count()) + " us timer, select backend",
                       timer_lateness(select_loop, timeout, expiries));
  }
  return 0;
}
