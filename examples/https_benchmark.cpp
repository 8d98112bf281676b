// cyan's http_server over TLS against Debian's nginx-light over TLS: both with 2 threads
// (workers), the same certificate and the same body (nginx's file is http_server's page),
// TLS 1.2 and 1.3, driven by Debian's wrk -t1 -c100 over https. Two certificates (ECDSA P-256
// and RSA-2048, made at start by scripts/tls_certificates.sh with the openssl command) and two
// workloads each:
//   keep-alive      session tickets on, 100 connections kept: requests per second, which is
//                   the record layer's cost (AES-GCM, the memory BIO's copies);
//   new connection  "Connection: close" on every request: handshakes per second, with session
//                   tickets off on both servers (every request a full handshake), and on (wrk
//                   keeps its session across reconnects, SSL_clear, and resumes it).
// The servers start once per workload; the arms alternate per repetition (the harness), timed as
// wall seconds per 100k requests (keep-alive) or per 10k handshakes. Each arm's server CPU per
// request (/proc, nginx's workers included), latency p50 / p99, errors, and wrk's own CPU per
// request and cores are printed after the table. Skipped, saying so, when nginx, wrk or openssl
// is missing (scripts/install-deps.sh installs them).
//
//   CYAN_BENCH_REPS           repetitions per arm (default 11)
//   CYAN_BENCH_HTTPS_SECONDS  wrk's duration per sample (default 5)
//   CYAN_BENCH_HTTPS_ONLY     run only the workloads whose name contains this text (e.g. "RSA")
//   CYAN_BENCH_HTTPS_PIN      1: the servers' threads on the last CPU, wrk on the others, so
//                             that the load generator and the server do not share a core

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
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
using cyan::bench::median;

constexpr const char* kCyan = "cyan http_server";
constexpr const char* kNginxArm = "nginx";
constexpr const char* kOpenssl = "/usr/bin/openssl";
constexpr const char* kCurl = "/usr/bin/curl";

// One workload: its name, whether every request is a new connection, whether the servers issue
// session tickets, and the sample's unit.
struct workload {
  const char* name;
  bool new_connections;
  bool session_tickets;
  double requests_per_unit;  // the table prints seconds per this many requests
};

constexpr const char* kTaskset = "/usr/bin/taskset";

// CYAN_BENCH_HTTPS_PIN: the servers' CPU (the last one) and wrk's (the others), as taskset lists;
// empty when not pinning.
struct pinning {
  std::string servers;
  std::string load;
};
pinning pinning_from_environment() {
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (cyan::bench::env_or("CYAN_BENCH_HTTPS_PIN", 0) == 0 || cpus < 2 ||
      ::access(kTaskset, X_OK) != 0) {
    return {};
  }
  return { std::to_string(cpus - 1), "0-" + std::to_string(cpus - 2) };
}

// Moves every thread of `pid` and of its child processes (nginx's workers) to `cpus`.
void pin_process_tree(pid_t pid, const std::string& cpus) {
  const std::string command = std::string(kTaskset) + " -a -p -c " + cpus + " " +
                              std::to_string(pid) + " >/dev/null && for c in $(cat /proc/" +
                              std::to_string(pid) + "/task/*/children); do " + kTaskset +
                              " -a -p -c " + cpus + " $c >/dev/null; done";
  if (std::system(command.c_str()) != 0) {
    std::fprintf(stderr, "https_benchmark: pinning %d failed\n", static_cast<int>(pid));
  }
}

// One wrk sample against `server`: seconds per `unit` requests.
cyan::bench::sample run_wrk(const target& server, const workload& w, int seconds,
                            const pinning& pin, figures& out) {
  const double cpu_before = cyan::bench::tree_cpu_seconds(server.pid);
  std::vector<std::string> argv{ cyan::bench::kWrk, "-t1", "-c100",
                                 "-d" + std::to_string(seconds) + "s", "--latency" };
  if (!pin.load.empty()) {
    argv.insert(argv.begin(), { kTaskset, "-c", pin.load });
  }
  if (w.new_connections) {
    argv.insert(argv.end(), { "-H", "Connection: close" });
  }
  argv.push_back("https://127.0.0.1:" + std::to_string(server.port) + "/");
  const double load_cpu_before = cyan::bench::reaped_children_cpu_seconds();
  child_process load(argv, -1);
  const std::string output = load.read_all(std::chrono::seconds(seconds + 30));
  const int status = load.wait(10s);
  const double cpu = cyan::bench::tree_cpu_seconds(server.pid) - cpu_before;
  const double load_cpu = cyan::bench::reaped_children_cpu_seconds() - load_cpu_before;
  const cyan::bench::wrk_result wrk = cyan::bench::parse_wrk(output);
  out.errors += wrk.errors;
  if (status != 0 || wrk.requests <= 0) {
    std::fprintf(stderr, "wrk against %s failed (status %d):\n%s\n", server.arm.c_str(), status,
                 output.c_str());
    out.errors += 1;
    return { static_cast<double>(seconds), 0 };
  }
  out.p50_us.push_back(wrk.p50_us);
  out.p99_us.push_back(wrk.p99_us);
  out.cpu_per_request_us.push_back(cpu * 1e6 / wrk.requests);
  out.load_cores.push_back(load_cpu / wrk.seconds);
  out.load_cpu_per_request_us.push_back(load_cpu * 1e6 / wrk.requests);
  return { wrk.seconds / wrk.requests * w.requests_per_unit, 0 };
}

// The body of https://127.0.0.1:port/ (curl, no verification: the benchmark's own servers).
std::string fetch_https(unsigned port) {
  std::string body;
  const std::string command =
      std::string(kCurl) + " -sk --max-time 5 https://127.0.0.1:" + std::to_string(port) + "/";
  if (std::FILE* f = ::popen(command.c_str(), "r"); f != nullptr) {
    char chunk[4096];
    for (std::size_t n; (n = std::fread(chunk, 1, sizeof chunk, f)) > 0;) {
      body.append(chunk, n);
    }
    ::pclose(f);
  }
  return body;
}

// http_server --threads 2 over TLS with this certificate, and its port (0: it did not start).
std::pair<std::unique_ptr<child_process>, unsigned> start_https_server(
    const cyan::bench::nginx_tls& tls) {
  auto server = std::make_unique<child_process>(
      std::vector<std::string>{ cyan::bench::executable_directory() + "/http_server", "--port", "0",
                                "--threads", "2", "--tls-cert", tls.certificate_file, "--tls-key",
                                tls.key_file, "--tls-session-tickets",
                                tls.session_tickets ? "1" : "0" },
      -1);
  const unsigned port = cyan::bench::port_of_listening_line(server->read_line(10s));
  return { std::move(server), port };
}

// One workload with one certificate: both servers started for it, the suite, the figures.
bool run_workload(const std::filesystem::path& certificates, const char* key_name,
                  const char* key_file_stem, const workload& w, int seconds, const pinning& pin) {
  const cyan::bench::nginx_tls tls{ (certificates / (std::string(key_file_stem) + ".crt")).string(),
                                    (certificates / (std::string(key_file_stem) + ".key")).string(),
                                    w.session_tickets };
  auto [cyan_server, cyan_port] = start_https_server(tls);
  const std::string body = cyan_port != 0 ? fetch_https(cyan_port) : std::string();
  if (body.empty()) {
    std::fprintf(stderr, "http_server did not start or serve its page over TLS\n");
    return false;
  }
  const std::filesystem::path dir = cyan::bench::nginx_directory();
  const unsigned nginx_port = cyan::bench::free_port();
  auto nginx = cyan::bench::start_nginx(dir, body, nginx_port, &tls);
  const bool nginx_up = cyan::bench::wait_listening(nginx_port) && fetch_https(nginx_port) == body;
  bool ok = nginx_up;
  if (!nginx_up) {
    std::fprintf(stderr, "nginx did not start or serve the same body over TLS (see %s/error.log)\n",
                 dir.c_str());
  } else {
    const std::string unit = w.new_connections ? "10k handshakes" : "100k requests";
    cyan::bench::suite suite("https_benchmark",
                             std::string(key_name) + ", " + w.name + ": time per " + unit +
                                 ", wrk -t1 -c100 " + std::to_string(seconds) + " s" +
                                 (pin.servers.empty() ? "" : "; servers on their own CPU"));
    const std::vector<target> servers{ { kCyan, cyan_server->pid(), cyan_port },
                                       { kNginxArm, nginx->pid(), nginx_port } };
    if (!pin.servers.empty()) {
      for (const target& server : servers) {
        pin_process_tree(server.pid, pin.servers);
      }
    }
    std::map<std::string, figures> seen;
    for (const target& server : servers) {
      suite.add_unchecked(
          server.arm, [&, server] { return run_wrk(server, w, seconds, pin, seen[server.arm]); });
    }
    ok = suite.run();
    for (const target& server : servers) {
      const figures& f = seen[server.arm];
      std::printf(
          "  %-18s %7.2f us server CPU/request  latency p50 %.0f us, p99 %.0f us  errors %.0f  "
          "wrk %.2f us CPU/request, %.2f cores\n",
          server.arm.c_str(), median(f.cpu_per_request_us), median(f.p50_us), median(f.p99_us),
          f.errors, median(f.load_cpu_per_request_us), median(f.load_cores));
      ok = ok && f.errors == 0;
    }
    suite.goal(kCyan, kNginxArm, 1.0);
    const double cyan_cpu = median(seen[kCyan].cpu_per_request_us);
    const double nginx_cpu = median(seen[kNginxArm].cpu_per_request_us);
    const bool cpu_met = cyan_cpu > 0 && cyan_cpu <= nginx_cpu;
    std::printf("  server CPU per request: cyan / nginx = %.2fx (goal <= 1.0x: %s)\n",
                nginx_cpu > 0 ? cyan_cpu / nginx_cpu : 0.0, cpu_met ? "met" : "missed");
  }
  ok = cyan_server->stop() == 0 && ok;
  (void)nginx->stop();
  std::filesystem::remove_all(dir);
  return ok;
}

}  // namespace

int main() {
  for (const char* tool : { cyan::bench::kNginx, cyan::bench::kWrk, kOpenssl, kCurl }) {
    if (::access(tool, X_OK) != 0) {
      std::printf("https_benchmark skipped: %s is missing (scripts/install-deps.sh installs it)\n",
                  tool);
      return 0;
    }
  }
  const int seconds = static_cast<int>(cyan::bench::env_or("CYAN_BENCH_HTTPS_SECONDS", 5));
  const pinning pin = pinning_from_environment();
  const char* only = std::getenv("CYAN_BENCH_HTTPS_ONLY");
  // The certificates, readable by nginx's workers.
  const std::filesystem::path certificates = cyan::bench::nginx_directory();
  const std::string make = std::string("sh '") + CYAN_TLS_CERTIFICATE_SCRIPT + "' '" +
                           certificates.string() + "' >/dev/null";
  if (std::system(make.c_str()) != 0) {
    std::fprintf(stderr, "https_benchmark: %s failed\n", make.c_str());
    return 1;
  }
  std::printf(
      "https_benchmark: http_server --threads 2 and nginx with 2 workers over TLS, "
      "wrk -t1 -c100\n");
  bool ok = true;
  const workload workloads[] = {
    { "keep-alive", false, true, 1e5 },
    { "new connection per request, tickets off (full handshakes)", true, false, 1e4 },
    { "new connection per request, tickets on (wrk resumes)", true, true, 1e4 },
  };
  for (const auto& [key_name, stem] :
       { std::pair{ "ECDSA P-256", "server" }, std::pair{ "RSA-2048", "rsa" } }) {
    for (const workload& w : workloads) {
      if (only != nullptr &&
          (std::string(key_name) + ", " + w.name).find(only) == std::string::npos) {
        continue;
      }
      ok = run_workload(certificates, key_name, stem, w, seconds, pin) && ok;
    }
  }
  std::filesystem::remove_all(certificates);
  return cyan::bench::exit_status(ok);
}
