#pragma once

// What every example server shares: its command line (--port, --threads, --grace-ms, --help
// and the server's own options), the "listening on <endpoint>" line, and the graceful shutdown
// on SIGINT / SIGTERM:
//
//   1. stop accepting    the listeners' scope is stopped and joined;
//   2. drain             draining() turns true and the drain hook (on_drain()) runs on every
//                        handler thread: connections finish the request in flight and close;
//                        the server waits up to --grace-ms for them;
//   3. close the rest    the connections' scope is stopped (pending reads end with
//                        operation_canceled) and joined; run() returns 0.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "cyan/dispatch.h"
#include "cyan/net.h"

namespace cyan::examples {

/// `--name value` options and `--name` flags. [one thread]
class command_line {
 public:
  command_line(std::string program, std::string summary);

  /// Declares an option with its default and a line of help.
  command_line& option(const std::string& name, const std::string& fallback,
                       const std::string& help);
  /// Declares a flag (false unless given).
  command_line& flag(const std::string& name, const std::string& help);
  /// Declares --port (0: a free port), --host (127.0.0.1), --threads (the cores) and
  /// --grace-ms (2000).
  command_line& server_options();

  /// Reads argv. --help prints the usage and exits 0; an unknown option, a missing value or a
  /// malformed number prints the usage on stderr and exits 2.
  void parse(int argc, char** argv);

  [[nodiscard]] const std::string& text(const std::string& name) const;
  /// The option as a non-negative integer (checked by parse() for numeric defaults).
  [[nodiscard]] long long number(const std::string& name) const;
  [[nodiscard]] bool is_set(const std::string& name) const;

  /// --host and --port as an endpoint (--host may be "unix:/path" too, then --port is unused).
  [[nodiscard]] net::endpoint listen_endpoint() const;

 private:
  struct entry {
    std::string value;
    std::string fallback;  // the default, which usage() shows
    std::string help;
    bool is_flag = false;
    bool numeric = false;
  };
  [[noreturn]] void usage(int status) const;

  std::string program_;
  std::string summary_;
  std::vector<std::string> order_;
  std::map<std::string, entry> entries_;
};

/// A server's threads, its two scopes and its shutdown (see the top of this file).
class server_runtime {
 public:
  /// `threads` handler threads (at least 1). Installs the SIGINT / SIGTERM watchers.
  explicit server_runtime(unsigned threads);
  ~server_runtime();

  [[nodiscard]] unsigned size() const noexcept { return static_cast<unsigned>(threads_.size()); }
  [[nodiscard]] dispatch::handler_thread& thread(unsigned index) { return *threads_[index]; }
  /// Listener tasks: stopped first. [any thread]
  [[nodiscard]] dispatch::async_scope& listeners() noexcept { return listeners_; }
  /// Connection tasks: stopped after the grace period. [any thread]
  [[nodiscard]] dispatch::async_scope& connections() noexcept { return connections_; }
  /// True once shutdown began: finish the request in flight, then close. [any thread]
  [[nodiscard]] bool draining() const noexcept { return draining_.load(std::memory_order_acquire); }

  /// Binds a listener to `where` for every handler thread, sharing the address with
  /// reuse_port so the kernel spreads the connections over them (only thread 0's when
  /// `one_listener`, and always for a unix: path, which has one), spawns
  /// `accept_loop(listener, thread index)` for each in listeners(), on its thread, and
  /// returns the address they listen on (with the port the first got, for port 0). Throws
  /// std::system_error. [the main thread]
  net::endpoint start_listeners(
      const net::endpoint& where, bool one_listener,
      const std::function<dispatch::task<>(net::tcp_listener, unsigned)>& accept_loop);

  /// Sets what runs on each handler thread, given its index, once draining() has turned true
  /// (before the grace period): e.g. closing the connections that wait idle for a request,
  /// which would otherwise only notice the drain when their wait ends. Call before run().
  /// [the main thread]
  void on_drain(std::function<void(unsigned thread)> hook) { drain_hook_ = std::move(hook); }

  /// Prints "listening on <where>", waits for SIGINT / SIGTERM (or stop()) on the main thread's
  /// loop, shuts down, and returns the exit status (0). [the main thread]
  int run(const net::endpoint& where, std::chrono::milliseconds grace);

  /// Begins the shutdown as a signal would. [any thread]
  void stop() noexcept;

 private:
  // Before threads_, so it outlives the threads (which run it).
  std::function<void(unsigned)> drain_hook_;
  std::vector<std::unique_ptr<dispatch::handler_thread>> threads_;
  dispatch::async_scope listeners_;
  dispatch::async_scope connections_;
  std::atomic<bool> draining_{ false };
  struct signals;
  std::unique_ptr<signals> signals_;
};

/// Whether `e` only means that the peer went away or the server is stopping
/// (operation_canceled, ECONNRESET, EPIPE): nothing worth a line on stderr.
[[nodiscard]] bool is_disconnect(const std::system_error& e) noexcept;

/// Writes the errors of one kind (a listener's accept failures) to stderr at most once a
/// second; a line after some were left out says how many. A client that keeps connecting to a
/// server whose descriptor table is full makes every accept fail: one line per failure would
/// fill the log and keep the thread writing to stderr. [one thread]
class error_report {
 public:
  /// `what` starts each line, e.g. "http_server: accept".
  explicit error_report(std::string what) : what_(std::move(what)) {}
  /// Writes how many were left out since the last line, if any.
  ~error_report();
  error_report(const error_report&) = delete;
  error_report& operator=(const error_report&) = delete;

  /// Reports `e` now, or counts it when a line was written less than a second ago.
  void operator()(const std::exception& e);

 private:
  std::string what_;
  std::chrono::steady_clock::time_point quiet_until_{};
  unsigned long long left_out_ = 0;
};

}  // namespace cyan::examples
