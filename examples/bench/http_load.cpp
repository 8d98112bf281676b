#include "bench/http_load.h"

#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

namespace cyan::bench {

namespace {

using namespace std::chrono_literals;

// wrk's "50%    1.23ms" style value in microseconds.
double wrk_us(const std::string& output, const std::string& label) {
  const std::regex line(label + R"(\s+([0-9.]+)(us|ms|s)\b)");
  std::smatch match;
  if (!std::regex_search(output, match, line)) {
    return 0;
  }
  const double value = std::stod(match[1]);
  return match[2] == "us" ? value : match[2] == "ms" ? value * 1e3 : value * 1e6;
}

}  // namespace

unsigned free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ::sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::socklen_t size = sizeof address;
  ::bind(fd, reinterpret_cast<::sockaddr*>(&address), sizeof address);
  ::getsockname(fd, reinterpret_cast<::sockaddr*>(&address), &size);
  ::close(fd);
  return ntohs(address.sin_port);
}

std::string fetch_body(unsigned port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const ::timeval limit{ 5, 0 };
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  ::sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (::connect(fd, reinterpret_cast<::sockaddr*>(&address), sizeof address) == 0) {
    const std::string request = "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    char buffer[65536];
    for (int reads = 0; reads < 100'000; ++reads) {
      const ::ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) {
        break;
      }
      response.append(buffer, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  const auto body = response.find("\r\n\r\n");
  return body == std::string::npos ? std::string() : response.substr(body + 4);
}

bool wait_listening(unsigned port) {
  for (int attempt = 0; attempt < 500; ++attempt) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ::sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool up = ::connect(fd, reinterpret_cast<::sockaddr*>(&address), sizeof address) == 0;
    ::close(fd);
    if (up) {
      return true;
    }
    std::this_thread::sleep_for(10ms);  // bounded poll for a process we do not control
  }
  return false;
}

double tree_cpu_seconds(pid_t pid) {
  double total = 0;
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    std::ifstream stat(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const auto close = text.rfind(')');
    if (close == std::string::npos) {
      continue;
    }
    std::istringstream fields(text.substr(close + 2));
    std::vector<std::string> f{ std::istream_iterator<std::string>(fields),
                                std::istream_iterator<std::string>() };
    if (f.size() < 13) {
      continue;
    }
    const pid_t self = static_cast<pid_t>(std::stol(name));
    const pid_t parent = static_cast<pid_t>(std::stol(f[1]));  // field 4
    if (self == pid || parent == pid) {
      total += (std::stod(f[11]) + std::stod(f[12])) / ticks;  // fields 14, 15: utime, stime
    }
  }
  return total;
}

double reaped_children_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_CHILDREN, &usage);
  const auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

double median(std::vector<double> values) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

wrk_result parse_wrk(const std::string& output) {
  wrk_result r;
  std::smatch match;
  if (std::regex_search(output, match, std::regex(R"(([0-9]+) requests in ([0-9.]+)(ms|s))"))) {
    r.requests = std::stod(match[1]);
    r.seconds = std::stod(match[2]) / (match[3] == "ms" ? 1e3 : 1.0);
  }
  if (std::regex_search(output, match, std::regex(R"(Non-2xx or 3xx responses: ([0-9]+))"))) {
    r.errors += std::stod(match[1]);
  }
  if (std::regex_search(
          output, match,
          std::regex(
              R"(Socket errors: connect ([0-9]+), read ([0-9]+), write ([0-9]+), timeout ([0-9]+))"))) {
    r.errors +=
        std::stod(match[1]) + std::stod(match[2]) + std::stod(match[3]) + std::stod(match[4]);
  }
  r.p50_us = wrk_us(output, "50%");
  r.p99_us = wrk_us(output, "99%");
  return r;
}

std::filesystem::path nginx_directory() {
  char pattern[] = "/tmp/cyan-nginx-XXXXXX";
  const std::filesystem::path dir = ::mkdtemp(pattern);
  std::filesystem::permissions(
      dir, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
               std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
               std::filesystem::perms::others_exec);
  return dir;
}

std::unique_ptr<child_process> start_nginx(const std::filesystem::path& dir,
                                           const std::string& body, unsigned port,
                                           const nginx_tls* tls) {
  std::filesystem::create_directories(dir / "www");
  std::ofstream(dir / "www" / "index.html") << body;
  std::ostringstream listen;
  listen << "    listen 127.0.0.1:" << port << (tls != nullptr ? " ssl" : "") << " reuseport;\n";
  if (tls != nullptr) {
    listen << "    ssl_certificate " << tls->certificate_file << ";\n"
           << "    ssl_certificate_key " << tls->key_file << ";\n"
           << "    ssl_protocols TLSv1.2 TLSv1.3;\n"
           << "    ssl_session_tickets " << (tls->session_tickets ? "on" : "off") << ";\n"
           << "    ssl_session_cache " << (tls->session_tickets ? "shared:cyan:10m" : "off")
           << ";\n";
  }
  std::ofstream(dir / "nginx.conf")
      << "worker_processes 2;\ndaemon off;\npid " << (dir / "nginx.pid").string() << ";\nerror_log "
      << (dir / "error.log").string()
      << ";\nevents { worker_connections 4096; }\nhttp {\n  access_log off;\n"
      << "  keepalive_requests 100000000;\n  client_body_temp_path " << dir.string()
      << ";\n  proxy_temp_path " << dir.string() << ";\n  fastcgi_temp_path " << dir.string()
      << ";\n  uwsgi_temp_path " << dir.string() << ";\n  scgi_temp_path " << dir.string()
      << ";\n  server {\n"
      << listen.str() << "    location / { root " << (dir / "www").string()
      << "; index index.html; }\n  }\n}\n";
  return std::make_unique<child_process>(
      std::vector<std::string>{ kNginx, "-p", dir.string(), "-c", (dir / "nginx.conf").string() },
      -1);
}

}  // namespace cyan::bench
