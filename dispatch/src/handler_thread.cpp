#include "cyan/dispatch/handler_thread.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <utility>

#include "cyan/common/detail/print_exception.h"
#include "cyan/dispatch/detail/idle_hook.h"
#include "handler_thread_runtime.h"

namespace cyan::dispatch {
namespace {

// The handler of a handler_thread constructed without one. Never destroyed, so a
// handler_thread that outlives static destruction still has it.
handler& default_handler() {
  static handler* const instance = new handler;
  return *instance;
}

// What send() posts: delivers one message to the handler. Small enough to be stored inline.
struct message_task {
  handler* target;
  std::any message;

  void operator()() { detail::handler_access::message(*target, std::move(message)); }
};

static_assert(unique_function<void()>::stored_inline<message_task>);

}  // namespace

handler_thread::handler_thread() : handler_thread(options{}) {}

handler_thread::handler_thread(options opts) : handler_thread(default_handler(), std::move(opts)) {}

handler_thread::handler_thread(handler& h, options opts)
    : runtime_(std::make_unique<detail::handler_thread_runtime>(*this, h, std::move(opts))) {
  runtime_->start();
}

handler_thread::handler_thread(detail::idle_hook& hook, options opts)
    : runtime_(std::make_unique<detail::handler_thread_runtime>(*this, default_handler(),
                                                                std::move(opts), &hook)) {
  runtime_->start();
}

std::unique_ptr<handler_thread> detail::start_pool_worker(idle_hook& hook,
                                                          handler_thread_options options) {
  return std::unique_ptr<handler_thread>(new handler_thread(hook, std::move(options)));
}

handler_thread::~handler_thread() {
  if (is_current()) {
    std::fputs(
        "cyan::dispatch::handler_thread: destroyed on its own thread, which cannot join itself\n",
        stderr);
    std::abort();
  }
  stop(stop_mode::drain);
  join();
}

void handler_thread::send(std::any message) {
  inbox_.post(message_task{ &runtime_->user_handler(), std::move(message) });
}

void handler_thread::send_at(std::any message, clock::time_point due) {
  inbox_.post_delayed(message_task{ &runtime_->user_handler(), std::move(message) }, due);
}

// Phase 1 of the stop (see "Stop" in detail/outstanding_work.h and in
// handler_thread_runtime.cpp): the account first, so that from now on a count's drop to zero
// wakes the thread (a drop before it is seen by the thread's first look) and token tasks go
// through the inbox, where a discard cancels them too; then the inbox refuses posts.
void handler_thread::stop(stop_mode mode) noexcept {
  work_.stopping();
  inbox_.stop(mode == stop_mode::discard);
  if (mode == stop_mode::discard) {
    work_.spawned().abandon_all();  // their next resumption drops them (see detail/coro_env.h)
  }
}

// A resumption (see detail/coro_env.h): accepted while the thread drains. Refused once it
// closed: `job` is then destroyed unrun, which drops the coroutine's branch.
void handler_thread::resume_later(void* self, unique_function<void()>&& job) noexcept {
  try {
    static_cast<handler_thread*>(self)->inbox_.post_handed_over(std::move(job));
  } catch (...) {  // executor_stopped, std::bad_alloc: the caller's `job` is destroyed unrun
  }
}

// A handler thread has no next-task slot: its resumptions all go through its inbox.
const detail::executor_vtable handler_thread::vtable{ &handler_thread::resume_later,
                                                      &handler_thread::resume_later };

namespace detail {

executor_ref executor_access::ref(handler_thread& thread) noexcept {
  return executor_ref{ &thread, &handler_thread::vtable };
}

spawn_registry& executor_access::registry(handler_thread& thread) noexcept {
  return thread.work_.spawned();
}

void executor_access::post(handler_thread& thread, unique_function<void()>&& job) {
  thread.inbox_.post(std::move(job));
}

void executor_access::report(handler_thread& thread, std::exception_ptr error) noexcept {
  if (thread.is_current()) {
    thread.inbox_.report(std::move(error));
    return;
  }
  try {  // rethrown by a task on the thread, so it reaches on_error() there
    thread.inbox_.post_handed_over([error] { std::rethrow_exception(error); });
    return;
  } catch (...) {
  }
  cyan::detail::print_exception("cyan::dispatch::handler_thread", "a detached task threw", error);
}

}  // namespace detail

// The thread may be asleep waiting for expecting_hand_overs() to end (see "Stop" in inbox.h).
void handler_thread::on_work_drop(void* self) noexcept {
  static_cast<handler_thread*>(self)->inbox_.notify();
}

void handler_thread::join() {
  runtime_->join();
}

bool handler_thread::is_running() const noexcept {
  return !inbox_.finished();
}

bool handler_thread::is_stopping() const noexcept {
  return inbox_.stopped() && !inbox_.finished();
}

std::shared_ptr<event::loop> handler_thread::get_event_loop() const noexcept {
  return runtime_->loop();
}

std::thread::id handler_thread::get_id() const noexcept {
  return runtime_->id();
}

handler_thread_stats handler_thread::stats() const {
  const detail::inbox::counters counters = inbox_.read_counters();
  handler_thread_stats result;
  result.posted = counters.posted;
  result.executed = counters.executed;
  result.cancelled = counters.cancelled;
  result.queued = counters.posted - counters.executed - counters.cancelled;
  result.lanes = counters.lanes;
  result.sleeps = counters.sleeps;
  result.naps = counters.naps;
  result.dear_fences = counters.dear_fences;
  return result;
}

// On this thread, like any task's exception: to the handler's on_error(). A token task for this
// thread is destroyed elsewhere only when a hand-over failed (this thread stopped, or memory ran
// out); on_error() runs on this thread only, so then it is declined (stderr).
bool handler_thread::report_token_error(void* self, std::exception_ptr error) noexcept {
  auto* thread = static_cast<handler_thread*>(self);
  if (!thread->is_current()) {
    return false;
  }
  thread->inbox_.report(std::move(error));
  return true;
}

void detail::wake_if_sleeping(handler_thread& worker) noexcept {
  worker.inbox_.notify();
}

}  // namespace cyan::dispatch
