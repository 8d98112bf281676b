// thread_pool: the public facade over detail::pool_core (pool_core.h lists the files that
// implement it).

#include "cyan/dispatch/thread_pool.h"

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>

#include "pool_core.h"

namespace cyan::dispatch {

thread_pool::thread_pool(std::size_t threads, options opts)
    : core_(std::make_unique<detail::pool_core>(threads, std::move(opts))) {}

thread_pool::~thread_pool() {
  if (core_->is_current()) {
    std::fputs(
        "cyan::dispatch::thread_pool: destroyed on one of its workers, which cannot "
        "join themselves\n",
        stderr);
    std::abort();
  }
}

void thread_pool::post_task(unique_function<void()>&& task) {
  core_->post(std::move(task));
}

void thread_pool::post_task_after(unique_function<void()>&& task, clock::duration delay) {
  core_->post_after(std::move(task), delay);
}

void thread_pool::post_serial(const serial_token& token, unique_function<void()>&& task) {
  core_->post_serial(token, std::move(task));
}

void thread_pool::stop(stop_mode mode) noexcept {
  core_->stop(mode);
}

void thread_pool::join() {
  core_->join();
}

std::size_t thread_pool::size() const noexcept {
  return core_->size();
}

bool thread_pool::is_current() const noexcept {
  return core_->is_current();
}

void thread_pool::set_error_callback(std::function<void(std::exception_ptr)> on_error) {
  core_->set_error_callback(std::move(on_error));
}

std::vector<thread_pool_worker_stats> thread_pool::stats() const {
  return core_->stats();
}

std::size_t thread_pool::default_size() noexcept {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

namespace detail {

executor_ref executor_access::ref(thread_pool& pool) noexcept {
  return pool.core_->ref();
}

spawn_registry& executor_access::registry(thread_pool& pool) noexcept {
  return pool.core_->spawned();
}

void executor_access::post(thread_pool& pool, unique_function<void()>&& job) {
  pool.post_task(std::move(job));
}

void executor_access::report(thread_pool& pool, std::exception_ptr error) noexcept {
  pool.core_->report_error(std::move(error));
}

}  // namespace detail
}  // namespace cyan::dispatch
