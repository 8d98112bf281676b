#pragma once

#include <any>
#include <exception>

namespace cyan::dispatch {

namespace detail {
struct handler_access;
}  // namespace detail

/// The callbacks of an active object: derive from handler, give the derived class a
/// handler_thread member constructed with `*this`, and override what you need. Every callback
/// runs on that handler_thread's own thread, one at a time:
///
/// - on_initialize() once, before any posted work or message;
/// - on_message() for each send(), in send order per sending thread;
/// - on_error() for each exception thrown by a posted closure (or by its destructor, when the
///   thread destroys it after it ran or unrun at stop), by on_message() or by
///   on_initialize() (a throw that is not a std::exception arrives as
///   std::runtime_error("unknown exception")); the thread keeps running afterwards;
/// - on_finalize() once, after the last posted work ran (or was cancelled) at stop.
///
/// The handler_thread starts calling these as soon as it is constructed, so construct it last
/// (after the members the callbacks use) and stop it before those members are destroyed (the
/// handler_thread's destructor does, when it is the last member declared).
class handler {
 public:
  handler() = default;
  handler(const handler&) = delete;
  handler& operator=(const handler&) = delete;
  virtual ~handler() = default;

 protected:
  /// Runs on the handler thread before any work. Default: nothing.
  virtual void on_initialize() {}

  /// Receives a message given to send() or send_delayed(). Default: throws std::logic_error
  /// (reported through on_error), since a message nobody handles must not vanish silently.
  virtual void on_message(std::any&& message);

  /// Runs on the handler thread after the last work. Default: nothing.
  virtual void on_finalize() {}

  /// Receives what a closure, on_message() or on_initialize() threw. Must not throw.
  /// Default: prints the exception's what() on stderr.
  virtual void on_error(std::exception& error) noexcept;

 private:
  friend struct detail::handler_access;  // how handler_thread calls the callbacks
};

}  // namespace cyan::dispatch
