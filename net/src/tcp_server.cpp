#include "cyan/net/tcp_server.h"

#include <sys/ioctl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "cyan/dispatch/co_spawn.h"
#include "cyan/dispatch/sleep.h"
#include "cyan/event/detail/ring.h"
#include "cyan/net/detail/socket_core.h"

namespace cyan::net {

using namespace std::chrono_literals;

// One handler thread and what its connections' idle guards registered there (the thread's
// only: guards are made, drained and destroyed on it). The thread is the last member, so it is
// joined — its last drain job run — before the rest goes.
struct tcp_server::thread_state {
  explicit thread_state(dispatch::handler_thread::options settings) : thread(std::move(settings)) {}
  std::vector<idle_guard*> idle;
  bool draining = false;
  dispatch::handler_thread thread;
};

// The default accept-error report: stderr, at most one line a second; the next line says how
// many were left out. One per accept loop, used by its thread only.
class tcp_server::accept_errors {
 public:
  ~accept_errors() {
    if (left_out_ > 0) {
      std::fprintf(stderr, "cyan::net::tcp_server: accept: %llu more failures left out\n",
                   left_out_);
    }
  }
  void operator()(const std::system_error& error) {
    const auto now = std::chrono::steady_clock::now();
    if (now < quiet_until_) {
      ++left_out_;
      return;
    }
    if (left_out_ > 0) {
      std::fprintf(stderr, "cyan::net::tcp_server: accept: %s (%llu more left out)\n", error.what(),
                   left_out_);
    } else {
      std::fprintf(stderr, "cyan::net::tcp_server: accept: %s\n", error.what());
    }
    left_out_ = 0;
    quiet_until_ = now + 1s;
  }

 private:
  std::chrono::steady_clock::time_point quiet_until_{};
  unsigned long long left_out_ = 0;
};

tcp_server::tcp_server(options settings) : options_(std::move(settings)) {
  std::size_t count = options_.threads;
  if (count == 0) {
    count = std::max(1u, std::thread::hardware_concurrency());
  }
  states_.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    dispatch::handler_thread::options thread_options;
    thread_options.name = "cyan-server-" + std::to_string(i);
    states_.push_back(std::make_unique<thread_state>(std::move(thread_options)));
    thread_view_.push_back(&states_.back()->thread);
  }
}

tcp_server::~tcp_server() {
  if (on_own_thread()) {
    std::fputs(
        "cyan::net::tcp_server: destroyed on one of its own threads, which cannot wait for "
        "themselves (destroy it on another thread: a handler thread or pool worker will do)\n",
        stderr);
    std::abort();
  }
  stop(0ms);
}

bool tcp_server::on_own_thread() const noexcept {
  return std::any_of(states_.begin(), states_.end(),
                     [](const auto& state) { return state->thread.is_current(); });
}

void tcp_server::start_with(connection_handler handler) {
  const std::lock_guard lock(stop_mutex_);
  if (started_ || stopped_) {
    throw std::logic_error(started_ ? "cyan::net::tcp_server: started twice"
                                    : "cyan::net::tcp_server: started after stop()");
  }
  if (!handler) {
    throw std::invalid_argument("cyan::net::tcp_server: no connection handler");
  }
  const bool one_listener = options_.distribution == distribution::acceptor ||
                            options_.endpoint.is_unix() || states_.size() == 1;
  const tcp_listener::options settings{ .reuse_port = !one_listener,
                                        .backlog = options_.backlog,
                                        .remove_stale_socket = true };
  // Every listener is bound before any accepts: a failure leaves nothing listening.
  std::vector<tcp_listener> bound;
  bound.push_back(tcp_listener::bind(options_.endpoint, settings));
  bound_ = bound.front().local_endpoint();
  for (std::size_t i = 1; !one_listener && i < states_.size(); ++i) {
    bound.push_back(tcp_listener::bind(bound_, settings));
  }
  handler_ = std::make_shared<connection_handler>(std::move(handler));
  started_ = true;
  for (std::size_t i = 0; i < bound.size(); ++i) {
    listeners_.spawn(states_[i]->thread, [this, i, listener = std::move(bound[i])]() mutable {
      return accept_loop(std::move(listener), i);
    });
  }
}

endpoint tcp_server::local_endpoint() const {
  if (!started_) {
    throw std::logic_error("cyan::net::tcp_server::local_endpoint before start()");
  }
  return bound_;
}

dispatch::task<> tcp_server::accept_loop(tcp_listener listener, std::size_t index) {
  accept_errors report;
  bool failed = false;
  for (;;) {
    try {
      tcp_socket connection = co_await listener.accept();
      if (options_.max_connections != 0 && connections_.size() >= options_.max_connections) {
        refused_.fetch_add(1, std::memory_order_relaxed);  // counted before the peer can see it
        connection.close();  // accepted and closed at once: see max_connections
        continue;
      }
      place(std::move(connection), index);
    } catch (const std::system_error& error) {
      if (error.code() == std::errc::operation_canceled) {
        co_return;  // stop(): no more accepting
      }
      if (options_.on_accept_error) {
        options_.on_accept_error(error);
      } else {
        report(error);
      }
      failed = true;
    }
    if (failed) {
      failed = false;
      // A failure that comes again at once (a full descriptor table) must not make the loop
      // spin: the next try waits a little (a stop ends the wait at once).
      try {
        co_await dispatch::sleep_for(10ms);
      } catch (const std::system_error&) {
        co_return;
      }
    }
  }
}

void tcp_server::place(tcp_socket connection, std::size_t accepting_thread) {
  const std::shared_ptr<connection_handler> handler = handler_;
  const std::size_t threads = states_.size();
  if (options_.distribution == distribution::acceptor || bound_.is_unix()) {
    if (threads > 1) {
      // The acceptor (thread 0) hands connections to the others in turn.
      const std::size_t target = 1 + next_thread_.fetch_add(1) % (threads - 1);
      connections_.spawn(states_[target]->thread,
                         [handler, handle = connection.release()]() mutable {
                           return (*handler)(tcp_socket::adopt(std::move(handle)));
                         });
      return;
    }
  }
  connections_.spawn(states_[accepting_thread]->thread,
                     [handler, socket = std::move(connection)]() mutable {
                       return (*handler)(std::move(socket));
                     });
}

// The calling thread only waits: the shutdown runs on the server's first thread (shut_down()),
// so it may be any thread but the server's own, a handler thread or pool worker included.
bool tcp_server::stop(std::chrono::milliseconds grace) {
  if (on_own_thread()) {
    throw std::logic_error(
        "cyan::net::tcp_server::stop called on one of the server's threads (it waits for them)");
  }
  const std::lock_guard lock(stop_mutex_);
  if (stopped_) {
    return stop_result_;
  }
  stopped_ = true;
  if (!started_) {
    return stop_result_;
  }
  stop_result_ =
      dispatch::co_spawn(states_.front()->thread, [this, grace] { return shut_down(grace); }).get();
  return stop_result_;
}

// The shutdown's steps, on the server's first thread:
//   1. stop accepting: the accept loops end (their listeners close);
//   2. drain:  draining() turns true and each thread closes its idle connections (drain_here);
//   3. grace:  wait up to `grace` for the connection tasks;
//   4. cancel: ask those left to stop, and wait for them.
dispatch::task<bool> tcp_server::shut_down(std::chrono::milliseconds grace) {
  listeners_.request_stop();
  co_await listeners_.join();
  draining_.store(true, std::memory_order_release);
  for (const auto& state : states_) {
    state->thread.post([this, s = state.get()] { drain_here(*s); });
  }
  if (co_await connections_.join_for(grace)) {
    co_return true;
  }
  connections_.request_stop();
  co_await connections_.join();
  co_return false;
}

// Step 2 of the shutdown, on each thread: its idle connections with no request on its way are
// closed. On io_uring the ring is reaped first: a read whose bytes the kernel delivered but
// whose completion has not run yet is a request on its way, not an idle connection.
void tcp_server::drain_here(thread_state& state) noexcept {
  state.draining = true;
  reap_completions();  // they may end guards: those leave state.idle as they go
  std::vector<idle_guard*> idle;
  idle.swap(state.idle);
  for (idle_guard* guard : idle) {
    guard->state_ = nullptr;  // the guard has nothing left to withdraw
    if (!guard->has_request_on_its_way()) {
      guard->connection_->close();
    }
  }
}

// The calling thread's ring completions, run now rather than later in the round: until they
// run, bytes the kernel received for a socket are in no count that the drain can see.
void tcp_server::reap_completions() noexcept {
  if (event::detail::ring* ring = event::detail::ring::this_thread_if_set_up();
      ring != nullptr && ring->has_work()) {
    (void)ring->drain();
  }
}

tcp_server::thread_state& tcp_server::state_of_this_thread() {
  for (const auto& state : states_) {
    if (state->thread.is_current()) {
      return *state;
    }
  }
  throw std::logic_error("cyan::net::tcp_server::idle called on a thread that is not the server's");
}

tcp_server::idle_guard tcp_server::idle(tcp_socket& connection) {
  return make_idle_guard(connection, nullptr);
}

tcp_server::idle_guard tcp_server::idle(tls_stream& connection) {
  return make_idle_guard(connection.next_layer(), &connection);
}

// A guard made after the drain began is drained as the others were, by a drain job of its
// own: it runs once the task waits in its read (or has ended the guard), outside the ring's
// completions, which it may then reap (see drain_here()).
tcp_server::idle_guard tcp_server::make_idle_guard(tcp_socket& connection,
                                                   const tls_stream* stream) {
  thread_state& state = state_of_this_thread();
  idle_guard guard(&state, &connection, stream);
  if (state.draining) {
    state.thread.post([this, s = &state] { drain_here(*s); });
  }
  return guard;
}

// ---- idle_guard ----

tcp_server::idle_guard::idle_guard(thread_state* state, tcp_socket* connection,
                                   const tls_stream* stream) noexcept
    : state_(state), connection_(connection), stream_(stream) {
  if (state_ != nullptr) {
    state_->idle.push_back(this);
  }
}

tcp_server::idle_guard::idle_guard(idle_guard&& other) noexcept
    : state_(std::exchange(other.state_, nullptr)),
      connection_(other.connection_),
      stream_(other.stream_) {
  if (state_ != nullptr) {
    std::replace(state_->idle.begin(), state_->idle.end(), &other, this);
  }
}

// Unread: bytes in the socket (FIONREAD), held by its multishot receive, or by the TLS stream.
bool tcp_server::idle_guard::has_unread_input() const noexcept {
  const detail::socket_core* core = detail::core_of(*connection_);
  if (core == nullptr) {
    return false;  // closed already
  }
  if (core->has_held() || (stream_ != nullptr && detail::holds_unread_input(*stream_))) {
    return true;
  }
  int unread = 0;
  return ::ioctl(core->fd(), FIONREAD, &unread) == 0 && unread > 0;
}

// Under a guard that lives on, the connection's task waits in its read; a guard with no read
// waiting has one that finished (its bytes or its end are there) and a task still to resume.
bool tcp_server::idle_guard::has_request_on_its_way() const noexcept {
  const detail::socket_core* core = detail::core_of(*connection_);
  return core != nullptr && (!core->is_reading() || has_unread_input());
}

tcp_server::idle_guard::~idle_guard() {
  if (state_ != nullptr) {
    std::erase(state_->idle, this);
  }
}

}  // namespace cyan::net
