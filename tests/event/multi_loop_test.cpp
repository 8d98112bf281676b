// Eight threads each run their own loop (this_thread::get_event_loop()) with their own timers
// and async, while the main loop runs too: every callback must run on its own loop's thread and
// touch only its own thread's state, the counts must be exact, every loop must exit on its own
// stop, and each thread's loop must be released when its thread ends.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cyan/event/async.h"
#include "cyan/event/loop.h"
#include "cyan/event/timer.h"
#include "event/loop_support.h"

namespace {

using namespace std::chrono_literals;
using cyan::event::async;
using cyan::event::loop;
using cyan::event::timer;

constexpr int kThreads = 8;
constexpr int kOneShots = 5;
constexpr int kTicks = 10;

struct thread_result {
  std::thread::id id;
  std::weak_ptr<loop> its_loop;
  int one_shots = 0;
  int ticks = 0;
  int wakeups = 0;
  int foreign_callbacks = 0;  // callbacks that ran on another thread or saw another loop
  bool finished_in_time = false;
};

// The hand-over of a thread's async to the main thread. ev_async_send may still touch the
// watcher and its loop after the callback ran, so the thread destroys them only once the main
// thread's send() has returned (or the main thread never claimed the async).
struct inbox_slot {
  std::atomic<async*> watcher{ nullptr };  // published by the thread, claimed by main
  std::atomic<bool> send_returned{ false };

  void close() {
    if (watcher.exchange(nullptr) == nullptr) {  // claimed: wait for its send() to return
      while (!send_returned) {
        std::this_thread::yield();
      }
    }
  }
};

// Runs one thread's loop: one-shot timers at 1..kOneShots ms, a repeating timer that ticks
// kTicks times, and an async the main thread sends to; the loop stops once all have happened.
void run_thread_loop(thread_result& result, inbox_slot& inbox) {
  result.id = std::this_thread::get_id();
  std::shared_ptr<loop> mine = cyan::this_thread::get_event_loop();
  result.its_loop = mine;
  const auto check_home = [&] {
    if (std::this_thread::get_id() != result.id || cyan::this_thread::get_event_loop() != mine ||
        !mine->is_loop_thread()) {
      ++result.foreign_callbacks;
    }
  };
  const auto maybe_finish = [&] {
    if (result.one_shots == kOneShots && result.ticks == kTicks && result.wakeups > 0) {
      mine->stop();
    }
  };
  std::vector<timer> one_shots;
  for (int i = 1; i <= kOneShots; ++i) {
    one_shots.emplace_back(mine);
    one_shots.back().set_timeout(std::chrono::milliseconds(i));
    one_shots.back().set_callback([&] {
      check_home();
      ++result.one_shots;
      maybe_finish();
    });
    one_shots.back().start();
  }
  timer ticker{ mine };
  ticker.set_timeout(1ms);
  ticker.set_repeat(1ms);
  ticker.set_callback([&] {
    check_home();
    if (++result.ticks == kTicks) {
      ticker.stop();
    }
    maybe_finish();
  });
  ticker.start();
  async wakeup{ mine };
  wakeup.set_callback([&] {
    check_home();
    ++result.wakeups;
    maybe_finish();
  });
  wakeup.start();
  inbox.watcher = &wakeup;
  result.finished_in_time = cyan::test::run_until_stopped(mine);
  inbox.close();
}

TEST(multi_loop, eight_loops_run_side_by_side_without_cross_talk) {
  std::vector<thread_result> results(kThreads);
  std::vector<inbox_slot> inboxes(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back(run_thread_loop, std::ref(results[t]), std::ref(inboxes[t]));
  }

  // Meanwhile the main loop runs its own timer, and wakes each thread's loop once.
  const std::shared_ptr<loop> main_loop = cyan::event::get_main_loop();
  int main_ticks = 0;
  timer main_ticker{ main_loop };
  main_ticker.set_timeout(1ms);
  main_ticker.set_repeat(1ms);
  std::vector<bool> woken(kThreads, false);
  main_ticker.set_callback([&] {
    ++main_ticks;
    int done = 0;
    for (int t = 0; t < kThreads; ++t) {
      if (!woken[t] && inboxes[t].watcher.load() != nullptr) {
        if (async* inbox = inboxes[t].watcher.exchange(nullptr)) {
          inbox->send();
          inboxes[t].send_returned = true;
          woken[t] = true;
        }
      }
      done += woken[t] ? 1 : 0;
    }
    if (done == kThreads && main_ticks >= kTicks) {
      main_loop->stop();
    }
  });
  main_ticker.start();
  const bool main_finished = cyan::test::run_until_stopped(main_loop);
  main_ticker.stop();
  for (std::thread& thread : threads) {
    thread.join();
  }

  ASSERT_TRUE(main_finished);
  for (int t = 0; t < kThreads; ++t) {
    SCOPED_TRACE("thread " + std::to_string(t));
    const thread_result& r = results[t];
    EXPECT_TRUE(r.finished_in_time);
    EXPECT_EQ(r.one_shots, kOneShots);
    EXPECT_EQ(r.ticks, kTicks);
    EXPECT_EQ(r.wakeups, 1);
    EXPECT_EQ(r.foreign_callbacks, 0);
    EXPECT_TRUE(r.its_loop.expired()) << "the thread's loop outlived the thread";
    for (int other = 0; other < t; ++other) {
      EXPECT_NE(results[other].id, r.id);
    }
  }
}

}  // namespace
