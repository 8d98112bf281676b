#pragma once

// Child processes for the network benchmarks and the example programs' tests: servers started
// once and kept up while the arms alternate, load generators run per sample, each optionally
// pinned to one CPU; a client fed through its stdin.

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace cyan::bench {

/// A child process with its stdout piped to us. Killed (SIGTERM, then SIGKILL) and reaped on
/// destruction if still running.
class child_process {
 public:
  /// Starts `argv[0]` with `argv`, on CPU `cpu` (or any CPU when negative); with `piped_input`
  /// its stdin is a pipe fed by write_input() (otherwise it shares ours); with `piped_errors`
  /// its stderr goes to the same pipe as its stdout (otherwise it shares ours). Its environment
  /// is ours with `environment`'s "NAME=value" entries added (replacing ours of the same name).
  /// Throws std::system_error when it cannot be started.
  child_process(const std::vector<std::string>& argv, int cpu, bool piped_input = false,
                bool piped_errors = false, const std::vector<std::string>& environment = {});
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  ~child_process();

  /// The next line of its stdout (without the newline), or "" at its end or after `limit`.
  [[nodiscard]] std::string read_line(std::chrono::milliseconds limit);
  /// Everything left on its stdout until it exits (or `limit`).
  [[nodiscard]] std::string read_all(std::chrono::milliseconds limit);
  /// Writes `text` to its stdin (piped_input only); false when it no longer reads it.
  bool write_input(const std::string& text);
  /// Closes its stdin: it reads end of file.
  void close_input();
  /// CPU seconds (user + system) it has used so far, all its threads: its CPU-time clock
  /// (nanoseconds), or /proc (clock ticks) where that clock cannot be read.
  [[nodiscard]] double cpu_seconds() const;
  /// SIGTERM, then waits up to `limit` (then SIGKILL); returns the exit status (-1: killed or
  /// failed).
  int stop(std::chrono::milliseconds limit = std::chrono::seconds(5));
  /// Waits for it to exit by itself up to `limit` (then SIGKILL); returns its exit status.
  int wait(std::chrono::milliseconds limit);

  [[nodiscard]] pid_t pid() const noexcept { return pid_; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  int in_ = -1;
  std::string pending_;
  bool reaped_ = false;
  int status_ = -1;
};

/// A child process that only burns CPU (a plain busy loop, no exec) pinned to one CPU, for as long
/// as the object lives: the benchmarks' busy mode (CYAN_BENCH_BUSY, see harness.h) runs one for
/// each arm run, a machine with no CPU to spare. Killed (SIGKILL) and reaped on destruction; it
/// also dies with us (PR_SET_PDEATHSIG).
class busy_loop_process {
 public:
  /// Starts it on CPU `cpu` (negative: the last CPU this process may run on). Throws
  /// std::system_error when it cannot be started.
  explicit busy_loop_process(int cpu = -1);
  busy_loop_process(const busy_loop_process&) = delete;
  busy_loop_process& operator=(const busy_loop_process&) = delete;
  ~busy_loop_process();

  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  [[nodiscard]] int cpu() const noexcept { return cpu_; }

 private:
  pid_t pid_ = -1;
  int cpu_ = -1;
};

/// The highest-numbered CPU this process may run on (its affinity mask), or 0.
[[nodiscard]] int last_allowed_cpu();

/// The port of a "listening on HOST:PORT" line, or 0.
[[nodiscard]] unsigned port_of_listening_line(const std::string& line);

/// The key=value pairs of a line "RESULT k=v k=v ..." in `output` (empty when there is none).
[[nodiscard]] std::map<std::string, double> parse_result_line(const std::string& output);

/// The directory of the running executable (where the sibling programs are built).
[[nodiscard]] std::string executable_directory();

}  // namespace cyan::bench
