// Echo servers side by side (the six arms of bench/echo_servers.h), each driven by load_tester:
// 100 connections, each sending a message and reading it back, CYAN_BENCH_ECHO_REQUESTS times
// (default 1200: six arms, 11 repetitions and three workloads stay near five minutes on a 2-core
// machine).
//
// The servers start once and stay up; the arms alternate per repetition (the harness). With one
// server thread, the servers run on CPU 0 and the load on CPU 1: the server's core saturates, so
// each workload is reported twice — server CPU time per message (the server process's CPU-time
// clock, the figure the goals are about) and wall time per message (1 / messages per second) —
// with each arm's median latency p50 / p99 from load_tester. The 2-thread variants run unpinned
// (the load shares the two cores with the server).
//
//   CYAN_BENCH_REPS          repetitions per arm (default 11)
//   CYAN_BENCH_ECHO_REQUESTS round trips per connection per sample (default 1200)

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/echo_servers.h"
#include "bench/harness.h"

namespace {

using cyan::bench::echo_figures;
using cyan::bench::median_or_zero;

constexpr unsigned kConnections = 100;

constexpr const char* kCyan = cyan::bench::kCyanEcho;
constexpr const char* kAsio = cyan::bench::kAsioEcho;
constexpr const char* kAsioUring = cyan::bench::kAsioUringEcho;
constexpr const char* kEpollFloor = cyan::bench::kEpollFloorEcho;
constexpr const char* kUringFloor = cyan::bench::kUringFloorEcho;

// The goals. One server thread: CPU per message at most 0.90x Asio's on epoll, at most Asio's on
// io_uring, at most 1.10x the raw io_uring floor's. Two threads (unpinned, the load shares the
// cores): at most Asio's on epoll and 1.10x the raw epoll floor's. Both: messages per second at
// least the better Asio backend's.
void print_goals(cyan::bench::suite& cpu, std::map<std::string, echo_figures>& figures,
                 unsigned threads) {
  if (threads == 1) {
    cpu.goal_at_most(kCyan, kAsio, 0.90);
    cpu.goal_at_most(kCyan, kAsioUring, 1.0);
    cpu.goal_at_most(kCyan, kUringFloor, 1.10);
  } else {
    cpu.goal_at_most(kCyan, kAsio, 1.0);
    cpu.goal_at_most(kCyan, kEpollFloor, 1.10);
  }
  const double cyan_rate = median_or_zero(figures[kCyan].rate);
  const double asio_rate =
      std::max(median_or_zero(figures[kAsio].rate), median_or_zero(figures[kAsioUring].rate));
  std::printf("goal: %s messages/s >= the better Boost.Asio backend's: %s (%.2fx)\n", kCyan,
              cyan_rate >= asio_rate ? "met" : "MISSED",
              asio_rate > 0 ? cyan_rate / asio_rate : 0.0);
}

// One (size, threads) workload: a suite of server CPU per message; the same load runs give
// each arm's messages per second and latency, printed after the table with their spread.
bool run_workload(std::size_t size, unsigned threads, bool pinned, std::uint64_t requests) {
  const int server_cpu = pinned ? 0 : -1;
  const int load_cpu = pinned ? 1 : -1;
  std::vector<cyan::bench::echo_server> servers =
      cyan::bench::start_echo_servers(threads, server_cpu);
  const std::string workload = std::to_string(size) + " B, " + std::to_string(threads) + " thread" +
                               (threads > 1 ? "s" : "") + (pinned ? ", pinned" : "");
  cyan::bench::suite cpu("echo_benchmark", "server CPU per message, " + workload);
  std::map<std::string, echo_figures> figures;
  cyan::bench::add_echo_arms(cpu, servers, { kConnections, size, requests }, load_cpu, figures);
  bool ok = cpu.run();
  const double cyan_rate = median_or_zero(figures[kCyan].rate);
  for (const cyan::bench::echo_server& target : servers) {
    const echo_figures& f = figures[target.arm];
    const auto [low, high] = std::minmax_element(f.rate.begin(), f.rate.end());
    const double rate = median_or_zero(f.rate);
    std::printf(
        "  %-26s %5.2f us CPU/message  %8.0f messages/s (spread %.2f, cyan %.2fx)  latency p50 "
        "%.0f us, p99 %.0f us\n",
        target.arm.c_str(), median_or_zero(f.cpu_per_message_us), rate,
        *low > 0 ? *high / *low : 0.0, rate > 0 ? cyan_rate / rate : 0.0, median_or_zero(f.p50_us),
        median_or_zero(f.p99_us));
  }
  print_goals(cpu, figures, threads);
  return cyan::bench::stop_echo_servers(servers) && ok;
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
