// The per-thread io_uring (cyan/event/detail/ring.h) on its own: completions that overflow the
// completion ring are all run, once each; cancel_and_wait() returns only when the cancelled
// operation's completion came, runs it never, and holds the completions it reaped for others
// until the next drain(). Runs where the kernel allows a ring (skipped where it does not).

#include <gtest/gtest.h>
#include <liburing.h>
#include <poll.h>
#include <unistd.h>

#include <cstddef>
#include <vector>

#include "cyan/event/detail/ring.h"

namespace {

using cyan::event::detail::ring;
using cyan::event::detail::ring_operation;

struct counting_operation final : ring_operation {
  int runs = 0;
  int result = -1;
  void complete(int value, unsigned /*flags*/) noexcept override {
    ++runs;
    result = value;
  }
};

// Drains until `done` holds, at most `rounds` drains; whether it held.
template <typename Done>
bool drain_until(ring& r, Done done, int rounds = 100'000) {
  for (int i = 0; i < rounds && !done(); ++i) {
    r.drain();
  }
  return done();
}

// 10,000 no-ops, more than twice the 4,096 completion entries: most overflow into the kernel's
// list, and each still runs exactly once.
TEST(ring, completions_overflowing_the_completion_ring_each_run_exactly_once) {
  ring* r = ring::this_thread();
  if (r == nullptr) {
    GTEST_SKIP() << "no io_uring here (CYAN_NET_BACKEND=epoll, or blocked)";
  }
  constexpr std::size_t kOperations = 10'000;
  std::vector<counting_operation> operations(kOperations);
  for (counting_operation& op : operations) {
    io_uring_prep_nop(r->prepare(op));  // prepare() submits whenever the submission ring fills
  }
  std::size_t ran = 0;
  ASSERT_TRUE(drain_until(*r, [&] {
    ran = 0;
    for (const counting_operation& op : operations) {
      ran += static_cast<std::size_t>(op.runs);
    }
    return ran >= kOperations;
  }));
  for (std::size_t i = 0; i < kOperations; ++i) {
    ASSERT_EQ(operations[i].runs, 1) << "operation " << i;
    ASSERT_EQ(operations[i].result, 0) << "operation " << i;
  }
  EXPECT_EQ(r->in_flight(), 0u);
  EXPECT_FALSE(r->has_work());
}

// A poll on a pipe that no one writes never completes by itself: cancel_and_wait() ends it
// without running it; a no-op's completion reaped meanwhile runs at the next drain, once.
TEST(ring, cancel_and_wait_never_runs_the_cancelled_and_keeps_the_others) {
  ring* r = ring::this_thread();
  if (r == nullptr) {
    GTEST_SKIP() << "no io_uring here (CYAN_NET_BACKEND=epoll, or blocked)";
  }
  int pipe_ends[2];
  ASSERT_EQ(::pipe(pipe_ends), 0);
  counting_operation waiting;
  counting_operation other;
  io_uring_prep_poll_add(r->prepare(waiting), pipe_ends[0], POLLIN);
  io_uring_prep_nop(r->prepare(other));
  r->submit();
  r->cancel_and_wait(waiting);
  EXPECT_FALSE(waiting.in_flight());
  EXPECT_EQ(waiting.runs, 0);
  ASSERT_TRUE(drain_until(
      *r, [&] { return other.runs > 0; }, 1000));
  EXPECT_EQ(other.runs, 1);
  EXPECT_EQ(other.result, 0);
  EXPECT_EQ(waiting.runs, 0);
  EXPECT_EQ(r->in_flight(), 0u);
  ::close(pipe_ends[0]);
  ::close(pipe_ends[1]);
}

}  // namespace
