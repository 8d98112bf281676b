// Echo servers side by side: cyan's echo_server, an idiomatic Boost.Asio C++20-coroutine server
// (peers/asio_echo_server.cpp) and a raw edge-triggered epoll server, the floor
// (peers/epoll_echo_server.cpp), each driven by load_tester: 100 connections, each sending a
// message and reading it back, CYAN_BENCH_ECHO_REQUESTS times (default 2000).
//
// The three servers start once and stay up; the arms alternate per repetition (the harness).
// With one server thread, the servers run on CPU 0 and the load on CPU 1: the server's core
// saturates, so each workload is reported twice — server CPU time per message (from
// /proc/<pid>/stat, the figure the goals are about) and wall time per message (1 / messages
// per second) — with each arm's median latency p50 / p99 from load_tester. The 2-thread
// variants run unpinned (the load shares the two cores with the server).
//
//   CYAN_BENCH_REPS          repetitions per arm (default 11)
//   CYAN_BENCH_ECHO_REQUESTS round trips per connection per sample (default 2000)

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

struct server {
  std::string arm;
  std::unique_ptr<child_process> process;
  unsigned port = 0;
};

// Starts `program` with --port 0 --threads `threads` and reads its port.
server start_server(const std::string& arm, const std::string& program, unsigned threads, int cpu) {
  const std::string path = cyan::bench::executable_directory() + "/" + program;
  server started{
    arm,
    std::make_unique<child_process>(
        std::vector<std::string>{ path, "--port", "0", "--threads", std::to_string(threads) }, cpu)
  };
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

// One (size, threads) workload: a suite of server CPU per message; the same load runs give
// each arm's messages per second and latency, printed after the table with their spread.
bool run_workload(std::size_t size, unsigned threads, bool pinned, std::uint64_t requests) {
  const int server_cpu = pinned ? 0 : -1;
  const int load_cpu = pinned ? 1 : -1;
  std::vector<server> servers;
  servers.push_back(start_server("cyan echo_server", "echo_server", threads, server_cpu));
  servers.push_back(start_server("Boost.Asio coroutines", "asio_echo_server", threads, server_cpu));
  servers.push_back(start_server("raw epoll (floor)", "epoll_echo_server", threads, server_cpu));

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
  const double cyan_rate = median(latencies["cyan echo_server"].rate);
  for (const server& target : servers) {
    const latency& l = latencies[target.arm];
    const auto [low, high] = std::minmax_element(l.rate.begin(), l.rate.end());
    const double rate = median(l.rate);
    std::printf(
        "  %-24s %5.2f us CPU/message  %8.0f messages/s (spread %.2f, cyan %.2fx)  latency p50 "
        "%.0f us, p99 %.0f us\n",
        target.arm.c_str(), median(l.cpu_per_message_us), rate, *low > 0 ? *high / *low : 0.0,
        rate > 0 ? cyan_rate / rate : 0.0, median(l.p50_us), median(l.p99_us));
  }
  cpu.goal_at_most("cyan echo_server", "Boost.Asio coroutines", 1.0);
  cpu.goal_at_most("cyan echo_server", "raw epoll (floor)", 1.10);
  const double asio_rate = median(latencies["Boost.Asio coroutines"].rate);
  std::printf("goal: cyan echo_server messages/s >= Boost.Asio's: %s (%.2fx)\n",
              cyan_rate >= asio_rate ? "met" : "MISSED",
              asio_rate > 0 ? cyan_rate / asio_rate : 0.0);
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
  const std::uint64_t requests = cyan::bench::env_or("CYAN_BENCH_ECHO_REQUESTS", 2000);
  bool ok = true;
  for (const std::size_t size : { std::size_t{ 64 }, std::size_t{ 4096 } }) {
    ok = run_workload(size, 1, true, requests) && ok;
  }
  ok = run_workload(64, 2, false, requests) && ok;
  return cyan::bench::exit_status(ok);
}
