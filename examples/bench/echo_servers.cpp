#include "bench/echo_servers.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>

namespace cyan::bench {
namespace {

using namespace std::chrono_literals;

// Starts `program` with --port 0 --threads `threads`, `environment` added to its environment,
// and reads its port.
echo_server start_server(const std::string& arm, const std::string& program, unsigned threads,
                         int cpu, const std::vector<std::string>& environment = {}) {
  const std::string path = executable_directory() + "/" + program;
  echo_server started{ arm, std::make_unique<child_process>(
                                std::vector<std::string>{ path, "--port", "0", "--threads",
                                                          std::to_string(threads) },
                                cpu, false, false, environment) };
  started.port = port_of_listening_line(started.process->read_line(10s));
  if (started.port == 0) {
    throw std::runtime_error(program + " did not print its listening line");
  }
  return started;
}

// The server's CPU seconds once it has stopped using CPU (its last connections closed), or
// after `limit`. Idle: less than 20 us of CPU over 5 ms — a server that is done only wakes for
// its own timers.
double cpu_seconds_when_idle(const child_process& server, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  double seconds = server.cpu_seconds();
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
    const double now = server.cpu_seconds();
    if (now - seconds < 20e-6) {
      return now;
    }
    seconds = now;
  }
  return seconds;
}

}  // namespace

std::vector<echo_server> start_echo_servers(unsigned threads, int cpu) {
  std::vector<echo_server> servers;
  servers.push_back(
      start_server(kCyanEcho, "echo_server", threads, cpu, { "CYAN_NET_BACKEND=auto" }));
  servers.push_back(
      start_server(kCyanEchoEpoll, "echo_server", threads, cpu, { "CYAN_NET_BACKEND=epoll" }));
  servers.push_back(start_server(kAsioEcho, "asio_echo_server", threads, cpu));
  servers.push_back(start_server(kAsioUringEcho, "asio_uring_echo_server", threads, cpu));
  servers.push_back(start_server(kEpollFloorEcho, "epoll_echo_server", threads, cpu));
  servers.push_back(start_server(kUringFloorEcho, "uring_echo_server", threads, cpu));
  return servers;
}

load_result run_echo_load(echo_server& target, const echo_load& load, int cpu) {
  const std::string path = executable_directory() + "/load_tester";
  const double cpu_before = target.process->cpu_seconds();
  child_process tester({ path, "--mode", "echo", "--port", std::to_string(target.port),
                         "--connections", std::to_string(load.connections), "--requests",
                         std::to_string(load.requests), "--size", std::to_string(load.size) },
                       cpu);
  const std::string output = tester.read_all(120s);
  const int status = tester.wait(10s);
  const double cpu_after = cpu_seconds_when_idle(*target.process, 1s);
  const auto values = parse_result_line(output);
  if (status != 0 || values.empty() || values.at("errors") != 0) {
    std::fprintf(stderr, "load_tester against %s failed (status %d):\n%s\n", target.arm.c_str(),
                 status, output.c_str());
    return {};
  }
  return { cpu_after - cpu_before, values.at("seconds"),
           static_cast<std::uint64_t>(values.at("requests")), values.at("p50_us"),
           values.at("p99_us") };
}

void add_echo_arms(suite& cpu, std::vector<echo_server>& servers, const echo_load& load,
                   int load_cpu, std::map<std::string, echo_figures>& figures) {
  for (echo_server& target : servers) {
    cpu.add(target.arm, [&figures, load, load_cpu, target = &target] {
      const load_result result = run_echo_load(*target, load, load_cpu);
      echo_figures& arm = figures[target->arm];
      arm.rate.push_back(result.wall > 0 ? static_cast<double>(result.messages) / result.wall : 0);
      arm.p50_us.push_back(result.p50_us);
      arm.p99_us.push_back(result.p99_us);
      arm.cpu_per_message_us.push_back(
          result.messages > 0 ? result.server_cpu * 1e6 / static_cast<double>(result.messages) : 0);
      return sample{ result.server_cpu, result.messages };
    });
  }
}

bool stop_echo_servers(std::vector<echo_server>& servers) {
  bool ok = true;
  for (echo_server& target : servers) {
    if (target.process->stop() != 0) {
      std::fprintf(stderr, "%s did not exit 0 on SIGTERM\n", target.arm.c_str());
      ok = false;
    }
  }
  return ok;
}

double median_or_zero(std::vector<double> values) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace cyan::bench
