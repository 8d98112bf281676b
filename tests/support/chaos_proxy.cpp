#include "support/chaos_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <limits>
#include <string>
#include <system_error>

namespace cyan::test {

namespace {

using clock_type = std::chrono::steady_clock;
using action = chaos_proxy::fault::action;

// What one read takes at most, and the most a direction holds read but not yet written.
constexpr std::size_t kChunkSize = 64 * 1024;
// The longest poll(): stop() wakes the thread through its pipe at once; this only bounds how
// long a lost wake-up could keep it.
constexpr int kPollCapMs = 200;
// Connections accepted per round, so that a flood of clients cannot starve the relaying.
constexpr int kAcceptsPerRound = 16;

[[noreturn]] void throw_errno(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

[[nodiscard]] bool would_block(int error) {
  return error == EAGAIN || error == EWOULDBLOCK || error == EINTR;
}

::sockaddr_in loopback(unsigned port) {
  ::sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

// Each piece leaves as its own segment: Nagle would merge the 1-byte writes of a split.
void set_nodelay(int fd) {
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

// Closes `fd` so that the peer gets a reset instead of an end of stream.
void close_with_reset(int fd) {
  const ::linger abort{ 1, 0 };
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
  ::close(fd);
}

// One direction of a connection: the bytes `from` sends, forwarded to `to` under `rule`.
struct relay {
  enum class state {
    relaying,  // reading `from`, writing `to`
    dropping,  // half-closed: what `from` still sends is read and dropped until its end
    stalled,   // nothing read or written any more; `from` watched for its end
    done,      // over: `from` ended, and all of it went to `to` (whose sending side is shut)
               // or, stalled, none of the rest will
  };

  relay(const chaos_proxy::fault& f, bool towards_server) : rule(f), to_server(towards_server) {}

  // What `from` may still give before the action: bytes beyond it stay in the source's socket.
  [[nodiscard]] std::size_t budget() const {
    if (rule.after == action::none) {
      return std::numeric_limits<std::size_t>::max();
    }
    return rule.after_bytes - static_cast<std::size_t>(taken);
  }
  [[nodiscard]] bool wants_read() const {
    return phase == state::dropping || (phase == state::relaying && !source_ended &&
                                        pending.size() < kChunkSize && budget() > 0);
  }
  [[nodiscard]] bool wants_write(clock_type::time_point now) const {
    return phase == state::relaying && !pending.empty() && due <= now;
  }
  // Whether the action is due: its byte count forwarded, and not applied yet.
  [[nodiscard]] bool action_due() const {
    return phase == state::relaying && rule.after != action::none && forwarded == rule.after_bytes;
  }

  const chaos_proxy::fault& rule;
  const bool to_server;  // client → server (else server → client)
  int from = -1;
  int to = -1;
  state phase = state::relaying;
  std::string pending;           // read from `from`, not yet written to `to`
  std::uint64_t taken = 0;       // read from `from` while relaying
  std::uint64_t forwarded = 0;   // written to `to`
  clock_type::time_point due{};  // when the next piece may be written
  bool source_ended = false;     // `from` said end of stream
};

// The options' pairs in the order connections take them.
std::vector<chaos_proxy::connection_faults> faults_in_turn(const chaos_proxy::options& settings) {
  std::vector<chaos_proxy::connection_faults> pairs{ { settings.to_server, settings.to_client } };
  pairs.insert(pairs.end(), settings.then.begin(), settings.then.end());
  return pairs;
}

}  // namespace

// One client and its server connection, on the proxy's thread. A round of it:
//   1. connect  wait until the (non-blocking) connection to the server is up;
//   2. take     each direction reads what its source sent, up to its action's byte count;
//   3. give     each direction writes the pieces that are due (one byte each when split,
//               `delay` after the last one);
//   4. act      a direction whose forwarded bytes reached the count applies its action;
//   5. end      a direction whose source ended, all of it written, shuts its destination's
//               sending side (a stalled one ends with its source, shutting nothing); with
//               both directions ended the connection closes.
// An error on either socket (a peer's reset, a write to a closed peer) resets both sides.
struct chaos_proxy::connection {
  connection(int client_fd, int server_fd, const connection_faults& faults)
      : client(client_fd),
        server(server_fd),
        to_server(faults.to_server, true),
        to_client(faults.to_client, false) {
    to_server.from = client;
    to_server.to = server;
    to_client.from = server;
    to_client.to = client;
  }
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
  ~connection() {
    for (const int fd : { client, server }) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
  }

  // The poll events each socket waits for this round, and where they went in `polled`.
  void add_to(std::vector<::pollfd>& polled, clock_type::time_point now) const {
    short client_events = 0;
    short server_events = 0;
    if (!connected) {
      server_events = POLLOUT;
    } else {
      client_events = static_cast<short>((to_server.wants_read() ? POLLIN : 0) |
                                         (to_client.wants_write(now) ? POLLOUT : 0) |
                                         (watches_end(to_server) ? POLLRDHUP : 0));
      server_events = static_cast<short>((to_client.wants_read() ? POLLIN : 0) |
                                         (to_server.wants_write(now) ? POLLOUT : 0) |
                                         (watches_end(to_client) ? POLLRDHUP : 0));
    }
    polled.push_back({ client_events != 0 ? client : -1, client_events, 0 });
    polled.push_back({ server_events != 0 ? server : -1, server_events, 0 });
  }

  // The soonest a piece not due yet at `now` becomes due, if any (one due already waits for
  // POLLOUT instead).
  [[nodiscard]] clock_type::time_point next_due(clock_type::time_point now) const {
    clock_type::time_point soonest = clock_type::time_point::max();
    for (const relay* r : { &to_server, &to_client }) {
      if (r->phase == relay::state::relaying && !r->pending.empty() && r->due > now) {
        soonest = std::min(soonest, r->due);
      }
    }
    return soonest;
  }

  // One round (see above), with the two sockets' poll results.
  void step(short client_revents, short server_revents, statistics& counted) {
    if (!connected && !finish_connect(server_revents, counted)) {
      return;
    }
    end_if_source_ended(to_server, client_revents, counted);
    end_if_source_ended(to_client, server_revents, counted);
    for (relay* r : { &to_server, &to_client }) {
      if (!take(*r, counted) || !give(*r, counted)) {
        return;  // reset
      }
      if (r->phase == relay::state::relaying && r->source_ended && r->pending.empty()) {
        ::shutdown(r->to, SHUT_WR);
        r->phase = relay::state::done;
      }
    }
    if (to_server.phase == relay::state::done && to_client.phase == relay::state::done) {
      ::close(client);
      ::close(server);
      client = server = -1;
      finished = true;
      ++counted.closed;
    }
  }

  int client;
  int server;
  bool connected = false;
  bool server_ended = false;  // counted in server_ends
  bool finished = false;      // both sockets closed: to be removed
  relay to_server;
  relay to_client;

 private:
  // Behind a stall nothing reads the source, so its end is watched for (POLLRDHUP: its FIN).
  [[nodiscard]] static bool watches_end(const relay& r) { return r.phase == relay::state::stalled; }

  // A stalled direction is over once its source ended (FIN, or POLLHUP / POLLERR: a reset).
  void end_if_source_ended(relay& r, short source_revents, statistics& counted) {
    if (watches_end(r) && (source_revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
      if (!r.to_server) {
        note_server_end(counted);
      }
      r.phase = relay::state::done;
    }
  }

  bool finish_connect(short server_revents, statistics& counted) {
    if (server_revents == 0) {
      return false;
    }
    int error = 0;
    ::socklen_t size = sizeof error;
    if (::getsockopt(server, SOL_SOCKET, SO_ERROR, &error, &size) != 0 || error != 0) {
      reset(counted);  // refused: the client sees a reset
      return false;
    }
    connected = true;
    // An action after 0 bytes comes now.
    for (relay* r : { &to_server, &to_client }) {
      if (r->action_due() && !act(*r, counted)) {
        return false;
      }
    }
    return true;
  }

  // Reads what the source sent; false when the connection was reset.
  bool take(relay& r, statistics& counted) {
    if (!r.wants_read()) {
      return true;
    }
    std::array<char, kChunkSize> buffer;
    const std::size_t most = r.phase == relay::state::dropping
                                 ? buffer.size()
                                 : std::min(buffer.size() - r.pending.size(), r.budget());
    const ::ssize_t n = ::recv(r.from, buffer.data(), most, 0);
    if (n < 0 && would_block(errno)) {
      return true;
    }
    if (n <= 0 && !r.to_server) {
      note_server_end(counted);
    }
    if (n < 0) {
      reset(counted);  // the source's reset, passed on
      return false;
    }
    if (n == 0) {
      if (r.phase == relay::state::dropping) {
        r.phase = relay::state::done;
      } else {
        r.source_ended = true;
      }
      return true;
    }
    if (r.phase == relay::state::relaying) {
      if (r.pending.empty()) {
        r.due = clock_type::now() + r.rule.delay;
      }
      r.pending.append(buffer.data(), static_cast<std::size_t>(n));
      r.taken += static_cast<std::uint64_t>(n);
    }
    return true;
  }

  // Writes the pieces that are due; false when the connection was reset.
  bool give(relay& r, statistics& counted) {
    while (r.wants_write(clock_type::now())) {
      const std::size_t piece = r.rule.split ? 1 : r.pending.size();
      const ::ssize_t n = ::send(r.to, r.pending.data(), piece, MSG_NOSIGNAL);
      if (n < 0 && would_block(errno)) {
        return true;
      }
      if (n < 0) {
        if (r.to_server) {
          note_server_end(counted);
        }
        reset(counted);
        return false;
      }
      const auto written = static_cast<std::uint64_t>(n);
      (r.to_server ? counted.bytes_to_server : counted.bytes_to_client) += written;
      ++(r.to_server ? counted.writes_to_server : counted.writes_to_client);
      r.pending.erase(0, static_cast<std::size_t>(n));
      r.forwarded += written;
      r.due = clock_type::now() + r.rule.delay;
      if (r.action_due()) {
        return act(r, counted);
      }
    }
    return true;
  }

  // Applies the direction's action; false when it reset the connection.
  bool act(relay& r, statistics& counted) {
    switch (r.rule.after) {
      case action::reset:
        ++counted.resets;
        reset(counted);
        return false;
      case action::half_close:
        ::shutdown(r.to, SHUT_WR);
        r.phase = relay::state::dropping;
        ++counted.half_closes;
        return true;
      case action::stall:
        r.phase = relay::state::stalled;
        ++counted.stalls;
        return true;
      case action::none:
        break;
    }
    return true;
  }

  void note_server_end(statistics& counted) {
    if (!server_ended) {
      server_ended = true;
      ++counted.server_ends;
    }
  }

  void reset(statistics& counted) {
    close_with_reset(client);
    close_with_reset(server);
    client = server = -1;
    finished = true;
    ++counted.closed;
  }
};

chaos_proxy::chaos_proxy(options settings)
    : target_port_(settings.target_port), in_turn_(faults_in_turn(settings)) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_NONBLOCK | O_CLOEXEC) != 0) {
    throw_errno("chaos_proxy: pipe2");
  }
  wake_read_ = pipe_fds[0];
  wake_write_ = pipe_fds[1];
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  ::sockaddr_in address = loopback(0);
  ::socklen_t length = sizeof address;
  if (listener_ < 0 || ::bind(listener_, reinterpret_cast<::sockaddr*>(&address), length) != 0 ||
      ::listen(listener_, 128) != 0 ||
      ::getsockname(listener_, reinterpret_cast<::sockaddr*>(&address), &length) != 0) {
    const int error = errno;
    for (const int fd : { listener_, wake_read_, wake_write_ }) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
    throw std::system_error(error, std::generic_category(), "chaos_proxy: listen on 127.0.0.1");
  }
  port_ = ntohs(address.sin_port);
  thread_ = std::thread([this] { run(); });
}

chaos_proxy::~chaos_proxy() {
  stop();
  ::close(wake_read_);
  ::close(wake_write_);
}

chaos_proxy::statistics chaos_proxy::stats() const {
  const std::lock_guard lock(mutex_);
  return published_;
}

bool chaos_proxy::wait_until(const std::function<bool(const statistics&)>& done,
                             std::chrono::milliseconds limit) const {
  std::unique_lock lock(mutex_);
  return published_changed_.wait_for(lock, limit, [&] { return done(published_); });
}

void chaos_proxy::stop() {
  if (!thread_.joinable()) {
    return;
  }
  stopping_.store(true);
  const char wake = 0;
  (void)::write(wake_write_, &wake, 1);
  thread_.join();
  ::close(listener_);
  listener_ = -1;
}

// The proxy's thread, round after round:
//   1. wait     poll the wake pipe, the listener and each connection's sockets (for what its
//               directions want), until one is ready or the next piece is due;
//   2. relay    each connection's round (connection::step); the closed ones go;
//   3. accept   new clients, each with its server connection started;
//   4. publish  the figures, for stats() and wait_until().
// stop() ends it after (1); every connection closes then.
void chaos_proxy::run() {
  std::vector<::pollfd> polled;
  while (!stopping_.load()) {
    if (!wait(polled) || stopping_.load()) {
      break;
    }
    relay_all(polled);
    accept_clients();
    publish();
  }
  connections_.clear();
  publish();
}

bool chaos_proxy::wait(std::vector<::pollfd>& polled) const {
  polled.clear();
  polled.push_back({ wake_read_, POLLIN, 0 });
  polled.push_back({ accept_failed_ ? -1 : listener_, POLLIN, 0 });
  const auto now = clock_type::now();
  for (const auto& c : connections_) {
    c->add_to(polled, now);
  }
  return ::poll(polled.data(), polled.size(), poll_timeout()) >= 0 || errno == EINTR;
}

void chaos_proxy::relay_all(const std::vector<::pollfd>& polled) {
  for (std::size_t i = 0; i < connections_.size(); ++i) {
    const std::size_t client_index = 2 + 2 * i;  // after the pipe and the listener
    connections_[i]->step(polled[client_index].revents, polled[client_index + 1].revents, counted_);
  }
  std::erase_if(connections_, [](const auto& c) { return c->finished; });
}

void chaos_proxy::accept_clients() {
  for (int i = 0; i < kAcceptsPerRound; ++i) {
    const int client = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (client < 0) {
      // None waiting; or a failure (EMFILE) that would leave the listener readable: the next
      // round then waits without it, so it retries after kPollCapMs rather than spinning.
      accept_failed_ = !would_block(errno) && errno != ECONNABORTED;
      return;
    }
    const connection_faults& faults = in_turn_[counted_.accepted % in_turn_.size()];
    ++counted_.accepted;
    set_nodelay(client);
    const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (server < 0) {
      close_with_reset(client);
      ++counted_.closed;
      continue;
    }
    set_nodelay(server);
    const ::sockaddr_in target = loopback(target_port_);
    if (::connect(server, reinterpret_cast<const ::sockaddr*>(&target), sizeof target) != 0 &&
        errno != EINPROGRESS) {
      close_with_reset(client);
      ::close(server);
      ++counted_.closed;
      continue;
    }
    // Connected or not, the next round's poll says (POLLOUT), and SO_ERROR tells how it went.
    connections_.push_back(std::make_unique<connection>(client, server, faults));
  }
}

int chaos_proxy::poll_timeout() const {
  const auto now = clock_type::now();
  auto soonest = now + std::chrono::milliseconds(kPollCapMs);
  for (const auto& c : connections_) {
    soonest = std::min(soonest, c->next_due(now));
  }
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(soonest - now);
  return static_cast<int>(std::max<std::chrono::milliseconds::rep>(wait.count(), 0));
}

void chaos_proxy::publish() {
  {
    const std::lock_guard lock(mutex_);
    published_ = counted_;
  }
  published_changed_.notify_all();
}

}  // namespace cyan::test
