#include "server/server_support.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <stdexcept>
#include <system_error>
#include <thread>

#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

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

// ---- server_runtime ----

// SIGINT and SIGTERM end the main loop, and so does stop() through an async.
//
// The two signals are blocked in the main thread before the handler threads exist (they
// inherit the mask) and read from a signalfd on the main loop: they stay queued in the kernel
// until the loop reads them, whichever thread they were aimed at. An asynchronous handler
// would be run by whichever thread the kernel picks, at whatever point it was; under
// ThreadSanitizer, which defers such handlers to the thread's next intercepted call, a
// SIGTERM that came just after "listening on" could be lost (docs/bench/notes.md, "Figures
// behind the examples' comments"). The libev signal
// watchers stay as well, for threads that existed before the runtime (their mask lets the
// signals in, so the handler runs there and wakes the main loop).
struct server_runtime::signals {
  signals()
      : loop(event::get_main_loop()), interrupt(loop), terminate(loop), wake(loop), queued(loop) {
    const auto shutdown = [this] { loop->stop(); };
    interrupt.set_number(SIGINT);
    interrupt.set_callback(shutdown);
    terminate.set_number(SIGTERM);
    terminate.set_callback(shutdown);
    wake.set_callback(shutdown);
    interrupt.start();  // libev unblocks the signal in this thread: block it after this
    terminate.start();
    wake.start();
    ::sigemptyset(&blocked);
    ::sigaddset(&blocked, SIGINT);
    ::sigaddset(&blocked, SIGTERM);
    if (const int error = ::pthread_sigmask(SIG_BLOCK, &blocked, &previous); error != 0) {
      throw std::system_error(error, std::generic_category(), "pthread_sigmask(SIGINT, SIGTERM)");
    }
    descriptor = ::signalfd(-1, &blocked, SFD_NONBLOCK | SFD_CLOEXEC);
    if (descriptor < 0) {
      const int error = errno;
      ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
      throw std::system_error(error, std::generic_category(), "signalfd(SIGINT, SIGTERM)");
    }
    queued.set_file_descriptor(descriptor);
    queued.set_events(event::io::read);
    queued.set_callback([this](event::io::events) {
      if (take_one()) {
        loop->stop();
      }
    });
    queued.start();
  }
  signals(const signals&) = delete;
  signals& operator=(const signals&) = delete;
  ~signals() {
    queued.stop();
    while (take_one()) {
      // a second SIGINT / SIGTERM during the shutdown: it is already under way
    }
    ::close(descriptor);
    ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  }

  // Reads one queued signal; false when none is queued.
  bool take_one() const noexcept {
    ::signalfd_siginfo info{};
    return ::read(descriptor, &info, sizeof info) == static_cast<::ssize_t>(sizeof info);
  }

  std::shared_ptr<event::loop> loop;
  event::signal interrupt;
  event::signal terminate;
  event::async wake;
  ::sigset_t blocked{};
  ::sigset_t previous{};
  int descriptor = -1;
  event::io queued;
};

server_runtime::server_runtime(unsigned threads) : signals_(std::make_unique<signals>()) {
  for (unsigned i = 0; i < std::max(threads, 1u); ++i) {
    threads_.push_back(std::make_unique<dispatch::handler_thread>());
  }
}

server_runtime::~server_runtime() {
  listeners_.request_stop();
  connections_.request_stop();
  listeners_.join_blocking();
  connections_.join_blocking();
}

net::endpoint server_runtime::start_listeners(
    const net::endpoint& where, bool one_listener,
    const std::function<dispatch::task<>(net::tcp_listener, unsigned)>& accept_loop) {
  one_listener = one_listener || where.is_unix();
  const net::tcp_listener::options settings{ .reuse_port = !one_listener,
                                             .remove_stale_socket = true };
  net::tcp_listener first = net::tcp_listener::bind(where, settings);
  const net::endpoint bound = first.local_endpoint();
  const unsigned count = one_listener ? 1 : size();
  for (unsigned index = 0; index < count; ++index) {
    net::tcp_listener listener =
        index == 0 ? std::move(first) : net::tcp_listener::bind(bound, settings);
    listeners_.spawn(thread(index), accept_loop(std::move(listener), index));
  }
  return bound;
}

void server_runtime::stop() noexcept {
  signals_->wake.send();
}

int server_runtime::run(const net::endpoint& where, std::chrono::milliseconds grace) {
  std::printf("listening on %s\n", where.to_string().c_str());
  std::fflush(stdout);
  signals_->loop->run();  // until SIGINT, SIGTERM or stop()
  listeners_.request_stop();
  listeners_.join_blocking();
  draining_.store(true, std::memory_order_release);
  if (drain_hook_) {
    for (unsigned index = 0; index < size(); ++index) {
      thread(index).post([this, index] { drain_hook_(index); });
    }
  }
  auto drained =
      dispatch::co_spawn(thread(0), [this]() -> dispatch::task<> { co_await connections_.join(); });
  if (drained.wait_for(grace) != std::future_status::ready) {
    connections_.request_stop();
  }
  drained.get();
  return 0;
}

}  // namespace cyan::examples
