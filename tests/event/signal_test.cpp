// Tests for cyan/event/signal.h: delivery of raised signals to the main loop, several watchers
// on one number, moving, and the errors (another loop, bad numbers, start before set_number).
#include "cyan/event/signal.h"

#include <gtest/gtest.h>

#include <csignal>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "event/loop_support.h"

namespace {

using cyan::event::loop;
using cyan::test::run_once_until;

class signal_test : public testing::Test {
 protected:
  // The main loop lives on; every test must give back the references its watchers took.
  void TearDown() override {
    EXPECT_EQ(main_loop_.use_count(), baseline_) << "a watcher outlived its test";
  }

  static bool handler_is_default(int number) {
    struct sigaction current {};
    ::sigaction(number, nullptr, &current);
    return current.sa_handler == SIG_DFL;
  }

  std::shared_ptr<loop> main_loop_ = cyan::event::get_main_loop();
  long baseline_ = main_loop_.use_count();
};

TEST_F(signal_test, sees_every_raised_signal_on_the_main_thread) {
  constexpr int kRaises = 10;
  int seen = 0;
  bool on_loop_thread = true;
  cyan::event::signal usr1{ main_loop_ };
  usr1.set_number(SIGUSR1);
  EXPECT_EQ(usr1.number(), SIGUSR1);
  usr1.set_callback([&] {
    ++seen;
    on_loop_thread = on_loop_thread && main_loop_->is_loop_thread();
  });
  usr1.start();
  for (int i = 1; i <= kRaises; ++i) {
    ASSERT_EQ(std::raise(SIGUSR1), 0);
    ASSERT_TRUE(run_once_until(main_loop_, [&] { return seen == i; })) << "raise " << i;
  }
  EXPECT_EQ(seen, kRaises);
  EXPECT_TRUE(on_loop_thread);
  usr1.stop();
  EXPECT_TRUE(handler_is_default(SIGUSR1)) << "libev restores the default once none watches";
}

TEST_F(signal_test, all_watchers_of_one_number_run) {
  int first = 0;
  int second = 0;
  cyan::event::signal a{ main_loop_ };
  cyan::event::signal b{ main_loop_ };
  a.set_number(SIGUSR1);
  b.set_number(SIGUSR1);
  a.set_callback([&] { ++first; });
  b.set_callback([&] { ++second; });
  a.start();
  b.start();
  ASSERT_EQ(std::raise(SIGUSR1), 0);
  ASSERT_TRUE(run_once_until(main_loop_, [&] { return first == 1 && second == 1; }));
  a.stop();
  EXPECT_FALSE(handler_is_default(SIGUSR1)) << "b still watches";
  ASSERT_EQ(std::raise(SIGUSR1), 0);
  ASSERT_TRUE(run_once_until(main_loop_, [&] { return second == 2; }));
  EXPECT_EQ(first, 1);
}

TEST_F(signal_test, moving_an_active_watcher_keeps_the_handler_installed) {
  int seen = 0;
  cyan::event::signal original{ main_loop_ };
  original.set_number(SIGUSR1);
  original.set_callback([&] { ++seen; });
  original.start();
  cyan::event::signal moved{ std::move(original) };
  EXPECT_FALSE(original.is_active());  // NOLINT(bugprone-use-after-move): documented state
  EXPECT_TRUE(moved.is_active());
  EXPECT_FALSE(handler_is_default(SIGUSR1));
  ASSERT_EQ(std::raise(SIGUSR1), 0);
  ASSERT_TRUE(run_once_until(main_loop_, [&] { return seen == 1; }));
}

TEST_F(signal_test, changing_the_number_of_an_active_watcher_restarts_it) {
  int seen = 0;
  cyan::event::signal watcher{ main_loop_ };
  watcher.set_number(SIGUSR1);
  watcher.set_callback([&] { ++seen; });
  watcher.start();
  watcher.set_number(SIGUSR2);
  EXPECT_TRUE(watcher.is_active());
  EXPECT_TRUE(handler_is_default(SIGUSR1));
  ASSERT_EQ(std::raise(SIGUSR2), 0);
  ASSERT_TRUE(run_once_until(main_loop_, [&] { return seen == 1; }));
}

TEST_F(signal_test, only_the_main_loop_may_own_signal_watchers) {
  auto other = std::make_shared<loop>();
  try {
    cyan::event::signal refused{ other };
    ADD_FAILURE() << "a signal watcher on a loop other than the main loop was accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("only the main loop"), std::string::npos)
        << error.what();
  }
  // The same from a thread's own loop, while the main loop watches the number already.
  cyan::event::signal main_watcher{ main_loop_ };
  main_watcher.set_number(SIGUSR1);
  main_watcher.start();
  bool refused_on_thread = false;
  std::thread([&] {
    try {
      cyan::event::signal second{ cyan::this_thread::get_event_loop() };
    } catch (const std::invalid_argument&) {
      refused_on_thread = true;
    }
  }).join();
  EXPECT_TRUE(refused_on_thread);
  EXPECT_THROW(cyan::event::signal{ nullptr }, std::invalid_argument);
}

TEST_F(signal_test, rejects_numbers_that_cannot_be_caught_and_start_without_a_number) {
  cyan::event::signal watcher{ main_loop_ };
  EXPECT_EQ(watcher.number(), 0);
  EXPECT_THROW(watcher.start(), std::logic_error);
  EXPECT_THROW(watcher.set_number(0), std::invalid_argument);
  EXPECT_THROW(watcher.set_number(-3), std::invalid_argument);
  EXPECT_THROW(watcher.set_number(NSIG), std::invalid_argument);
  EXPECT_THROW(watcher.set_number(SIGKILL), std::invalid_argument);
  EXPECT_THROW(watcher.set_number(SIGSTOP), std::invalid_argument);
  EXPECT_FALSE(watcher.is_active());
}

}  // namespace
