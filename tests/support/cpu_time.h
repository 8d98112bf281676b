#pragma once

#include <time.h>

#include <chrono>

namespace cyan::test {

/// CPU time consumed so far by the process (CLOCK_PROCESS_CPUTIME_ID) or the calling thread
/// (CLOCK_THREAD_CPUTIME_ID): for tests that check that idle or waiting threads do not spin.
inline std::chrono::nanoseconds cpu_time(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

}  // namespace cyan::test
