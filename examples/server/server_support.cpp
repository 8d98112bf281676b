#include "server/server_support.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <system_error>

#include "cyan/event.h"

namespace cyan::examples {

// ---- command_line ----

command_line::command_line(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

command_line& command_line::option(const std::string& name, const std::string& fallback,
                                   const std::string& help) {
  const bool numeric =
      !fallback.empty() && fallback.find_first_not_of("0123456789") == std::string::npos;
  entries_[name] = { fallback, fallback, help, false, numeric };
  order_.push_back(name);
  return *this;
}

command_line& command_line::flag(const std::string& name, const std::string& help) {
  entries_[name] = { "", "", help, true, false };
  order_.push_back(name);
  return *this;
}

command_line& command_line::server_options() {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return option("port", "0", "TCP port to listen on (0: a free port, printed)")
      .option("host", "127.0.0.1", "address to listen on (or unix:/path)")
      .option("threads", std::to_string(cores), "handler threads, one listener each")
      .option("grace-ms", "2000", "on SIGINT/SIGTERM, time for requests in flight to finish");
}

void command_line::usage(int status) const {
  std::FILE* out = status == 0 ? stdout : stderr;
  std::fprintf(out, "%s — %s\n\nusage: %s [options]\n", program_.c_str(), summary_.c_str(),
               program_.c_str());
  for (const std::string& name : order_) {
    const entry& e = entries_.at(name);
    std::fprintf(out, "  --%-20s %s%s%s%s\n", (name + (e.is_flag ? "" : " N")).c_str(),
                 e.help.c_str(), e.is_flag ? "" : " (default ", e.is_flag ? "" : e.fallback.c_str(),
                 e.is_flag ? "" : ")");
  }
  std::fprintf(out, "  --%-20s %s\n", "help", "this text");
  std::exit(status);
}

void command_line::parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      usage(0);
    }
    const auto found = arg.rfind("--", 0) == 0 ? entries_.find(arg.substr(2)) : entries_.end();
    if (found == entries_.end()) {
      std::fprintf(stderr, "%s: unknown argument %s\n", program_.c_str(), arg.c_str());
      usage(2);
    }
    entry& e = found->second;
    if (e.is_flag) {
      e.value.assign(1, '1');  // not = "1": GCC 12 -O3 warns falsely (-Wrestrict, PR 105329)
      continue;
    }
    if (i + 1 == argc) {
      std::fprintf(stderr, "%s: %s needs a value\n", program_.c_str(), arg.c_str());
      usage(2);
    }
    e.value = argv[++i];
    if (e.numeric &&
        (e.value.empty() || e.value.find_first_not_of("0123456789") != std::string::npos ||
         e.value.size() > 12)) {
      std::fprintf(stderr, "%s: %s needs a non-negative number of at most 12 digits, not \"%s\"\n",
                   program_.c_str(), arg.c_str(), e.value.c_str());
      usage(2);
    }
  }
}

const std::string& command_line::text(const std::string& name) const {
  return entries_.at(name).value;
}

long long command_line::number(const std::string& name) const {
  return std::stoll(text(name));
}

bool command_line::is_set(const std::string& name) const {
  return !text(name).empty();
}

net::endpoint command_line::listen_endpoint() const {
  const std::string& host = text("host");
  if (host.rfind("unix:", 0) == 0) {
    return net::endpoint::parse(host);
  }
  const long long port = number("port");
  if (port > 65535) {
    throw std::invalid_argument("--port " + std::to_string(port) + " is above 65535");
  }
  const bool v6 = host.find(':') != std::string::npos;
  return net::endpoint::parse((v6 ? "[" + host + "]" : host) + ":" + std::to_string(port));
}

bool is_disconnect(const std::system_error& e) noexcept {
  return e.code() == std::errc::operation_canceled || e.code() == std::errc::connection_reset ||
         e.code() == std::errc::broken_pipe;
}

error_report::~error_report() {
  if (left_out_ > 0) {
    std::fprintf(stderr, "%s: %llu more left out since the last report\n", what_.c_str(),
                 left_out_);
  }
}

void error_report::operator()(const std::exception& e) {
  const std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  if (now < quiet_until_) {
    ++left_out_;
    return;
  }
  if (left_out_ == 0) {
    std::fprintf(stderr, "%s: %s\n", what_.c_str(), e.what());
  } else {
    std::fprintf(stderr, "%s: %s (and %llu more left out since the last report)\n", what_.c_str(),
                 e.what(), left_out_);
  }
  left_out_ = 0;
  quiet_until_ = now + std::chrono::seconds(1);
}

// ---- shutdown ----

void block_shutdown_signals() {
  event::block_signals({ SIGINT, SIGTERM });
}

int serve_until_signalled(net::tcp_server& server, std::chrono::milliseconds grace) {
  const std::shared_ptr<event::loop> loop = event::get_main_loop();
  event::signal_set signals{ loop, { SIGINT, SIGTERM } };
  signals.set_callback([&loop](int /*signal_number*/) { loop->stop(); });
  signals.start();
  std::printf("listening on %s\n", server.local_endpoint().to_string().c_str());
  std::fflush(stdout);
  loop->run();  // until SIGINT or SIGTERM
  (void)server.stop(grace);
  return 0;
}

}  // namespace cyan::examples
