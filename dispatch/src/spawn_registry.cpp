#include "cyan/dispatch/detail/spawn_registry.h"

#include <thread>

namespace cyan::dispatch::detail {

void spawn_registry::leave() noexcept {
  // seq_cst throughout: leaving_ is raised before live_ can reach zero, so a destructor that
  // runs once the executor saw zero sees it raised, and waits.
  leaving_.fetch_add(1, std::memory_order_seq_cst);
  if (live_.value.fetch_sub(1, std::memory_order_seq_cst) == 1) {
    on_empty_(context_);
  }
  leaving_.fetch_sub(1, std::memory_order_seq_cst);
}

spawn_registry::~spawn_registry() {
  while (leaving_.load(std::memory_order_seq_cst) != 0) {
    std::this_thread::yield();  // a leave() still in its on_empty_() call
  }
}

void spawn_registry::abandon_all() noexcept {
  // release: pairs with branch_root::abandoned(); then the stop request resumes the tasks
  // suspended on cyan's operations, so they are dropped promptly.
  discarding_.store(true, std::memory_order_release);
  discard_.request_stop();
}

}  // namespace cyan::dispatch::detail
