// Tests for cyan/event/loop.h: main and per-thread loops, run/stop/run_once/run_nowait,
// thread ownership, the error handler and backend selection.
#include "cyan/event/loop.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "cyan/event/io.h"
#include "cyan/event/timer.h"
#include "event/loop_support.h"

namespace {

using namespace std::chrono_literals;
using cyan::event::backend;
using cyan::event::loop;
using cyan::event::timer;
using cyan::test::run_until_stopped;

TEST(loop, main_loop_is_one_loop_owned_by_the_main_thread) {
  ASSERT_EQ(::gettid(), ::getpid()) << "gtest runs tests on the process's main thread";
  const std::shared_ptr<loop> main_loop = cyan::event::get_main_loop();
  EXPECT_EQ(main_loop, cyan::event::get_main_loop());
  EXPECT_EQ(main_loop, cyan::this_thread::get_event_loop());
  EXPECT_TRUE(main_loop->is_main());
  EXPECT_TRUE(main_loop->is_loop_thread());

  bool main_is_loop_thread_elsewhere = true;
  std::thread([&] { main_is_loop_thread_elsewhere = main_loop->is_loop_thread(); }).join();
  EXPECT_FALSE(main_is_loop_thread_elsewhere);
}

TEST(loop, other_threads_get_their_own_loop_released_when_they_exit) {
  std::weak_ptr<loop> thread_loop;
  bool same_on_second_call = false;
  bool is_main = true;
  bool owned_by_thread = false;
  std::thread([&] {
    std::shared_ptr<loop> mine = cyan::this_thread::get_event_loop();
    thread_loop = mine;
    same_on_second_call = mine == cyan::this_thread::get_event_loop();
    is_main = mine->is_main();
    owned_by_thread = mine->is_loop_thread();
  }).join();
  EXPECT_TRUE(same_on_second_call);
  EXPECT_FALSE(is_main);
  EXPECT_TRUE(owned_by_thread);
  EXPECT_TRUE(thread_loop.expired()) << "the thread's loop must be released when it exits";
}

TEST(loop, stop_before_start_makes_the_next_start_return_at_once) {
  auto l = std::make_shared<loop>();
  l->stop();
  EXPECT_TRUE(run_until_stopped(l)) << "run() waited despite the earlier stop()";

  // The request was used up: the next run() runs until a callback stops it.
  bool stopper_fired = false;
  timer stopper{ l };
  stopper.set_timeout(20ms);
  stopper.set_callback([&] {
    stopper_fired = true;
    l->stop();
  });
  stopper.start();
  EXPECT_TRUE(run_until_stopped(l));
  EXPECT_TRUE(stopper_fired);
}

TEST(loop, start_is_the_deprecated_old_name_of_run) {
  // start() must still run the loop until stop(): the timer's callback runs inside it, and the
  // loop is in its round while it does.
  auto l = std::make_shared<loop>();
  int fired = 0;
  bool in_round_when_fired = false;
  timer stopper{ l };
  stopper.set_timeout(1ms);
  stopper.set_callback([&] {
    ++fired;
    in_round_when_fired = l->in_round();
    l->stop();
  });
  stopper.start();
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  l->start();
#pragma GCC diagnostic pop
  EXPECT_EQ(fired, 1);
  EXPECT_TRUE(in_round_when_fired);
  EXPECT_FALSE(l->in_round());
}

TEST(loop, stop_from_another_thread_wakes_a_waiting_loop) {
  auto l = std::make_shared<loop>();
  std::atomic<bool> running{ false };
  timer announce{ l };
  announce.set_callback([&] { running = true; });
  announce.start();  // zero timeout: fires in the first round, then the loop waits
  std::thread stopper([&] {
    while (!running) {
      std::this_thread::yield();
    }
    l->stop();
  });
  const bool stopped = run_until_stopped(l);
  stopper.join();
  EXPECT_TRUE(running);
  EXPECT_TRUE(stopped) << "stop() from another thread did not wake the loop";
}

TEST(loop, stop_from_a_callback_ends_the_run) {
  auto l = std::make_shared<loop>();
  int ticks = 0;
  timer ticker{ l };
  ticker.set_timeout(1ms);
  ticker.set_repeat(1ms);
  ticker.set_callback([&] {
    if (++ticks == 3) {
      l->stop();
    }
  });
  ticker.start();
  ASSERT_TRUE(run_until_stopped(l));
  EXPECT_EQ(ticks, 3);
  EXPECT_TRUE(ticker.is_active()) << "stopping the loop leaves its watchers alone";
}

TEST(loop, run_nowait_runs_only_what_is_ready) {
  auto l = std::make_shared<loop>();
  l->run_nowait();  // nothing to do: must not block

  bool fired = false;
  timer soon{ l };
  soon.set_callback([&] { fired = true; });
  soon.start();
  for (int round = 0; round < 1'000'000 && !fired; ++round) {
    l->run_nowait();
  }
  EXPECT_TRUE(fired);
}

TEST(loop, in_round_is_true_only_inside_the_loops_callbacks) {
  auto l = std::make_shared<loop>();
  EXPECT_FALSE(l->in_round());
  std::vector<bool> seen;
  timer first{ l };
  first.set_callback([&] { seen.push_back(l->in_round()); });
  first.start();
  l->run_once();
  timer second{ l };
  second.set_callback([&] {
    seen.push_back(l->in_round());
    l->stop();
  });
  second.start();
  l->run();
  EXPECT_FALSE(l->in_round());
  EXPECT_EQ(seen, (std::vector<bool>{ true, true }));
}

TEST(loop, run_once_waits_for_an_event) {
  auto l = std::make_shared<loop>();
  bool fired = false;
  timer later{ l };
  later.set_timeout(10ms);
  later.set_callback([&] { fired = true; });
  const auto begin = loop::clock::now();
  later.start();
  int rounds = 0;
  while (!fired && rounds < 100) {
    l->run_once();
    ++rounds;
  }
  EXPECT_TRUE(fired);
  EXPECT_GE(loop::clock::now() - begin, 10ms);
  EXPECT_LE(rounds, 10) << "run_once() should block until the timer is due, not spin";
}

TEST(loop, running_from_a_callback_is_a_logic_error) {
  auto l = std::make_shared<loop>();
  std::string error;
  l->set_error_handler([&](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::logic_error& logic) {
      error = logic.what();
    }
  });
  timer nested{ l };
  nested.set_callback([&] {
    l->run_once();
    ADD_FAILURE() << "run_once() from a callback must throw";
  });
  nested.start();
  timer stopper{ l };
  stopper.set_timeout(5ms);
  stopper.set_callback([&] { l->stop(); });
  stopper.start();
  ASSERT_TRUE(run_until_stopped(l));
  EXPECT_NE(error.find("from one of the loop's callbacks"), std::string::npos) << error;
}

TEST(loop, exceptions_from_callbacks_reach_the_error_handler_and_the_loop_goes_on) {
  auto l = std::make_shared<loop>();
  std::vector<std::string> errors;
  l->set_error_handler([&](std::exception_ptr e) {
    EXPECT_TRUE(l->is_loop_thread());
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      errors.emplace_back(ex.what());
    } catch (int value) {
      errors.push_back("int " + std::to_string(value));
    }
  });
  int ticks = 0;
  timer thrower{ l };
  thrower.set_timeout(1ms);
  thrower.set_repeat(1ms);
  thrower.set_callback([&] {
    ++ticks;
    if (ticks == 1) {
      throw std::runtime_error("boom");
    }
    if (ticks == 2) {
      throw 42;
    }
    l->stop();
  });
  thrower.start();
  ASSERT_TRUE(run_until_stopped(l));
  EXPECT_EQ(ticks, 3) << "the loop and the throwing timer must keep running";
  EXPECT_EQ(errors, (std::vector<std::string>{ "boom", "int 42" }));
}

TEST(loop, default_error_handler_prints_and_a_throwing_handler_is_reported) {
  auto l = std::make_shared<loop>();
  timer thrower{ l };
  thrower.set_callback([] { throw std::runtime_error("printed by default"); });
  timer stopper{ l };
  stopper.set_timeout(5ms);
  stopper.set_callback([&] { l->stop(); });

  testing::internal::CaptureStderr();
  thrower.start();
  stopper.start();
  ASSERT_TRUE(run_until_stopped(l));
  std::string output = testing::internal::GetCapturedStderr();
  EXPECT_NE(output.find("a callback threw: printed by default"), std::string::npos) << output;

  l->set_error_handler([](std::exception_ptr) { throw std::logic_error("handler broke"); });
  testing::internal::CaptureStderr();
  thrower.start();
  stopper.start();
  ASSERT_TRUE(run_until_stopped(l));
  output = testing::internal::GetCapturedStderr();
  EXPECT_NE(output.find("the error handler threw: handler broke"), std::string::npos) << output;
  EXPECT_NE(output.find("a callback threw: printed by default"), std::string::npos) << output;
}

TEST(loop, now_advances_with_the_loop) {
  auto l = std::make_shared<loop>();
  const loop::clock::time_point before = l->now();
  timer stopper{ l };
  stopper.set_timeout(20ms);
  stopper.set_callback([&] { l->stop(); });
  stopper.start();
  ASSERT_TRUE(run_until_stopped(l));
  EXPECT_GE(l->now() - before, 20ms);
  EXPECT_LE(l->now(), loop::clock::now());
}

TEST(loop, a_loop_is_rebound_to_the_thread_that_first_runs_it) {
  auto l = std::make_shared<loop>();
  EXPECT_TRUE(l->is_loop_thread()) << "the creating thread owns a loop until it first runs";
  bool owned_in_callback = false;
  timer probe{ l };
  probe.set_callback([&] {
    owned_in_callback = l->is_loop_thread();
    l->stop();
  });
  probe.start();
  std::thread runner([&] { EXPECT_TRUE(run_until_stopped(l)); });
  runner.join();
  EXPECT_TRUE(owned_in_callback);
  EXPECT_FALSE(l->is_loop_thread());
}

// A backend that libev supports here must come up and deliver timers and io; one it does not
// support must be refused with a message that names it.
void expect_backend_works(backend chosen) {
  SCOPED_TRACE(std::string(cyan::event::to_string(chosen)));
  std::shared_ptr<loop> l;
  try {
    l = std::make_shared<loop>(chosen);
  } catch (const std::system_error& refused) {
    // Only the newest kernel interfaces may be refused by a kernel or sandbox.
    EXPECT_TRUE(chosen == backend::io_uring || chosen == backend::linux_aio) << refused.what();
    return;
  }
  EXPECT_EQ(l->backend(), chosen);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], "x", 1), 1);
  cyan::event::io reader{ l };
  reader.set_file_descriptor(fds[0]);
  reader.set_events(cyan::event::io::read);
  bool readable = false;
  reader.set_callback([&](cyan::event::io::events ready) {
    readable = ready == cyan::event::io::read;
    reader.stop();
  });
  reader.start();
  timer stopper{ l };
  stopper.set_timeout(5ms);
  stopper.set_callback([&] { l->stop(); });
  stopper.start();
  EXPECT_TRUE(run_until_stopped(l));
  EXPECT_TRUE(readable);
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(loop, backend_selection) {
  const std::vector<backend> supported = loop::supported_backends();
  const std::vector<backend> recommended = loop::recommended_backends();
  const auto contains = [](const std::vector<backend>& set, backend value) {
    return std::find(set.begin(), set.end(), value) != set.end();
  };
  for (backend required : { backend::epoll, backend::poll, backend::select }) {
    EXPECT_TRUE(contains(supported, required)) << cyan::event::to_string(required);
  }
  EXPECT_TRUE(contains(recommended, loop().backend()));
  EXPECT_TRUE(contains(recommended, cyan::event::get_main_loop()->backend()));

  for (backend candidate : { backend::select, backend::poll, backend::epoll, backend::kqueue,
                             backend::port, backend::linux_aio, backend::io_uring }) {
    if (contains(supported, candidate)) {
      expect_backend_works(candidate);
      continue;
    }
    try {
      loop refused{ candidate };
      ADD_FAILURE() << "unsupported backend " << cyan::event::to_string(candidate) << " accepted";
    } catch (const std::runtime_error& error) {
      EXPECT_NE(std::string(error.what()).find(cyan::event::to_string(candidate)),
                std::string::npos)
          << error.what();
    }
  }
}

TEST(loop, backend_names) {
  EXPECT_EQ(cyan::event::to_string(backend::automatic), "automatic");
  EXPECT_EQ(cyan::event::to_string(backend::epoll), "epoll");
  EXPECT_EQ(cyan::event::to_string(backend::io_uring), "io_uring");
  EXPECT_EQ(cyan::event::to_string(backend::linux_aio), "linux_aio");
  EXPECT_EQ(cyan::event::to_string(backend::select), "select");
}

#ifndef NDEBUG
TEST(loop_DeathTest, loop_thread_only_calls_assert_in_debug_builds) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto l = std::make_shared<loop>();
        l->run_nowait();  // binds the loop to this thread
        std::thread([&] { l->run_nowait(); }).join();
      },
      "loop-thread-only call made from another thread");
}
#endif

}  // namespace
