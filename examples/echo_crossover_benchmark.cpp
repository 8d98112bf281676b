// The crossover table (issue 32): the six echo servers of bench/echo_servers.h at every shape
// of load — 1, 10, 100 and 1,000 connections × messages of 64 B, 4 KiB and 64 KiB — to find
// where cyan's default backend (io_uring) is not the better of its two. One server thread pinned
// to CPU 0, load_tester on CPU 1 (echo_benchmark's 1-thread workloads); each cell is one suite,
// its arms alternating per repetition, the figure the server's CPU time per message, with
// messages per second beside it. At the end, one line per cell: cyan's default against cyan on
// epoll, marked where the default takes more than 5 % more CPU per message.
//
// Each connection echoes a cell's number of messages one after another (closed loop); the
// counts below make a sample last a few tenths of a second, so that twelve cells × six arms ×
// 11 repetitions stay within ten minutes on a 2-core machine. With 1,000 connections each one
// echoes only a few messages, so accepting and closing the connections is part of the figure —
// for every arm alike.
//
//   CYAN_BENCH_REPS   repetitions per arm (default 11)

#include <sys/resource.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/echo_servers.h"
#include "bench/harness.h"

namespace {

using cyan::bench::echo_figures;
using cyan::bench::echo_load;
using cyan::bench::median_or_zero;

constexpr int kServerCpu = 0;
constexpr int kLoadCpu = 1;

// Round trips per connection for each cell: a few tenths of a second of load per sample on a
// 2-core machine (Boost.Asio's at 64 KiB up to about a second), fewer per connection where there
// are more connections or larger messages.
constexpr echo_load kCells[] = {
  { 1, 64, 1500 },  { 1, 4096, 1500 },  { 1, 65536, 600 },   //
  { 10, 64, 1500 }, { 10, 4096, 1000 }, { 10, 65536, 150 },  //
  { 100, 64, 150 }, { 100, 4096, 120 }, { 100, 65536, 20 },  //
  { 1000, 64, 15 }, { 1000, 4096, 12 }, { 1000, 65536, 2 },
};

// The default backend is "worse" in a cell when its CPU per message exceeds epoll's by this.
constexpr double kWorseThanEpoll = 1.05;

// One cell's figures for the table at the end.
struct cell_result {
  echo_load load;
  double cyan_us = 0, cyan_spread = 0;
  double epoll_us = 0, epoll_spread = 0;
  std::string best_peer;  // the Boost.Asio backend with less CPU per message
  double best_peer_us = 0, best_peer_spread = 0;
  double cyan_rate = 0, epoll_rate = 0;
};

std::string size_text(std::size_t size) {
  return size >= 1024 ? std::to_string(size / 1024) + " KiB" : std::to_string(size) + " B";
}

std::string cell_text(const echo_load& load) {
  return size_text(load.size) + ", " + std::to_string(load.connections) + " connection" +
         (load.connections > 1 ? "s" : "");
}

// 1,000 connections need 1,000 descriptors in load_tester and in each server, on top of what
// they hold anyway; the children inherit the limit.
void raise_descriptor_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
  std::printf("descriptor limit: %llu\n", static_cast<unsigned long long>(limit.rlim_cur));
}

// Prints each arm's CPU per message and messages per second (with its spread) after the table.
void print_rates(const std::vector<cyan::bench::echo_server>& servers,
                 std::map<std::string, echo_figures>& figures) {
  for (const cyan::bench::echo_server& target : servers) {
    const echo_figures& f = figures[target.arm];
    const auto [low, high] = std::minmax_element(f.rate.begin(), f.rate.end());
    std::printf("  %-26s %6.2f us CPU/message  %8.0f messages/s (spread %.2f)\n",
                target.arm.c_str(), median_or_zero(f.cpu_per_message_us), median_or_zero(f.rate),
                *low > 0 ? *high / *low : 0.0);
  }
}

// One cell: a suite of server CPU per message over the six arms.
bool run_cell(const echo_load& load, std::vector<cell_result>& results) {
  std::vector<cyan::bench::echo_server> servers = cyan::bench::start_echo_servers(1, kServerCpu);
  cyan::bench::suite cpu("echo_crossover_benchmark",
                         "server CPU per message, " + cell_text(load) + ", 1 thread, pinned");
  std::map<std::string, echo_figures> figures;
  cyan::bench::add_echo_arms(cpu, servers, load, kLoadCpu, figures);
  const bool ok = cpu.run();
  print_rates(servers, figures);

  const std::uint64_t messages = load.connections * load.requests;
  const auto per_message_us = [&](const char* arm) { return cpu.median(arm) * 1e6 / messages; };
  const char* best = cpu.median(cyan::bench::kAsioEcho) <= cpu.median(cyan::bench::kAsioUringEcho)
                         ? cyan::bench::kAsioEcho
                         : cyan::bench::kAsioUringEcho;
  results.push_back({ load, per_message_us(cyan::bench::kCyanEcho),
                      cpu.spread(cyan::bench::kCyanEcho),
                      per_message_us(cyan::bench::kCyanEchoEpoll),
                      cpu.spread(cyan::bench::kCyanEchoEpoll), best, per_message_us(best),
                      cpu.spread(best), median_or_zero(figures[cyan::bench::kCyanEcho].rate),
                      median_or_zero(figures[cyan::bench::kCyanEchoEpoll].rate) });
  return cyan::bench::stop_echo_servers(servers) && ok;
}

// The crossover table: per cell, cyan's default and epoll backends and the better Asio
// backend, in us of server CPU per message (spread), with the ratios.
void print_crossover(const std::vector<cell_result>& results) {
  std::printf(
      "\ncrossover: server CPU per message, us (spread); default = cyan echo_server on "
      "CYAN_NET_BACKEND=auto (io_uring), '<' marks a cell where it takes > %.0f %% more than on "
      "epoll, '!' a spread > %.1f\n",
      (kWorseThanEpoll - 1) * 100, cyan::bench::suite::kMaxSpread);
  std::printf("  %-24s %15s %15s %14s %26s %14s %22s\n", "cell", "cyan default", "cyan epoll",
              "default/epoll", "better Boost.Asio", "default/Asio", "messages/s def./epoll");
  for (const cell_result& r : results) {
    const auto mark = [](double spread) {
      return spread > cyan::bench::suite::kMaxSpread ? "!" : " ";
    };
    const double ratio = r.cyan_us / r.epoll_us;
    std::printf(
        "  %-24s %7.2f (%4.2f)%s %7.2f (%4.2f)%s %13.2fx%s %9.2f (%4.2f)%s %-10s %13.2fx %10.0f / "
        "%.0f\n",
        cell_text(r.load).c_str(), r.cyan_us, r.cyan_spread, mark(r.cyan_spread), r.epoll_us,
        r.epoll_spread, mark(r.epoll_spread), ratio, ratio > kWorseThanEpoll ? "<" : " ",
        r.best_peer_us, r.best_peer_spread, mark(r.best_peer_spread),
        r.best_peer == cyan::bench::kAsioEcho ? "(epoll)" : "(io_uring)",
        r.cyan_us / r.best_peer_us, r.cyan_rate, r.epoll_rate);
  }
}

}  // namespace

int main() {
  raise_descriptor_limit();
  std::vector<cell_result> results;
  bool ok = true;
  for (const echo_load& load : kCells) {
    ok = run_cell(load, results) && ok;
  }
  print_crossover(results);
  return cyan::bench::exit_status(ok);
}
