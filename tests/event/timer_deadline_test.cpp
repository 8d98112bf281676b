// Tests for the promise of cyan/event/timer.h that a timer never fires before its timeout has
// passed since start(), measured as users measure it: with std::chrono::steady_clock, from just
// before start() to the callback. Beside timer_test.cpp, which checks the rest of timer.h.
#include "cyan/event/timer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "cyan/event/loop.h"
#include "event/loop_support.h"

namespace {

using namespace std::chrono_literals;
using cyan::event::backend;
using cyan::event::loop;
using cyan::event::timer;
using clock_type = std::chrono::steady_clock;

// The program of issue #37 (a timer re-armed with start() from its own callback, measured from
// just before each start()) with busy work in the callback before it re-arms. The loop reads its
// time when it wakes up, so the work makes that time stale by at least as much at the next
// start(): a timer counting from it comes early every time, not only when the thread happens to
// be preempted at the wrong moment.
struct rearm_case {
  std::chrono::microseconds timeout;
  std::chrono::microseconds work;
  std::size_t firings;  // a few hundred chances to come early; fewer for the long timeout
};

constexpr rearm_case kCases[] = {
  { 100us, 200us, 200 },
  { 250us, 200us, 200 },
  { 900us, 200us, 200 },
  // epoll and poll wait whole milliseconds, rounded up, which hides a stale time under 1 ms
  // from a timeout of milliseconds.
  { 5000us, 1200us, 100 },
};

// Each case on each backend that rounds waits differently (epoll and poll to 1 ms, select to
// 1 us): below 1 ms the loop also arms a timerfd, above it libev alone decides.
using backend_and_case = std::tuple<backend, rearm_case>;

class timer_deadline : public cyan::test::fresh_loop_test,
                       public testing::WithParamInterface<backend_and_case> {
 protected:
  timer_deadline() { loop_ = std::make_shared<loop>(std::get<0>(GetParam())); }
};

// Expect exactly `firings` firings, each no sooner than the timeout after the clock reading taken
// just before its start(). The failure message says how many came early and by how much.
TEST_P(timer_deadline, rearmed_from_its_callback_never_fires_early) {
  const rearm_case& c = std::get<1>(GetParam());
  const clock_type::duration timeout = c.timeout;
  std::vector<clock_type::duration> elapsed;
  elapsed.reserve(c.firings);
  clock_type::time_point started;
  timer t{ loop_ };
  t.set_timeout(timeout);
  t.set_callback([&] {
    elapsed.push_back(clock_type::now() - started);
    if (elapsed.size() == c.firings) {
      loop_->stop();
      return;
    }
    cyan::test::busy_for(c.work);
    started = clock_type::now();
    t.start();
  });
  started = clock_type::now();
  t.start();
  ASSERT_TRUE(cyan::test::run_until_stopped(loop_));
  ASSERT_EQ(elapsed.size(), c.firings);
  EXPECT_FALSE(t.is_active());
  const auto early = std::count_if(elapsed.begin(), elapsed.end(),
                                   [&](clock_type::duration e) { return e < timeout; });
  const clock_type::duration earliest = *std::min_element(elapsed.begin(), elapsed.end());
  EXPECT_EQ(early, 0) << early << " of " << c.firings << " firings came early; the earliest "
                      << std::chrono::duration<double, std::micro>(timeout - earliest).count()
                      << " us before its timeout";
}

std::string case_name(const testing::TestParamInfo<backend_and_case>& info) {
  return std::string(cyan::event::to_string(std::get<0>(info.param))) + "_" +
         std::to_string(std::get<1>(info.param).timeout.count()) + "us";
}

INSTANTIATE_TEST_SUITE_P(backends_and_timeouts, timer_deadline,
                         testing::Combine(testing::Values(backend::epoll, backend::poll,
                                                          backend::select),
                                          testing::ValuesIn(kCases)),
                         case_name);

}  // namespace
