#pragma once

// What the example servers share besides cyan::net::tcp_server (which accepts, spreads the
// connections over the threads and drains): their command line (--port, --threads, --grace-ms,
// --help and the server's own options), the "listening on <endpoint>" line, the wait for
// SIGINT / SIGTERM (a cyan::event::signal_set on the main loop) that starts the shutdown, and
// the once-a-second report of accept failures.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
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

/// Blocks SIGINT and SIGTERM in the calling thread. Call it first in main(), before any thread
/// starts (threads inherit the mask), so that the signals wait for serve_until_signalled()
/// whenever they come. [the main thread]
void block_shutdown_signals();

/// Prints "listening on <endpoint>", waits on the main loop for SIGINT or SIGTERM, then stops
/// `server` with `grace` (stop accepting, drain, cancel what is left after `grace`) and returns
/// the exit status (0). [the main thread, after block_shutdown_signals()]
int serve_until_signalled(net::tcp_server& server, std::chrono::milliseconds grace);

/// Whether `e` only means that the peer went away or the server is stopping
/// (operation_canceled, ECONNRESET, EPIPE): nothing worth a line on stderr.
[[nodiscard]] bool is_disconnect(const std::system_error& e) noexcept;

/// Writes the errors of one kind (a listener's accept failures) to stderr at most once a
/// second; a line after some were left out says how many. A client that keeps connecting to a
/// server whose descriptor table is full makes every accept fail: one line per failure would
/// fill the log and keep the thread writing to stderr. [any thread]
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
  std::mutex mutex_;  // the listeners of several threads report to one
  std::chrono::steady_clock::time_point quiet_until_{};
  unsigned long long left_out_ = 0;
};

}  // namespace cyan::examples
