// A load generator on cyan::net: C connections spread over T handler threads, each sending
// requests one after another (closed loop) for N requests or S seconds.
//
//   load_tester --port N [--mode echo|http] [--host H] [--connections C] [--threads T]
//               [--requests N | --duration S] [--size B] [--path P] [--timeout-ms MS]
//               [--max-seconds S]
//
//   echo   each request writes B bytes (a per-connection pattern with the request's number in
//          front) and reads exactly B back, which must be the same bytes; a message over 64 KiB
//          is read back while it is being written (the socket buffers cannot hold it all); a
//          run whose buffers (C x 2 x B bytes) would pass 1 GiB is refused (exit status 2);
//   http   each request is "GET <path> HTTP/1.1" on a keep-alive connection; the response's
//          status line, headers and body (Content-Length, or until the server closes) are
//          read; a status other than 2xx counts as invalid. A server that closes the
//          connection after a response gets a new one.
//
// Once a second it prints the totals so far; at the end a summary (throughput, latency
// percentiles from per-thread log-bucketed histograms, errors) and one machine-readable line:
//
//   t=1s requests=41000 connect ok=100 fail=0 read ok=41000 fail=0 write ok=41100 fail=0 invalid=0
//   RESULT requests=... seconds=... rps=... p50_us=... p90_us=... p99_us=... max_us=... errors=...
//
// Every wait is bounded: each operation (connect, each read and write) gives up after
// --timeout-ms; --duration ends at its deadline (a request in flight finishes); the whole run
// stops at --max-seconds, its stragglers cancelled and counted as errors. The exit status is 0
// only when there was no error of any kind.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "cyan/common/cache_line.h"
#include "cyan/dispatch.h"
#include "cyan/net.h"
#include "load/http_response_reader.h"
#include "load/latency_histogram.h"
#include "server/server_support.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::async_scope;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::examples::command_line;
using cyan::examples::http_protocol_error;
using cyan::examples::http_response_reader;
using cyan::examples::latency_histogram;
using cyan::net::endpoint;
using cyan::net::tcp_socket;
using clock_type = std::chrono::steady_clock;

enum class mode { echo, http };

// The run as the command line describes it. Read-only once the connections start.
struct run_settings {
  mode kind = mode::echo;
  endpoint peer;
  std::string request;  // http: the request every connection sends
  unsigned connections = 0;
  unsigned threads = 0;
  std::uint64_t requests = 0;          // per connection; 0: until the deadline
  std::chrono::seconds duration{ 0 };  // 0: until the requests are done
  clock_type::time_point deadline = clock_type::time_point::max();  // set when the run starts
  std::size_t size = 0;                                             // echo: bytes per message
  std::chrono::milliseconds timeout{ 0 };                           // per operation
  std::chrono::seconds max_seconds{ 0 };                            // the whole run

  [[nodiscard]] bool wants_another(std::uint64_t done) const {
    return (requests == 0 || done < requests) && clock_type::now() < deadline;
  }
};

// A total that one handler thread bumps and the main thread reads for the progress line.
// Relaxed: nothing else is published through it; the final figures are read after the join.
class counter {
 public:
  void bump() noexcept {
    value_.store(value_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t get() const noexcept {
    return value_.load(std::memory_order_relaxed);
  }

 private:
  std::atomic<std::uint64_t> value_{ 0 };
};

// One handler thread's figures. Written only by that thread; the counters are read by the
// main thread at any time, the histogram only after every connection finished.
struct alignas(cyan::cache_line_size) thread_stats {
  counter requests;  // completed and valid
  counter connect_ok, connect_fail;
  counter read_ok, read_fail;
  counter write_ok, write_fail;
  counter invalid;            // echo: other bytes came back; http: not 2xx, or not HTTP
  latency_histogram latency;  // nanoseconds per valid request
};

// The totals over every thread.
struct totals {
  std::uint64_t requests = 0, connect_ok = 0, connect_fail = 0, read_ok = 0, read_fail = 0,
                write_ok = 0, write_fail = 0, invalid = 0;
  [[nodiscard]] std::uint64_t errors() const noexcept {
    return connect_fail + read_fail + write_fail + invalid;
  }
};

totals sum(const std::vector<std::unique_ptr<thread_stats>>& stats) {
  totals t;
  for (const auto& s : stats) {
    t.requests += s->requests.get();
    t.connect_ok += s->connect_ok.get();
    t.connect_fail += s->connect_fail.get();
    t.read_ok += s->read_ok.get();
    t.read_fail += s->read_fail.get();
    t.write_ok += s->write_ok.get();
    t.write_fail += s->write_fail.get();
    t.invalid += s->invalid.get();
  }
  return t;
}

// The first error of each kind goes to stderr; the counts tell the rest.
void report_once(std::atomic<bool>& reported, const char* what, const std::exception& e) {
  if (!reported.exchange(true, std::memory_order_relaxed)) {
    std::fprintf(stderr, "load_tester: %s: %s\n", what, e.what());
  }
}
std::atomic<bool> g_connect_reported, g_read_reported, g_write_reported, g_invalid_reported;

enum class outcome { valid, valid_and_closed, failed };

// Up to this size a message fits in the socket buffers of the two ends, so it is written whole
// and then read back. A larger one is read back while it is being written: written whole
// first, it would fill the buffers, and then the server would wait for us to read while we
// wait for it to read.
constexpr std::size_t kWriteThenRead = 64 * 1024;

// One echo request: write the message, read as many bytes back, compare.
class echo_exchange {
 public:
  echo_exchange(std::size_t size, unsigned connection) : sent_(size), received_(size) {
    for (std::size_t i = 0; i < size; ++i) {
      sent_[i] = static_cast<std::byte>('a' + (connection + i) % 26);
    }
  }

  task<outcome> run(tcp_socket& socket, std::uint64_t number, const run_settings& settings,
                    thread_stats& stats) {
    std::memcpy(sent_.data(), &number,
                std::min(sent_.size(), sizeof number));  // a stale echo differs
    if (sent_.size() > kWriteThenRead) {
      // Each direction counts its own success or failure.
      const auto [wrote, read_back] = co_await cyan::dispatch::when_all(
          write(socket, settings, stats), read(socket, settings, stats));
      if (!wrote || !read_back) {
        co_return outcome::failed;
      }
    } else {
      // What write() and read() do, in turn and without their tasks: a message that fits the
      // socket buffers needs no concurrent reader, and the client runs flat out in the
      // benchmarks, where two child tasks per message are a measurable cost (docs/bench/notes.md).
      try {
        co_await socket.write_all(sent_, settings.timeout);
        stats.write_ok.bump();
      } catch (const std::system_error& e) {
        stats.write_fail.bump();
        report_once(g_write_reported, "write", e);
        co_return outcome::failed;
      }
      try {
        co_await socket.read_exact(received_, settings.timeout);
        stats.read_ok.bump();
      } catch (const std::system_error& e) {
        stats.read_fail.bump();
        report_once(g_read_reported, "read", e);
        co_return outcome::failed;
      }
    }
    if (sent_ != received_) {
      stats.invalid.bump();
      report_once(g_invalid_reported, "echo",
                  std::runtime_error("the echo differs from what was sent"));
      co_return outcome::failed;
    }
    co_return outcome::valid;
  }

 private:
  // The two directions of a large message, run side by side: each counts its own outcome.
  task<bool> write(tcp_socket& socket, const run_settings& settings, thread_stats& stats) {
    try {
      co_await socket.write_all(sent_, settings.timeout);
      stats.write_ok.bump();
      co_return true;
    } catch (const std::system_error& e) {
      stats.write_fail.bump();
      report_once(g_write_reported, "write", e);
      co_return false;
    }
  }

  task<bool> read(tcp_socket& socket, const run_settings& settings, thread_stats& stats) {
    try {
      co_await socket.read_exact(received_, settings.timeout);
      stats.read_ok.bump();
      co_return true;
    } catch (const std::system_error& e) {
      stats.read_fail.bump();
      report_once(g_read_reported, "read", e);
      co_return false;
    }
  }

  std::vector<std::byte> sent_;
  std::vector<std::byte> received_;
};

// One HTTP request: write the GET, read the response, check its status.
class http_exchange {
 public:
  task<outcome> run(tcp_socket& socket, std::uint64_t, const run_settings& settings,
                    thread_stats& stats) {
    try {
      co_await socket.write_all(cyan::net::buffer(settings.request), settings.timeout);
      stats.write_ok.bump();
    } catch (const std::system_error& e) {
      stats.write_fail.bump();
      report_once(g_write_reported, "write", e);
      co_return outcome::failed;
    }
    cyan::examples::http_response response;
    try {
      response = co_await reader_.read(socket, settings.timeout);
      stats.read_ok.bump();
    } catch (const std::system_error& e) {
      stats.read_fail.bump();
      report_once(g_read_reported, "read", e);
      co_return outcome::failed;
    } catch (const http_protocol_error& e) {
      stats.invalid.bump();
      report_once(g_invalid_reported, "response", e);
      co_return outcome::failed;
    }
    if (response.status / 100 != 2) {
      stats.invalid.bump();
      report_once(g_invalid_reported, "response",
                  std::runtime_error("status " + std::to_string(response.status)));
      co_return outcome::failed;
    }
    co_return response.keep_alive ? outcome::valid : outcome::valid_and_closed;
  }

 private:
  http_response_reader reader_;
};

// One connection's requests, timed; false once one failed.
template <typename Exchange>
task<bool> run_requests(tcp_socket& socket, Exchange& exchange, std::uint64_t& done,
                        const run_settings& settings, thread_stats& stats) {
  while (settings.wants_another(done)) {
    const auto start = clock_type::now();
    const outcome result = co_await exchange.run(socket, done, settings, stats);
    if (result == outcome::failed) {
      co_return false;
    }
    stats.latency.record(static_cast<std::uint64_t>((clock_type::now() - start).count()));
    stats.requests.bump();
    ++done;
    if (result == outcome::valid_and_closed) {
      co_return true;  // the server closed: connect again
    }
  }
  co_return true;
}

// One client connection: connects (again, when an HTTP server closes it) and runs requests
// until there are enough, the deadline passed, or something failed. `settings` and `stats`
// outlive every connection (main joins them all first).
template <typename Exchange>
task<> run_connection(const run_settings* settings, thread_stats* stats, Exchange exchange) {
  std::uint64_t done = 0;
  while (settings->wants_another(done)) {
    tcp_socket socket;
    try {
      socket = co_await tcp_socket::connect(settings->peer, settings->timeout);
      socket.set_nodelay();
      stats->connect_ok.bump();
    } catch (const std::system_error& e) {
      stats->connect_fail.bump();
      report_once(g_connect_reported, "connect", e);
      co_return;  // no retry: a refused connection would spin
    }
    if (!co_await run_requests(socket, exchange, done, *settings, *stats)) {
      co_return;
    }
  }
}

void spawn_connections(const run_settings& settings,
                       std::vector<std::unique_ptr<handler_thread>>& threads,
                       std::vector<std::unique_ptr<thread_stats>>& stats, async_scope& scope) {
  for (unsigned c = 0; c < settings.connections; ++c) {
    const unsigned t = c % settings.threads;
    if (settings.kind == mode::echo) {
      scope.spawn(*threads[t],
                  run_connection(&settings, stats[t].get(), echo_exchange(settings.size, c)));
    } else {
      scope.spawn(*threads[t], run_connection(&settings, stats[t].get(), http_exchange()));
    }
  }
}

void print_progress(clock_type::duration elapsed, const totals& t) {
  std::printf(
      "t=%llds requests=%llu connect ok=%llu fail=%llu read ok=%llu fail=%llu write ok=%llu "
      "fail=%llu "
      "invalid=%llu\n",
      static_cast<long long>(std::chrono::round<std::chrono::seconds>(elapsed).count()),
      static_cast<unsigned long long>(t.requests), static_cast<unsigned long long>(t.connect_ok),
      static_cast<unsigned long long>(t.connect_fail), static_cast<unsigned long long>(t.read_ok),
      static_cast<unsigned long long>(t.read_fail), static_cast<unsigned long long>(t.write_ok),
      static_cast<unsigned long long>(t.write_fail), static_cast<unsigned long long>(t.invalid));
  std::fflush(stdout);
}

void print_summary(double seconds, const totals& t, const latency_histogram& latency,
                   bool hit_cap) {
  const double rps = seconds > 0 ? static_cast<double>(t.requests) / seconds : 0.0;
  const auto us = [&](double fraction) {
    return static_cast<double>(latency.percentile(fraction)) / 1000.0;
  };
  const double max_us = static_cast<double>(latency.max()) / 1000.0;
  const std::uint64_t errors = t.errors() + (hit_cap ? 1 : 0);
  std::printf("duration %.3f s, %llu requests, %.0f requests/s\n", seconds,
              static_cast<unsigned long long>(t.requests), rps);
  std::printf("latency p50 %.1f us, p90 %.1f us, p99 %.1f us, max %.1f us\n", us(0.50), us(0.90),
              us(0.99), max_us);
  std::printf(
      "errors %llu: connect %llu, read %llu, write %llu, invalid %llu%s\n",
      static_cast<unsigned long long>(errors), static_cast<unsigned long long>(t.connect_fail),
      static_cast<unsigned long long>(t.read_fail), static_cast<unsigned long long>(t.write_fail),
      static_cast<unsigned long long>(t.invalid), hit_cap ? ", and the run hit --max-seconds" : "");
  std::printf(
      "RESULT requests=%llu seconds=%.3f rps=%.0f p50_us=%.1f p90_us=%.1f p99_us=%.1f max_us=%.1f "
      "errors=%llu\n",
      static_cast<unsigned long long>(t.requests), seconds, rps, us(0.50), us(0.90), us(0.99),
      max_us, static_cast<unsigned long long>(errors));
  std::fflush(stdout);
}

// The option `name`, which a zero would make meaningless: a zero is a mistake, said so rather
// than quietly run as 1.
long long at_least_one(const command_line& cli, const char* name) {
  const long long value = cli.number(name);
  if (value < 1) {
    throw std::invalid_argument(std::string("--") + name + " must be at least 1");
  }
  return value;
}

// The most the echo buffers may take: each connection keeps its message and its echo
// (connections x 2 x --size bytes). Past it a size is more likely a typo than a test, and the
// run would end in std::bad_alloc (or the OOM killer) instead of a message.
constexpr std::uint64_t kMaxEchoBufferBytes = std::uint64_t{ 1 } << 30;

// Refuses an echo run whose buffers would take more than kMaxEchoBufferBytes.
void check_echo_memory(const run_settings& s) {
  const std::uint64_t per_connection = kMaxEchoBufferBytes / 2 / s.connections;
  if (s.kind == mode::echo && s.size > per_connection) {
    throw std::invalid_argument("--size " + std::to_string(s.size) + " with --connections " +
                                std::to_string(s.connections) +
                                " needs more than 1 GiB of echo buffers (connections x 2 x size)");
  }
}

run_settings read_settings(const command_line& cli) {
  run_settings s;
  const std::string& kind = cli.text("mode");
  if (kind != "echo" && kind != "http") {
    throw std::invalid_argument("--mode must be echo or http, not " + kind);
  }
  s.kind = kind == "echo" ? mode::echo : mode::http;
  s.peer = cli.listen_endpoint();
  if (!s.peer.is_unix() && s.peer.port() == 0) {
    throw std::invalid_argument("--port is required");
  }
  s.request = "GET " + cli.text("path") + " HTTP/1.1\r\nHost: " + cli.text("host") + ":" +
              cli.text("port") + "\r\n\r\n";
  s.connections = static_cast<unsigned>(at_least_one(cli, "connections"));
  s.threads = static_cast<unsigned>(
      std::min(at_least_one(cli, "threads"), static_cast<long long>(s.connections)));
  s.requests = static_cast<std::uint64_t>(cli.number("requests"));
  s.size = static_cast<std::size_t>(at_least_one(cli, "size"));
  check_echo_memory(s);
  s.timeout = std::chrono::milliseconds(at_least_one(cli, "timeout-ms"));
  s.max_seconds = std::chrono::seconds(at_least_one(cli, "max-seconds"));
  s.duration = std::chrono::seconds(cli.number("duration"));
  if (s.requests == 0 && s.duration == 0s) {
    throw std::invalid_argument("give --requests N or --duration S");
  }
  if (s.duration >= s.max_seconds) {
    throw std::invalid_argument("--duration must be below --max-seconds");
  }
  return s;
}

// Runs the connections, printing progress once a second; returns the exit status.
int run(run_settings& settings) {
  std::vector<std::unique_ptr<handler_thread>> threads;
  std::vector<std::unique_ptr<thread_stats>> stats;
  for (unsigned t = 0; t < settings.threads; ++t) {
    cyan::dispatch::handler_thread_options options;
    options.name = "load_tester";
    threads.push_back(std::make_unique<handler_thread>(std::move(options)));
    stats.push_back(std::make_unique<thread_stats>());
  }
  async_scope scope;
  const auto start = clock_type::now();
  if (settings.duration > 0s) {
    settings.deadline = start + settings.duration;
  }
  spawn_connections(settings, threads, stats, scope);
  auto finished =
      cyan::dispatch::co_spawn(*threads[0], [&scope]() -> task<> { co_await scope.join(); });
  const auto hard_cap = start + settings.max_seconds;
  for (auto next = start + 1s;
       finished.wait_until(std::min(next, hard_cap)) != std::future_status::ready; next += 1s) {
    if (clock_type::now() >= hard_cap) {
      break;
    }
    print_progress(next - start, sum(stats));
  }
  const bool hit_cap = !finished.is_ready();
  if (hit_cap) {
    std::fprintf(stderr, "load_tester: --max-seconds passed; stopping every connection\n");
    scope.request_stop();  // each pending operation ends with operation_canceled
    if (finished.wait_for(settings.timeout + 5s) != std::future_status::ready) {
      std::fprintf(stderr, "load_tester: the connections did not stop\n");
      std::fflush(stdout);
      std::_Exit(3);
    }
  }
  finished.get();
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  latency_histogram latency;
  for (const auto& s : stats) {
    latency.merge(s->latency);
  }
  const totals t = sum(stats);
  print_summary(seconds, t, latency, hit_cap);
  return t.errors() == 0 && !hit_cap ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  command_line cli("load_tester", "a load generator for echo and HTTP servers, on cyan::net");
  cli.option("mode", "echo", "echo or http")
      .option("host", "127.0.0.1", "the server's address (numeric, or unix:/path)")
      .option("port", "0", "the server's port (required)")
      .option("connections", "100", "concurrent connections")
      .option("threads", "1", "handler threads the connections are spread over")
      .option("requests", "0", "requests per connection (0: until --duration)")
      .option("duration", "0", "seconds to run (0: until --requests are done)")
      .option("size", "64", "echo: bytes per message")
      .option("path", "/", "http: the path to GET")
      .option("timeout-ms", "5000", "time limit of each connect, read and write")
      .option("max-seconds", "300", "hard cap on the whole run");
  cli.parse(argc, argv);
  try {
    run_settings settings = read_settings(cli);
    return run(settings);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "load_tester: %s\n", e.what());
    return 2;
  }
}
