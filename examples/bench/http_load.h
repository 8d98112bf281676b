#pragma once

// What the HTTP benchmarks (http_benchmark, https_benchmark) share: ports, waiting for a server,
// the CPU of a server's process tree and of the load generators, and wrk's output.

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench/process.h"

namespace cyan::bench {

inline constexpr const char* kNginx = "/usr/sbin/nginx";
inline constexpr const char* kWrk = "/usr/bin/wrk";

/// A port no one listens on now on 127.0.0.1 (bind to 0, read it, close).
[[nodiscard]] unsigned free_port();

/// GET / with Connection: close over a blocking socket to 127.0.0.1:`port`; the body, or ""
/// (bounded by 5 s).
[[nodiscard]] std::string fetch_body(unsigned port);

/// Waits (bounded, 5 s) until something accepts connections on 127.0.0.1:`port`.
[[nodiscard]] bool wait_listening(unsigned port);

/// CPU seconds of `pid` and its direct children (nginx's workers), from /proc.
[[nodiscard]] double tree_cpu_seconds(pid_t pid);

/// CPU seconds (user + system) of this process's children reaped so far: a load generator's,
/// once a sample has waited for it.
[[nodiscard]] double reaped_children_cpu_seconds();

/// The median of `values` (the upper one of an even count); 0 for none.
[[nodiscard]] double median(std::vector<double> values);

/// What a load generator's samples against one server gave, sample by sample.
struct load_figures {
  std::vector<double> cpu_per_request_us;       // the server's (process tree) CPU per request
  std::vector<double> load_cores;               // the generator's CPU seconds per second of run
  std::vector<double> load_cpu_per_request_us;  // the generator's CPU per request
  std::vector<double> p50_us;
  std::vector<double> p99_us;
  double errors = 0;
};

/// A server under load: its arm's name, its process and its port on 127.0.0.1.
struct load_target {
  std::string arm;
  pid_t pid;
  unsigned port;
};

/// What one wrk run printed.
struct wrk_result {
  double requests = 0;
  double seconds = 0;
  double errors = 0;  // non-2xx/3xx responses and socket errors
  double p50_us = 0;
  double p99_us = 0;
};

/// Parses wrk's output (run with --latency); requests is 0 when it did not say.
[[nodiscard]] wrk_result parse_wrk(const std::string& output);

/// nginx's TLS settings for start_nginx().
struct nginx_tls {
  std::string certificate_file;  // PEM chain
  std::string key_file;
  bool session_tickets = true;  // false: no tickets and no session cache (full handshakes)
};

/// A fresh directory under /tmp for nginx's files that its workers (nobody, when started as
/// root) can read.
[[nodiscard]] std::filesystem::path nginx_directory();

/// nginx serving `body` as / on 127.0.0.1:`port` from `dir` (its config, page, logs): 2
/// workers, keep-alive, no access log; over TLS 1.2 / 1.3 with `tls`.
[[nodiscard]] std::unique_ptr<child_process> start_nginx(const std::filesystem::path& dir,
                                                         const std::string& body, unsigned port,
                                                         const nginx_tls* tls = nullptr);

}  // namespace cyan::bench
