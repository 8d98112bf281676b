#include "cyan/dispatch/async.h"

#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <utility>

namespace cyan::dispatch {
namespace {

// The global pool's life in one process image:
//   1. create:  the first global_concurrent_pool() call makes it (under `creating`) and
//               registers the drain at exit (and, once per image, the fork handlers);
//   2. exit:    drain_global_pool() drains it and joins its workers;
//   3. fork:    the child has none of the parent's threads, so the child handler forgets the
//               parent's pool (kept in `inherited`, never used nor destroyed: its workers are
//               not there to run it or to be joined) and the child's first use makes its own,
//               as in step 1. Fork from a thread that is not one of cyan's (see the README).

// This image's pool, or null before its first use (and in a fork child before the child's).
// Written under `creating` (and by the fork child handler, alone); release: pairs with the
// acquire load in global_concurrent_pool(), which then sees the pool built.
std::atomic<thread_pool*> global_pool{ nullptr };
// Serialises creation, and is held across fork() (prepare to parent/child) so that a child
// never inherits a creation half done.
std::mutex creating;
// The parent's pool in a fork child: still referenced, so a leak checker does not report it
// (atomic, so that the compiler keeps a store nothing reads).
std::atomic<thread_pool*> inherited{ nullptr };
// The pool drain_global_pool() already drained: the drain runs once per pool, though a fork
// child has the parent's registration as well as its own. Touched only at exit.
thread_pool* drained = nullptr;
// Whether this image has the fork handlers (a child inherits them with the flag). Under
// `creating`.
bool fork_handlers_installed = false;

// Registered with atexit() right after each pool is created, so it runs before the destructors
// of every static object that existed when the pool was first used. On one of the pool's own
// workers (exit() called from a task) it cannot join: the process ends around it.
void drain_global_pool() {
  thread_pool* pool = global_pool.load(std::memory_order_acquire);
  if (pool == nullptr || pool == drained) {
    return;  // a fork child that never used the pool, or drained by a later registration
  }
  drained = pool;
  pool->stop(stop_mode::drain);
  if (!pool->is_current()) {
    pool->join();
  }
}

void before_fork() noexcept {
  creating.lock();
}

void after_fork_in_parent() noexcept {
  creating.unlock();
}

// The child's only thread is the one that forked: the parent's workers are gone.
void after_fork_in_child() noexcept {
  if (thread_pool* parents = global_pool.exchange(nullptr, std::memory_order_relaxed)) {
    inherited.store(parents, std::memory_order_relaxed);  // read by no one: no order to give
  }
  creating.unlock();
}

thread_pool* create_global_pool() {
  const std::lock_guard lock(creating);
  if (thread_pool* pool = global_pool.load(std::memory_order_relaxed)) {
    return pool;  // another thread created it first
  }
  if (!fork_handlers_installed) {
    fork_handlers_installed =
        ::pthread_atfork(&before_fork, &after_fork_in_parent, &after_fork_in_child) == 0;
  }
  thread_pool_options options;
  options.name = "cyan-global";
  auto* pool = new thread_pool(thread_pool::default_size(), std::move(options));
  std::atexit(&drain_global_pool);
  global_pool.store(pool, std::memory_order_release);
  return pool;
}

}  // namespace

thread_pool& global_concurrent_pool() {
  // acquire: pairs with the release store in create_global_pool().
  if (thread_pool* pool = global_pool.load(std::memory_order_acquire)) {
    return *pool;
  }
  return *create_global_pool();
}

}  // namespace cyan::dispatch
