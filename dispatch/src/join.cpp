// The futex words of fork-join (detail/fork_join.h): join's stolen half, task_group's count.

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

#include "cyan/dispatch/detail/fork_join.h"

namespace cyan::dispatch::detail {

void futex_wait_for(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                    std::chrono::nanoseconds timeout) noexcept {
  // Returns on a wake-up, a timeout, a signal, or at once when word != expected: every caller
  // looks at the word again.
  timespec relative{};
  const timespec* bound = nullptr;
  if (timeout.count() >= 0) {
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(timeout);
    relative = timespec{ static_cast<time_t>(seconds.count()),
                         static_cast<long>((timeout - seconds).count()) };
    bound = &relative;
  }
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, bound,
          nullptr, 0);
}

void futex_wake_every(std::atomic<std::uint32_t>& word) noexcept {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
          nullptr, 0);
}

// No lost wake-up, as in future.cpp's park(): the waiter sets kWaiting with an RMW and sleeps
// only while the word still holds what that RMW left; mark_done()'s RMW comes before (the
// waiter sees kDone) or after (it sees kWaiting and wakes).
void completion_word::mark_done() noexcept {
  // release: publishes the result to done()'s acquire; acquire: nothing, the RMW decides.
  if ((word_.fetch_or(kDone, std::memory_order_acq_rel) & kWaiting) != 0) {
    futex_wake_every(word_);  // the waiter may be gone: the address is only a key (see header)
  }
}

void completion_word::park(std::chrono::nanoseconds timeout) noexcept {
  // acquire: pairs with mark_done()'s release when it is done already.
  const std::uint32_t before = word_.fetch_or(kWaiting, std::memory_order_acquire);
  if ((before & kDone) == 0) {
    futex_wait_for(word_, before | kWaiting, timeout);
  }
}

}  // namespace cyan::dispatch::detail
