// Tests for cyan/event/idle.h: an idle watcher runs only when nothing else is due, keeps
// running while active, and may stop itself.
#include "cyan/event/idle.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <utility>

#include "cyan/event/io.h"
#include "cyan/event/timer.h"
#include "event/loop_support.h"

namespace {

using namespace std::chrono_literals;
using cyan::event::idle;
using cyan::test::run_until_stopped;

class idle_test : public cyan::test::fresh_loop_test {};

TEST_F(idle_test, stops_itself) {
  int calls = 0;
  idle i{ loop_ };
  i.set_callback([&] {
    ++calls;
    i.stop();
    loop_->stop();
  });
  i.start();
  EXPECT_TRUE(i.is_active());
  ASSERT_TRUE(run_until_stopped(loop_));
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(i.is_active());
}

TEST_F(idle_test, runs_every_round_while_active_without_blocking) {
  // A 1-hour timer would block the loop; an active idle watcher keeps it turning.
  cyan::event::timer far{ loop_ };
  far.set_timeout(1h);
  far.start();
  int calls = 0;
  idle i{ loop_ };
  i.set_callback([&] {
    if (++calls == 100) {
      i.stop();
      loop_->stop();
    }
  });
  i.start();
  ASSERT_TRUE(run_until_stopped(loop_));
  EXPECT_EQ(calls, 100);
}

TEST_F(idle_test, waits_while_other_callbacks_are_due) {
  // The pipe stays readable (nobody reads it), so its watcher is due every round until it stops
  // itself after 50 rounds; only then may the idle watcher run.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], "x", 1), 1);
  int busy_rounds = 0;
  cyan::event::io busy{ loop_ };
  busy.set_file_descriptor(fds[0]);
  busy.set_events(cyan::event::io::read);
  busy.set_callback([&](cyan::event::io::events) {
    if (++busy_rounds == 50) {
      busy.stop();
    }
  });
  busy.start();
  int busy_rounds_seen_by_idle = -1;
  idle i{ loop_ };
  i.set_callback([&] {
    busy_rounds_seen_by_idle = busy_rounds;
    i.stop();
    loop_->stop();
  });
  i.start();
  ASSERT_TRUE(run_until_stopped(loop_));
  EXPECT_EQ(busy_rounds_seen_by_idle, 50);
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST_F(idle_test, moved_idle_keeps_running_with_its_callback) {
  int calls = 0;
  idle original{ loop_ };
  original.set_callback([&] {
    ++calls;
    loop_->stop();
  });
  original.start();
  idle moved{ std::move(original) };
  EXPECT_FALSE(original.is_active());  // NOLINT(bugprone-use-after-move): documented state
  ASSERT_TRUE(run_until_stopped(loop_));
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(moved.is_active());
}

}  // namespace
