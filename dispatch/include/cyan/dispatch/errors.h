#pragma once

#include <stdexcept>

namespace cyan::dispatch {

/// The error an awaitable task reports when it will never run: it was discarded by
/// `stop(stop_mode::discard)`, it was a delayed task whose time had not come when its executor
/// stopped, or its executor stopped before it could be handed over. `future::get()` throws it.
class task_cancelled : public std::runtime_error {
 public:
  task_cancelled() : std::runtime_error("cyan::dispatch: task cancelled before it ran") {}
};

/// Thrown by post/async/send on an executor (handler_thread, thread_pool) after its stop() was
/// called: work posted then would never run, so it is refused loudly rather than dropped.
class executor_stopped : public std::logic_error {
 public:
  explicit executor_stopped(const char* what) : std::logic_error(what) {}
};

/// Thrown by channel::send() once the channel is closed (also to a send that was waiting when
/// close() came): its item was not sent.
class channel_closed : public std::logic_error {
 public:
  channel_closed() : std::logic_error("cyan::dispatch::channel: send on a closed channel") {}
};

}  // namespace cyan::dispatch
