#include "cyan/dispatch/detail/thread_anchor.h"

#include <new>
#include <thread>
#include <utility>

namespace cyan::dispatch::detail {
namespace {

thread_local std::shared_ptr<thread_anchor> this_thread_anchor;

}  // namespace

const std::shared_ptr<thread_anchor>& thread_anchor::this_thread() noexcept {
  return this_thread_anchor;
}

thread_anchor::node* thread_anchor::ended() noexcept {
  static node marker{ nullptr, {} };
  return &marker;
}

void thread_anchor::run_on_thread(job work) noexcept {
  node* item = new (std::nothrow) node{ nullptr, {} };
  if (item == nullptr) {
    work();  // as a close here did before hand-overs: racy, but nothing is lost
    return;
  }
  item->work = std::move(work);
  // relaxed: the release CAS below orders it before end()'s look at posting_ (end()'s exchange
  // reads that CAS's value or a later one).
  posting_.fetch_add(1, std::memory_order_relaxed);
  // acquire: pairs with end()'s exchange, so a job run here sees the thread done with its loop.
  node* head = head_.load(std::memory_order_acquire);
  do {
    if (head == ended()) {
      posting_.fetch_sub(1, std::memory_order_relaxed);  // the thread no longer waits for it
      item->work();
      delete item;
      return;
    }
    item->next = head;
    // release: pairs with the acquire exchange in run_pending() and end() (the job's contents).
  } while (!head_.compare_exchange_weak(head, item, std::memory_order_release,
                                        std::memory_order_acquire));
  if (head == nullptr) {
    // The first job since the last drain: one drain job takes it and whatever follows. Refused
    // (the thread is finishing), the teardown runs the list instead.
    thread_.vtable->resume_later(thread_.target, job([this] { run_pending(); }));
  }
  // release: pairs with the acquire load in end(): the post is over before the thread goes.
  posting_.fetch_sub(1, std::memory_order_release);
}

void thread_anchor::run_pending() noexcept {
  // acquire: pairs with the release CAS in run_on_thread().
  run_list(head_.exchange(nullptr, std::memory_order_acquire));
}

void thread_anchor::end() noexcept {
  // acq_rel: release pairs with the acquire loads in run_on_thread() (the thread's last use of
  // its loop comes before a job that runs on its caller); acquire with their release CAS.
  node* list = head_.exchange(ended(), std::memory_order_acq_rel);
  // acquire: pairs with the release decrement in run_on_thread().
  while (posting_.load(std::memory_order_acquire) != 0) {
    std::this_thread::yield();  // a hand-over is between its push and its post
  }
  run_list(list);
}

// Runs the jobs of a list taken from head_, oldest first.
void thread_anchor::run_list(node* newest_first) noexcept {
  node* oldest_first = nullptr;
  while (newest_first != nullptr) {
    node* next = newest_first->next;
    newest_first->next = oldest_first;
    oldest_first = newest_first;
    newest_first = next;
  }
  while (oldest_first != nullptr) {
    node* next = oldest_first->next;
    oldest_first->work();
    delete oldest_first;
    oldest_first = next;
  }
}

void thread_anchor::set_up_this_thread(executor_ref thread) {
  this_thread_anchor = std::make_shared<thread_anchor>(thread);
}

void thread_anchor::run_handed_over() noexcept {
  if (this_thread_anchor) {
    this_thread_anchor->run_pending();
  }
}

void thread_anchor::end_this_thread() noexcept {
  if (this_thread_anchor) {
    this_thread_anchor->end();
    this_thread_anchor.reset();
  }
}

}  // namespace cyan::dispatch::detail
