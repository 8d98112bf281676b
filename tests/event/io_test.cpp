// Tests for cyan/event/io.h: readable and writable pipes and sockets, the exact events a
// callback receives, changing interest while active, moving, and argument checks.
#include "cyan/event/io.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <stdexcept>
#include <system_error>
#include <utility>
#include <vector>

#include "event/loop_support.h"

namespace {

using cyan::event::io;
using cyan::test::run_until_stopped;

// A pair of connected descriptors, closed at the end of the test.
struct descriptor_pair {
  int fds[2] = { -1, -1 };
  ~descriptor_pair() {
    for (int fd : fds) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
  }
};

class io_test : public cyan::test::fresh_loop_test {};

TEST_F(io_test, pipe_becomes_readable) {
  descriptor_pair pipe_ends;
  ASSERT_EQ(::pipe(pipe_ends.fds), 0);
  std::vector<io::events> reported;
  char received = 0;
  io reader{ loop_ };
  reader.set_file_descriptor(pipe_ends.fds[0]);
  reader.set_events(io::read);
  EXPECT_EQ(reader.file_descriptor(), pipe_ends.fds[0]);
  EXPECT_EQ(reader.interest(), io::read);
  reader.set_callback([&](io::events ready) {
    reported.push_back(ready);
    ASSERT_EQ(::read(pipe_ends.fds[0], &received, 1), 1);
    loop_->stop();
  });
  reader.start();
  for (int round = 0; round < 10; ++round) {
    loop_->run_nowait();
  }
  EXPECT_TRUE(reported.empty()) << "an empty pipe reported readable";
  ASSERT_EQ(::write(pipe_ends.fds[1], "x", 1), 1);
  ASSERT_TRUE(run_until_stopped(loop_));
  EXPECT_EQ(reported, std::vector<io::events>{ io::read });
  EXPECT_EQ(received, 'x');
}

TEST_F(io_test, pipe_is_writable) {
  descriptor_pair pipe_ends;
  ASSERT_EQ(::pipe(pipe_ends.fds), 0);
  std::vector<io::events> reported;
  io writer{ loop_ };
  writer.set_file_descriptor(pipe_ends.fds[1]);
  writer.set_events(io::write);
  writer.set_callback([&](io::events ready) {
    reported.push_back(ready);
    writer.stop();
    loop_->stop();
  });
  writer.start();
  ASSERT_TRUE(run_until_stopped(loop_));
  EXPECT_EQ(reported, std::vector<io::events>{ io::write });
}

TEST_F(io_test, reports_exactly_the_ready_events_of_the_interest) {
  descriptor_pair sockets;
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sockets.fds), 0);
  std::vector<io::events> reported;
  io both{ loop_ };
  both.set_file_descriptor(sockets.fds[0]);
  both.set_events(io::read | io::write);
  both.set_callback([&](io::events ready) {
    reported.push_back(ready);
    if (reported.size() == 1) {
      ASSERT_EQ(::write(sockets.fds[1], "y", 1), 1);  // now readable as well
    } else {
      both.stop();
      loop_->stop();
    }
  });
  both.start();
  ASSERT_TRUE(run_until_stopped(loop_));
  ASSERT_EQ(reported.size(), 2u);
  EXPECT_EQ(reported[0], io::write);
  EXPECT_EQ(reported[1], io::read | io::write);
  EXPECT_TRUE(cyan::event::has(reported[1], io::read));
  EXPECT_FALSE(cyan::event::has(reported[0], io::read));
}

TEST_F(io_test, changing_interest_while_active_applies_at_once) {
  descriptor_pair sockets;
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sockets.fds), 0);
  std::vector<io::events> reported;
  io watcher{ loop_ };
  watcher.set_file_descriptor(sockets.fds[0]);
  watcher.set_events(io::write);
  watcher.set_callback([&](io::events ready) {
    reported.push_back(ready);
    if (ready == io::write) {
      watcher.set_events(io::read);  // writable forever: switch to waiting for data
      EXPECT_TRUE(watcher.is_active());
      ASSERT_EQ(::write(sockets.fds[1], "z", 1), 1);
    } else {
      watcher.stop();
      loop_->stop();
    }
  });
  watcher.start();
  ASSERT_TRUE(run_until_stopped(loop_));
  EXPECT_EQ(reported, (std::vector<io::events>{ io::write, io::read }));
}

TEST_F(io_test, moved_active_watcher_keeps_watching) {
  descriptor_pair pipe_ends;
  ASSERT_EQ(::pipe(pipe_ends.fds), 0);
  int calls = 0;
  io original{ loop_ };
  original.set_file_descriptor(pipe_ends.fds[0]);
  original.set_events(io::read);
  original.set_callback([&](io::events) {
    ++calls;
    loop_->stop();
  });
  original.start();
  io moved{ std::move(original) };
  EXPECT_FALSE(original.is_active());  // NOLINT(bugprone-use-after-move): documented state
  EXPECT_TRUE(moved.is_active());
  EXPECT_EQ(moved.file_descriptor(), pipe_ends.fds[0]);
  EXPECT_EQ(moved.interest(), io::read);
  ASSERT_EQ(::write(pipe_ends.fds[1], "x", 1), 1);
  ASSERT_TRUE(run_until_stopped(loop_));
  EXPECT_EQ(calls, 1);
}

TEST_F(io_test, rejects_a_descriptor_that_is_not_open) {
  // libev treats a closed descriptor under a watcher as a program bug (Debian's build aborts),
  // so set_file_descriptor() refuses one up front.
  descriptor_pair pipe_ends;
  ASSERT_EQ(::pipe(pipe_ends.fds), 0);
  const int closed = ::dup(pipe_ends.fds[0]);
  ASSERT_GE(closed, 0);
  ASSERT_EQ(::close(closed), 0);
  io watcher{ loop_ };
  try {
    watcher.set_file_descriptor(closed);
    ADD_FAILURE() << "a closed descriptor was accepted";
  } catch (const std::system_error& error) {
    EXPECT_EQ(error.code(), std::errc::bad_file_descriptor);
  }
  EXPECT_EQ(watcher.file_descriptor(), -1);
}

TEST_F(io_test, rejects_bad_arguments) {
  io watcher{ loop_ };
  EXPECT_EQ(watcher.file_descriptor(), -1);
  EXPECT_EQ(watcher.interest(), io::events::none);
  EXPECT_THROW(watcher.start(), std::logic_error);
  EXPECT_THROW(watcher.set_file_descriptor(-1), std::invalid_argument);
  EXPECT_THROW(watcher.set_events(static_cast<io::events>(4)), std::invalid_argument);
  EXPECT_THROW(io{ nullptr }, std::invalid_argument);
  EXPECT_FALSE(watcher.is_active());
}

}  // namespace
