// events: cyan::event's watchers working together on the main loop.
//
//   timer   fires every 500 ms (a one-shot timer re-armed with reset())
//   async   a worker thread reports finished jobs to the main thread
//   idle    runs once the loop has nothing else to do, then stops itself
//   signal  Ctrl-C (SIGINT) stops the loop
//   wheel   five request deadlines on a timer_wheel: answered requests cancel theirs
//
// The program also stops on its own after two seconds, so CI can run it; it exits non-zero if
// a watcher never ran.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>
#include <vector>

#include "cyan/event.h"

int main() {
  using namespace std::chrono_literals;
  const auto main_loop = cyan::event::get_main_loop();

  int ticks = 0;
  cyan::event::timer timer{ cyan::this_thread::get_event_loop() };
  timer.set_timeout(500ms);
  timer.set_callback([&] {
    std::printf("timer: 500 ms passed (%d)\n", ++ticks);
    timer.reset();  // restart the countdown
  });
  timer.start();

  constexpr int kJobs = 3;
  std::atomic<int> jobs_done{ 0 };
  int jobs_seen = 0;
  cyan::event::async async{ main_loop };
  async.set_callback([&] {
    jobs_seen = jobs_done.load();  // everything the worker did before send() is visible here
    std::printf("async: the worker has finished %d of %d jobs\n", jobs_seen, kJobs);
  });
  async.start();
  std::thread worker([&] {
    for (int job = 0; job < kJobs; ++job) {
      std::this_thread::sleep_for(300ms);  // the "work"
      jobs_done.fetch_add(1);
      async.send();
    }
  });

  bool idled = false;
  cyan::event::idle idle{ main_loop };
  idle.set_callback([&] {
    std::puts("idle: nothing else to do; stopping myself");
    idled = true;
    idle.stop();
  });
  idle.start();

  cyan::event::signal interrupt{ cyan::this_thread::get_event_loop() };
  interrupt.set_number(SIGINT);
  interrupt.set_callback([] {
    std::puts("signal: SIGINT, stopping");
    cyan::event::get_main_loop()->stop();
  });
  interrupt.start();

  // Many cheap one-shot timeouts on one loop timer: each request gets a 700 ms deadline; the
  // even-numbered ones are answered after 200 ms and cancel theirs, the others time out.
  cyan::event::timer_wheel wheel{ cyan::this_thread::get_event_loop() };
  wheel.start();
  constexpr int kRequests = 5;
  int timed_out = 0;
  std::vector<cyan::event::timer_wheel::id> deadlines;
  for (int request = 0; request < kRequests; ++request) {
    deadlines.push_back(wheel.post(
        [&timed_out, request] {
          std::printf("wheel: request %d timed out\n", request);
          ++timed_out;
        },
        700ms));
  }
  int answered = 0;
  wheel.post(
      [&] {
        for (int request = 0; request < kRequests; request += 2) {
          answered += wheel.cancel(deadlines[request]) ? 1 : 0;
        }
        std::printf("wheel: %d requests answered in time, %zu deadlines left\n", answered,
                    wheel.size());
      },
      200ms);

  cyan::event::timer shutdown{ main_loop };
  shutdown.set_timeout(2s);
  shutdown.set_callback([&] {
    std::puts("shutdown: two seconds are up, stopping");
    main_loop->stop();
  });
  shutdown.start();

  std::puts("running the main loop (Ctrl-C to stop early)");
  main_loop->run();
  worker.join();  // the async must outlive every send()

  std::printf("done: %d timer ticks, %d jobs seen, idle %s, %d requests answered, %d timed out\n",
              ticks, jobs_seen, idled ? "ran" : "never ran", answered, timed_out);
  const bool interrupted = shutdown.is_active();
  const bool wheel_ok = answered == 3 && timed_out == 2;
  return interrupted || (ticks > 0 && jobs_seen > 0 && idled && wheel_ok) ? 0 : 1;
}
