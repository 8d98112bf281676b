// cyan's http_server against Debian's nginx-light, both with 2 threads (workers) serving the
// same body (nginx's file is http_server's page, fetched from it) with keep-alive and no access
// log, driven by Debian's wrk (-t1 -c100, CYAN_BENCH_HTTP_SECONDS per sample, default 10) and
// by load_tester --mode http (100 connections, 3 s). http_server runs twice: "cyan http_server"
// on its default network backend (CYAN_NET_BACKEND=auto in its environment: io_uring where a
// ring can be set up) and "cyan http_server (epoll)" with CYAN_NET_BACKEND=epoll. The servers
// start once and stay up; the arms alternate per repetition (the harness), timed as wall seconds
// per 100k requests (1e5 / requests per second); each arm's server CPU per request (/proc, nginx's
// workers included), latency p50 / p99, errors, and the load generator's CPU per request and
// cores used (its CPU time over its run: wrk's one thread near 1.00 is the load's own limit)
// are printed after the table. Skipped, saying so,
// when nginx or wrk is missing (scripts/install-deps.sh installs both).
//
//   CYAN_BENCH_REPS          repetitions per arm (default 11)
//   CYAN_BENCH_HTTP_SECONDS  wrk's duration per sample (default 10)

#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench/harness.h"
#include "bench/http_load.h"
#include "bench/process.h"

namespace {

using namespace std::chrono_literals;
using cyan::bench::child_process;
using figures = cyan::bench::load_figures;
using target = cyan::bench::load_target;
using cyan::bench::fetch_body;
using cyan::bench::free_port;
using cyan::bench::median;
using cyan::bench::reaped_children_cpu_seconds;
using cyan::bench::tree_cpu_seconds;
using cyan::bench::wait_listening;

constexpr const char* kCyan = "cyan http_server";
constexpr const char* kCyanEpoll = "cyan http_server (epoll)";
using cyan::bench::kNginx;
using cyan::bench::kWrk;

// Requests per sample unit: the table prints seconds per 100k requests (about 1 s here), where
// seconds per request would print as 0.0000.
constexpr double kRequestsPerUnit = 1e5;

// One sample of `driver` ("wrk" or "load_tester") against `server`: seconds per 100k requests.
cyan::bench::sample run_driver(const std::string& driver, const target& server, int seconds,
                               figures& out) {
  const double cpu_before = tree_cpu_seconds(server.pid);
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port) + "/";
  std::vector<std::string> argv =
      driver == "wrk"
          ? std::vector<std::string>{ kWrk,        "-t1",
                                      "-c100",     "-d" + std::to_string(seconds) + "s",
                                      "--latency", url }
          : std::vector<std::string>{ cyan::bench::executable_directory() + "/load_tester",
                                      "--mode",
                                      "http",
                                      "--port",
                                      std::to_string(server.port),
                                      "--connections",
                                      "100",
                                      "--duration",
                                      std::to_string(seconds) };
  const double load_cpu_before = reaped_children_cpu_seconds();
  child_process load(argv, -1);
  const std::string output = load.read_all(std::chrono::seconds(seconds + 30));
  const int status = load.wait(10s);
  const double cpu = tree_cpu_seconds(server.pid) - cpu_before;
  const double load_cpu = reaped_children_cpu_seconds() - load_cpu_before;
  double requests = 0;
  double elapsed = seconds;
  if (driver == "wrk") {
    const cyan::bench::wrk_result wrk = cyan::bench::parse_wrk(output);
    requests = wrk.requests;
    elapsed = wrk.requests > 0 ? wrk.seconds : elapsed;
    out.errors += wrk.errors;
    out.p50_us.push_back(wrk.p50_us);
    out.p99_us.push_back(wrk.p99_us);
  } else {
    const auto values = cyan::bench::parse_result_line(output);
    if (!values.empty()) {
      requests = values.at("requests");
      elapsed = values.at("seconds");
      out.errors += values.at("errors");
      out.p50_us.push_back(values.at("p50_us"));
      out.p99_us.push_back(values.at("p99_us"));
    }
  }
  if (status != 0 || requests <= 0) {
    std::fprintf(stderr, "%s against %s failed (status %d):\n%s\n", driver.c_str(),
                 server.arm.c_str(), status, output.c_str());
    out.errors += 1;
    return { elapsed, 0 };
  }
  out.cpu_per_request_us.push_back(cpu * 1e6 / requests);
  out.load_cores.push_back(load_cpu / elapsed);
  out.load_cpu_per_request_us.push_back(load_cpu * 1e6 / requests);
  return { elapsed / requests * kRequestsPerUnit, 0 };
}

// http_server --threads 2 with `backend` as CYAN_NET_BACKEND, and its port (0: it did not
// start).
std::pair<std::unique_ptr<child_process>, unsigned> start_http_server(const std::string& backend) {
  auto server = std::make_unique<child_process>(
      std::vector<std::string>{ cyan::bench::executable_directory() + "/http_server", "--port", "0",
                                "--threads", "2" },
      -1, false, false, std::vector<std::string>{ "CYAN_NET_BACKEND=" + backend });
  const unsigned port = cyan::bench::port_of_listening_line(server->read_line(10s));
  return { std::move(server), port };
}

}  // namespace

int main() {
  if (::access(kNginx, X_OK) != 0 || ::access(kWrk, X_OK) != 0) {
    std::printf(
        "http_benchmark skipped: %s or %s is missing (scripts/install-deps.sh installs nginx-light "
        "and wrk)\n",
        kNginx, kWrk);
    return 0;
  }
  const int seconds = static_cast<int>(cyan::bench::env_or("CYAN_BENCH_HTTP_SECONDS", 10));
  auto [cyan_server, cyan_port] = start_http_server("auto");
  auto [epoll_server, epoll_port] = start_http_server("epoll");
  const std::string body = cyan_port != 0 ? fetch_body(cyan_port) : std::string();
  if (body.empty() || epoll_port == 0 || fetch_body(epoll_port) != body) {
    std::fprintf(stderr, "http_server did not start or serve its page on both backends\n");
    return 1;
  }
  const std::filesystem::path dir = cyan::bench::nginx_directory();
  const unsigned nginx_port = free_port();
  auto nginx = cyan::bench::start_nginx(dir, body, nginx_port);
  const bool nginx_up = wait_listening(nginx_port) && fetch_body(nginx_port) == body;
  bool ok = nginx_up;
  if (!nginx_up) {
    std::fprintf(stderr, "nginx did not start or serve the same body (see %s/error.log)\n",
                 dir.c_str());
  }
  std::printf("http_benchmark: a %zu-byte page, http_server --threads 2 and nginx with 2 workers\n",
              body.size());
  const std::vector<target> servers{ { kCyan, cyan_server->pid(), cyan_port },
                                     { kCyanEpoll, epoll_server->pid(), epoll_port },
                                     { "nginx", nginx->pid(), nginx_port } };
  for (const std::string driver : { "wrk", "load_tester" }) {
    if (!nginx_up) {
      break;
    }
    const int duration = driver == "wrk" ? seconds : 3;
    cyan::bench::suite suite("http_benchmark", "time per 100k requests, " + driver + " -c100 " +
                                                   std::to_string(duration) + " s");
    std::map<std::string, figures> seen;
    for (const target& server : servers) {
      suite.add_unchecked(server.arm, [&, server] {
        return run_driver(driver, server, duration, seen[server.arm]);
      });
    }
    ok = suite.run() && ok;
    for (const target& server : servers) {
      const figures& f = seen[server.arm];
      std::printf(
          "  %-26s %6.2f us server CPU/request  latency p50 %.0f us, p99 %.0f us  errors %.0f  "
          "%s %.2f us CPU/request, %.2f cores\n",
          server.arm.c_str(), median(f.cpu_per_request_us), median(f.p50_us), median(f.p99_us),
          f.errors, driver.c_str(), median(f.load_cpu_per_request_us), median(f.load_cores));
      ok = ok && f.errors == 0;
    }
    suite.goal(kCyan, kCyanEpoll, 1.10);
    suite.goal(kCyan, "nginx", 1.5);
    const double cyan_cpu = median(seen[kCyan].cpu_per_request_us);
    const double nginx_cpu = median(seen["nginx"].cpu_per_request_us);
    std::printf("  server CPU per request: nginx / cyan = %.2fx (moonshot 1.3x)\n",
                cyan_cpu > 0 ? nginx_cpu / cyan_cpu : 0.0);
  }
  ok = cyan_server->stop() == 0 && ok;
  ok = epoll_server->stop() == 0 && ok;
  (void)nginx->stop();
  std::filesystem::remove_all(dir);
  return cyan::bench::exit_status(ok);
}
