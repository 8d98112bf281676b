// The pool's set-up and tear-down, and its error path.

#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

#include "cyan/common/detail/print_exception.h"
#include "pool_core.h"

namespace cyan::dispatch::detail {
namespace {

std::size_t at_least_one(std::size_t threads) {
  if (threads == 0) {
    throw std::invalid_argument("cyan::dispatch::thread_pool: needs at least one thread");
  }
  return threads;
}

}  // namespace

pool_core::pool_core(std::size_t threads, thread_pool_options opts)
    : max_spinners_(static_cast<std::uint32_t>(std::max<std::size_t>(1, threads / 2))),
      worker_count_(threads),
      on_error_(std::move(opts.on_error)),
      states_(new worker_state[at_least_one(threads)]) {
  workers_.reserve(threads);
  try {
    for (std::size_t i = 0; i < threads; ++i) {
      states_[i].core = this;
      states_[i].pool = this;
      handler_thread_options worker_options;
      worker_options.name = opts.name + "-" + std::to_string(i);
      worker_options.spin_before_sleep = std::chrono::nanoseconds::zero();  // run_batch spins
      workers_.push_back(start_pool_worker(states_[i], std::move(worker_options)));
    }
    handler_thread_options timer_options;
    timer_options.name = opts.name + "-timer";
    timer_options.spin_before_sleep = std::chrono::nanoseconds::zero();  // it only waits
    timer_thread_ = std::make_unique<handler_thread>(std::move(timer_options));
  } catch (...) {
    stop(stop_mode::drain);
    join();
    throw;
  }
}

pool_core::~pool_core() {
  stop(stop_mode::drain);
  join();
}

void pool_core::set_error_callback(std::function<void(std::exception_ptr)> on_error) {
  const std::lock_guard lock(error_mutex_);
  on_error_ = std::move(on_error);
}

void pool_core::report(std::exception_ptr error) noexcept {
  std::function<void(std::exception_ptr)> callback;
  try {
    const std::lock_guard lock(error_mutex_);
    callback = on_error_;
  } catch (...) {  // copying the callback failed: fall back to stderr
  }
  if (!callback) {
    cyan::detail::print_exception("cyan::dispatch::thread_pool", "a task threw", error);
    return;
  }
  try {
    callback(std::move(error));
  } catch (...) {
    std::fputs("cyan::dispatch::thread_pool: the error callback threw\n", stderr);
  }
}

}  // namespace cyan::dispatch::detail
