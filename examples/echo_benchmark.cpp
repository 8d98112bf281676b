// Echo servers side by side, each driven by load_tester: 100 connections, each sending a message
// and reading it back, CYAN_BENCH_ECHO_REQUESTS times (default 1200: six arms, 11 repetitions
// and three workloads stay near five minutes on a 2-core machine). The arms:
//   cyan echo_server          echo_server on its default network backend (CYAN_NET_BACKEND=auto
//                             in its environment: io_uring where a ring can be set up);
//   cyan echo_server (epoll)  the same program with CYAN_NET_BACKEND=epoll, the fallback path;
//   Boost.Asio coroutines     an idiomatic Asio C++20-coroutine server (peers/asio_echo_server)
//                             on Asio's default epoll reactor;
//   Boost.Asio (io_uring)     the same source built with BOOST_ASIO_HAS_IO_URING and
//                             BOOST_ASIO_DISABLE_EPOLL (asio_uring_echo_server);
//   raw epoll (floor)         an edge-triggered epoll server (peers/epoll_echo_server);
//   raw io_uring (floor)      a liburing server with multishot accept and receive and a provided
//                             buffer ring (peers/uring_echo_server).
//
// The servers start once and stay up; the arms alternate per repetition (the harness). With one
// server thread, the servers run on CPU 0 and the load on CPU 1: the server's core saturates, so
// each workload is reported twice — server CPU time per message (from /proc/<pid>/stat, the
// figure the goals are about) and wall time per message (1 / messages per second) — with each
// arm's median latency p50 / p99 from load_tester. The 2-thread variants run unpinned (the load
// shares the two cores with the server).
//
//   CYAN_BENCH_REPS          repetitions per arm (default 11)
//   CYAN_BENCH_ECHO_REQUESTS round trips per connection per sample (default 1200)

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/harness.h"
#include "bench/process.h"

namespace {

using namespace std::chrono_literals;
using cyan::bench::child_process;

constexpr int kConnections = 100;

constexpr const char* kCyan = "cyan echo_server";
constexpr const char* kCyanEpoll = "cyan echo_server (epoll)";
constexpr const char* kAsio = "Boost.Asio coroutines";
constexpr const char* kAsioUring = "Boost.Asio (io_uring)";
constexpr const char* kEpollFloor = "raw epoll (floor)";
constexpr const char* kUringFloor = "raw io_uring (floor)";

struct server {
  std::string arm;
  std::unique_ptr<child_process> process;
  unsigned port = 0;
};

// Starts `program` with --port 0 --threads `threads`, `environment` added to its environment,
// and reads its port.
server start_server(const std::string& arm, const std::string& program, unsigned threads, int cpu,
                    const std::vector<std::string>& environment = {}) {
  const std::string path = cyan::bench::executable_directory() + "/" + program;
  server started{ arm, std::make_unique<child_process>(
                           std::vector<std::string>{ path, "--port", "0", "--threads",
                                                     std::to_string(threads) },
                           cpu, false, false, environment) };
  started.port = cyan::bench::port_of_listening_line(started.process->read_line(10s));
  if (started.port == 0) {
    throw std::runtime_error(program + " did not print its listening line");
  }
  return started;
}

// Each arm's figures per sample, besides the suite's.
struct latency {
  std::vector<double> cpu_per_message_us;
  std::vector<double> rate;  // messages per second
  std::vector<double> p50_us;
  std::vector<double> p99_us;
};

// Runs load_tester once against `target`; returns the server's CPU seconds and the load's wall
// seconds for the whole run, and the messages (the checksum).
struct load_result {
  double server_cpu = 0;
  double wall = 0;
  std::uint64_t messages = 0;
  double p50_us = 0;
  double p99_us = 0;
};

load_result run_load(server& target, std::size_t size, std::uint64_t requests, int cpu) {
  const std::string path = cyan::bench::executable_directory() + "/load_tester";
  const double cpu_before = target.process->cpu_seconds();
  child_process load({ path, "--mode", "echo", "--port", std::to_string(target.port),
                       "--connections", std::to_string(kConnections), "--requests",
                       std::to_string(requests), "--size", std::to_string(size) },
                     cpu);
  const std::string output = load.read_all(120s);
  const int status = load.wait(10s);
  const double cpu_after = target.process->cpu_seconds();
  const auto values = cyan::bench::parse_result_line(output);
  if (status != 0 || values.empty() || values.at("errors") != 0) {
    std::fprintf(stderr, "load_tester against %s failed (status %d):\n%s\n", target.arm.c_str(),
                 status, output.c_str());
    return {};
  }
  return { cpu_after - cpu_before, values.at("seconds"),
           static_cast<std::uint64_t>(values.at("requests")), values.at("p50_us"),
           values.at("p99_us") };
}

double median(std::vector<double> values) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The goals. One server thread: CPU per message at most 0.90x Asio's on epoll, at most Asio's on
// io_uring, at most 1.10x the raw io_uring floor's. Two threads (unpinned, the load shares the
// cores): at most Asio's on epoll and 1.10x the raw epoll floor's. Both: messages per second at
// least the better Asio backend's.
void print_goals(cyan::bench::suite& cpu, std::map<std::string, latency>& latencies,
                 unsigned threads) {
  if (threads == 1) {
    cpu.goal_at_most(kCyan, kAsio, 0.90);
    cpu.goal_at_most(kCyan, kAsioUring, 1.0);
    cpu.goal_at_most(kCyan, kUringFloor, 1.10);
  } else {
    cpu.goal_at_most(kCyan, kAsio, 1.0);
    cpu.goal_at_most(kCyan, kEpollFloor, 1.10);
  }
  const double cyan_rate = median(latencies[kCyan].rate);
  const double asio_rate =
      std::max(median(latencies[kAsio].rate), median(latencies[kAsioUring].rate));
  std::printf("goal: %s messages/s >= the better Boost.Asio backend's: %s (%.2fx)\n", kCyan,
              cyan_rate >= asio_rate ? "met" : "MISSED",
              asio_rate > 0 ? cyan_rate / asio_rate : 0.0);
}

// One (size, threads) workload: a suite of server CPU per message; the same load runs give
// each arm's messages per second and latency, printed after the table with their spread.
bool run_workload(std::size_t size, unsigned threads, bool pinned, std::uint64_t requests) {
  const int server_cpu = pinned ? 0 : -1;
  const int load_cpu = pinned ? 1 : -1;
  std::vector<server> servers;
  servers.push_back(
      start_server(kCyan, "echo_server", threads, server_cpu, { "CYAN_NET_BACKEND=auto" }));
  servers.push_back(
      start_server(kCyanEpoll, "echo_server", threads, server_cpu, { "CYAN_NET_BACKEND=epoll" }));
  servers.push_back(start_server(kAsio, "asio_echo_server", threads, server_cpu));
  servers.push_back(start_server(kAsioUring, "asio_uring_echo_server", threads, server_cpu));
  servers.push_back(start_server(kEpollFloor, "epoll_echo_server", threads, server_cpu));
  servers.push_back(start_server(kUringFloor, "uring_echo_server", threads, server_cpu));

  const std::string workload = std::to_string(size) + " B, " + std::to_string(threads) + " thread" +
                               (threads > 1 ? "s" : "") + (pinned ? ", pinned" : "");
  cyan::bench::suite cpu("echo_benchmark", "server CPU per message, " + workload);
  std::map<std::string, latency> latencies;
  for (server& target : servers) {
    cpu.add(target.arm, [&, target = &target] {
      const load_result result = run_load(*target, size, requests, load_cpu);
      latencies[target->arm].rate.push_back(
          result.wall > 0 ? static_cast<double>(result.messages) / result.wall : 0);
      latencies[target->arm].p50_us.push_back(result.p50_us);
      latencies[target->arm].p99_us.push_back(result.p99_us);
      latencies[target->arm].cpu_per_message_us.push_back(
          result.messages > 0 ? result.server_cpu * 1e6 / static_cast<double>(result.messages) : 0);
      // Every arm serves the same number of messages (the checksum), so the server's CPU
      // seconds per run compare as CPU per message.
      return cyan::bench::sample{ result.server_cpu, result.messages };
    });
  }
  bool ok = cpu.run();
  const double cyan_rate = median(latencies[kCyan].rate);
  for (const server& target : servers) {
    const latency& l = latencies[target.arm];
    const auto [low, high] = std::minmax_element(l.rate.begin(), l.rate.end());
    const double rate = median(l.rate);
    std::printf(
        "  %-26s %5.2f us CPU/message  %8.0f messages/s (spread %.2f, cyan %.2fx)  latency p50 "
        "%.0f us, p99 %.0f us\n",
        target.arm.c_str(), median(l.cpu_per_message_us), rate, *low > 0 ? *high / *low : 0.0,
        rate > 0 ? cyan_rate / rate : 0.0, median(l.p50_us), median(l.p99_us));
  }
  print_goals(cpu, latencies, threads);
  for (server& target : servers) {
    if (target.process->stop() != 0) {
      std::fprintf(stderr, "%s did not exit 0 on SIGTERM\n", target.arm.c_str());
      ok = false;
    }
  }
  return ok;
}

}  // namespace

int main() {
  const std::uint64_t requests = cyan::bench::env_or("CYAN_BENCH_ECHO_REQUESTS", 1200);
  bool ok = true;
  for (const std::size_t size : { std::size_t{ 64 }, std::size_t{ 4096 } }) {
    ok = run_workload(size, 1, true, requests) && ok;
  }
  ok = run_workload(64, 2, false, requests) && ok;
  return cyan::bench::exit_status(ok);
}
