#include "cyan/net/tcp.h"

#include <liburing.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "cyan/dispatch/sleep.h"

namespace cyan::net {
namespace {

// How long accept() waits after EMFILE when the spare descriptor could not be taken back.
constexpr std::chrono::milliseconds kEmfileBackOff{ 50 };

using detail::last_error;
using detail::set_option;
using detail::socket_name;

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

[[nodiscard]] int open_spare() noexcept {
  return ::open("/dev/null", O_RDONLY | O_CLOEXEC);
}

// A Unix socket file no one listens on: connecting to it is refused.
[[nodiscard]] bool is_stale_socket(const endpoint& local) {
  const std::string path = local.path();
  struct ::stat info {};
  if (path.empty() || path.front() == '@' || ::stat(path.c_str(), &info) != 0 ||
      !S_ISSOCK(info.st_mode)) {
    return false;
  }
  const int probe = detail::open_socket(AF_UNIX, SOCK_STREAM, "cyan::net::tcp_listener::bind");
  const bool refused = ::connect(probe, local.data(), local.size()) != 0 && errno == ECONNREFUSED;
  ::close(probe);
  return refused;
}

}  // namespace

// ---- socket_handle ----

socket_handle& socket_handle::operator=(socket_handle&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) {
      ::close(fd_);
    }
    fd_ = std::exchange(other.fd_, -1);
    held_ = std::move(other.held_);
  }
  return *this;
}

socket_handle::~socket_handle() {
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

// ---- tcp_socket ----

tcp_socket& tcp_socket::operator=(tcp_socket&& other) noexcept {
  if (this != &other) {
    close();
    core_ = std::move(other.core_);
  }
  return *this;
}

tcp_socket::~tcp_socket() {
  close();
}

tcp_socket tcp_socket::adopt(socket_handle handle) {
  if (!handle) {
    throw std::invalid_argument("cyan::net::tcp_socket::adopt: empty socket_handle");
  }
  const int flags = ::fcntl(handle.native_handle(), F_GETFL);
  if (flags < 0 || ::fcntl(handle.native_handle(), F_SETFL, flags | O_NONBLOCK) != 0) {
    throw_errno("cyan::net::tcp_socket::adopt");
  }
  std::vector<std::byte> held = std::move(handle.held_);
  auto core = std::make_unique<detail::socket_core>(handle.release());
  core->carry(std::move(held));
  return tcp_socket(std::move(core));
}

socket_handle tcp_socket::release() {
  if (!is_open()) {
    return {};
  }
  core_->check_owner("release()");
  if (core_->has_waiters()) {
    throw std::logic_error("cyan::net: release() of a socket with a pending operation");
  }
  std::vector<std::byte> held = core_->take_all_held();
  socket_handle handle(core_->release());
  handle.held_ = std::move(held);
  core_.reset();
  return handle;
}

void tcp_socket::shutdown_send() {
  if (!is_open()) {
    throw std::system_error(std::make_error_code(std::errc::bad_file_descriptor),
                            "cyan::net::tcp_socket::shutdown_send");
  }
  core_->check_owner("shutdown_send()");
  if (::shutdown(core_->fd(), SHUT_WR) != 0) {
    throw_errno("cyan::net::tcp_socket::shutdown_send");
  }
}

void tcp_socket::close() noexcept {
  if (core_ != nullptr && core_->has_waiters()) {
    core_->check_owner("close()");  // only the owner may end pending operations
  }
  core_.reset();
}

void tcp_socket::set_nodelay(bool on) {
  if (local_endpoint().is_unix()) {
    return;
  }
  set_option(native_handle(), IPPROTO_TCP, TCP_NODELAY, on ? 1 : 0,
             "cyan::net::tcp_socket::set_nodelay");
}

void tcp_socket::set_keepalive(bool on) {
  set_option(native_handle(), SOL_SOCKET, SO_KEEPALIVE, on ? 1 : 0,
             "cyan::net::tcp_socket::set_keepalive");
}

endpoint tcp_socket::local_endpoint() const {
  return socket_name(native_handle(), false, "cyan::net::tcp_socket::local_endpoint");
}

endpoint tcp_socket::remote_endpoint() const {
  return socket_name(native_handle(), true, "cyan::net::tcp_socket::remote_endpoint");
}

// ---- tcp_listener ----

tcp_listener& tcp_listener::operator=(tcp_listener&& other) noexcept {
  if (this != &other) {
    close();
    state_ = std::move(other.state_);
  }
  return *this;
}

tcp_listener::~tcp_listener() {
  close();
}

tcp_listener tcp_listener::bind(const endpoint& local, const options& settings) {
  constexpr const char* what = "cyan::net::tcp_listener::bind";
  auto state = std::make_shared<detail::listener_state>(
      detail::open_socket(local.family(), SOCK_STREAM, what));
  const int fd = state->core.fd();
  if (local.is_unix()) {
    if (settings.remove_stale_socket && is_stale_socket(local)) {
      ::unlink(local.path().c_str());
    }
  } else {
    set_option(fd, SOL_SOCKET, SO_REUSEADDR, 1, what);
    if (settings.reuse_port) {
      set_option(fd, SOL_SOCKET, SO_REUSEPORT, 1, what);
    }
    if (local.is_v6()) {
      set_option(fd, IPPROTO_IPV6, IPV6_V6ONLY, settings.v6_only ? 1 : 0, what);
    }
  }
  if (::bind(fd, local.data(), local.size()) != 0) {
    throw_errno(std::string(what) + "(" + local.to_string() + ")");
  }
  if (::listen(fd, settings.backlog) != 0) {
    throw_errno(std::string(what) + "(" + local.to_string() + "): listen");
  }
  return tcp_listener(std::move(state));
}

dispatch::task<tcp_socket> tcp_listener::accept_within(detail::timeout_type limit) {
  // The frame shares the state: close() may come while the back-off sleeps.
  const std::shared_ptr<detail::listener_state> state = state_;
  if (state != nullptr && state->back_off) {
    co_await dispatch::sleep_for(kEmfileBackOff);
    if (!state->core.is_open()) {
      throw std::system_error(std::make_error_code(std::errc::operation_canceled),
                              "cyan::net::tcp_listener::accept: the listener was closed");
    }
    state->reopen_spare();
  }
  co_return co_await detail::accept_op(state.get(), limit);
}

void tcp_listener::close() noexcept {
  if (state_ == nullptr) {
    return;
  }
  if (state_->core.has_waiters()) {
    state_->core.check_owner("close()");
  }
  state_->core.close();  // now, even while a backing-off accept still holds the state
  state_.reset();
}

endpoint tcp_listener::local_endpoint() const {
  return socket_name(native_handle(), false, "cyan::net::tcp_listener::local_endpoint");
}

// ---- the operations ----

namespace detail {

socket_core* core_of(const tcp_socket& socket) noexcept {
  return socket.is_open() ? socket.core() : nullptr;
}

// On io_uring attempt() serves what the socket holds (see io_wait::suspend()); on epoll it
// does that first too (bytes adopted with the socket), then makes the system call.
bool read_some_op::attempt() noexcept {
  if (core_->has_held()) {
    done_ = core_->take_held(buffer_);
    if (done_ == 0 && !buffer_.empty()) {
      if (const std::optional<int> end = core_->take_held_end(); end && *end < 0) {
        error_ = { -*end, std::generic_category() };
      }
    }
    return true;
  }
  if (core_->ring() != nullptr) {
    return false;  // nothing held: wait for the multishot receive
  }
  const long n =
      io_call([&] { return ::recv(core_->fd(), buffer_.data(), buffer_.size(), 0); }, error_);
  if (n == kWouldBlock) {
    return false;
  }
  done_ = n > 0 ? static_cast<std::size_t>(n) : 0;
  return true;
}

void read_some_op::prepare_call(io_uring_sqe* entry) noexcept {
  io_uring_prep_recv(entry, core_->fd(), buffer_.data(), buffer_.size(), 0);
}

bool read_some_op::call_completed(int result) noexcept {
  if (result < 0) {
    error_ = { -result, std::generic_category() };
  } else {
    done_ = static_cast<std::size_t>(result);
  }
  return true;
}

bool read_exact_op::attempt() noexcept {
  done_ += core_->take_held(buffer_.subspan(done_));
  if (done_ < buffer_.size()) {
    if (const std::optional<int> end = core_->take_held_end()) {
      error_ = *end < 0 ? std::error_code(-*end, std::generic_category())
                        : make_error_code(error::end_of_stream);
      return true;
    }
    if (core_->ring() != nullptr) {
      return false;  // wait for the multishot receive
    }
  }
  while (done_ < buffer_.size()) {
    const std::span<std::byte> rest = buffer_.subspan(done_);
    const long n =
        io_call([&] { return ::recv(core_->fd(), rest.data(), rest.size(), 0); }, error_);
    if (n == kWouldBlock) {
      return false;
    }
    if (n == kFailed) {
      return true;
    }
    if (n == 0) {
      error_ = make_error_code(error::end_of_stream);
      return true;
    }
    done_ += static_cast<std::size_t>(n);
  }
  return true;
}

void read_exact_op::prepare_call(io_uring_sqe* entry) noexcept {
  const std::span<std::byte> rest = buffer_.subspan(done_);
  io_uring_prep_recv(entry, core_->fd(), rest.data(), rest.size(), 0);
}

bool read_exact_op::call_completed(int result) noexcept {
  if (result < 0) {
    error_ = { -result, std::generic_category() };
    return true;
  }
  if (result == 0 && done_ < buffer_.size()) {
    error_ = make_error_code(error::end_of_stream);
    return true;
  }
  done_ += static_cast<std::size_t>(result);
  return done_ == buffer_.size();
}

namespace {

// One send() of `bytes` (MSG_NOSIGNAL: a reset peer is an error, not SIGPIPE), see io_call().
long send_bytes(int fd, std::span<const std::byte> bytes, std::error_code& error) noexcept {
  return io_call([&] { return ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL); }, error);
}

}  // namespace

bool write_some_op::attempt() noexcept {
  const long n = send_bytes(core_->fd(), buffer_, error_);
  if (n == kWouldBlock) {
    return false;
  }
  done_ = n > 0 ? static_cast<std::size_t>(n) : 0;
  return true;
}

void write_some_op::prepare_call(io_uring_sqe* entry) noexcept {
  io_uring_prep_send(entry, core_->fd(), buffer_.data(), buffer_.size(), MSG_NOSIGNAL);
}

bool write_some_op::call_completed(int result) noexcept {
  if (result < 0) {
    error_ = { -result, std::generic_category() };
  } else {
    done_ = static_cast<std::size_t>(result);
  }
  return true;
}

bool write_all_op::skip_written() noexcept {
  while (next_ < buffers_.size() && offset_ == buffers_[next_].size()) {
    ++next_;  // skips empty buffers and the one just finished
    offset_ = 0;
  }
  return next_ < buffers_.size();
}

bool write_all_op::attempt() noexcept {
  for (;;) {
    if (!skip_written()) {
      return true;
    }
    long n = 0;
    if (next_ + 1 == buffers_.size()) {
      // One buffer left: send(), which costs the kernel less than sendmsg()'s msghdr and iovec.
      n = send_bytes(core_->fd(), buffers_[next_].subspan(offset_), error_);
    } else {
      ::iovec pieces[kGather];
      const std::size_t count = std::min(kGather, buffers_.size() - next_);
      for (std::size_t i = 0; i < count; ++i) {
        const std::span<const std::byte> piece = buffers_[next_ + i].subspan(i == 0 ? offset_ : 0);
        pieces[i] = { const_cast<std::byte*>(piece.data()), piece.size() };
      }
      ::msghdr message{};
      message.msg_iov = pieces;
      message.msg_iovlen = count;
      n = io_call([&] { return ::sendmsg(core_->fd(), &message, MSG_NOSIGNAL); }, error_);
    }
    if (n == kWouldBlock) {
      return false;
    }
    if (n == kFailed) {
      return true;
    }
    advance(static_cast<std::size_t>(n));
  }
}

// As attempt(): send() for the last buffer, sendmsg() gathering up to kGather otherwise; an
// empty write sends nothing and completes with 0.
void write_all_op::prepare_call(io_uring_sqe* entry) noexcept {
  if (!skip_written() || next_ + 1 == buffers_.size()) {
    const std::span<const std::byte> rest =
        next_ < buffers_.size() ? buffers_[next_].subspan(offset_) : std::span<const std::byte>();
    io_uring_prep_send(entry, core_->fd(), rest.data(), rest.size(), MSG_NOSIGNAL);
    return;
  }
  const std::size_t count = std::min(kGather, buffers_.size() - next_);
  for (std::size_t i = 0; i < count; ++i) {
    const std::span<const std::byte> piece = buffers_[next_ + i].subspan(i == 0 ? offset_ : 0);
    pieces_[i] = { const_cast<std::byte*>(piece.data()), piece.size() };
  }
  message_ = {};
  message_.msg_iov = pieces_;
  message_.msg_iovlen = count;
  io_uring_prep_sendmsg(entry, core_->fd(), &message_, MSG_NOSIGNAL);
}

bool write_all_op::call_completed(int result) noexcept {
  if (result < 0) {
    error_ = { -result, std::generic_category() };
    return true;
  }
  if (next_ < buffers_.size()) {
    advance(static_cast<std::size_t>(result));
  }
  return !skip_written();
}

void write_all_op::advance(std::size_t written) noexcept {
  written_ += written;
  while (written > 0) {
    const std::size_t left = buffers_[next_].size() - offset_;
    if (written < left) {
      offset_ += written;
      return;
    }
    written -= left;
    ++next_;
    offset_ = 0;
  }
}

connect_op::connect_op(const endpoint& peer, timeout_type timeout)
    : io_wait(nullptr, event::io::write, timeout), peer_(peer) {
  const int fd = ::socket(peer.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error_ = last_error();
    return;
  }
  socket_ = std::make_unique<socket_core>(fd);
  core_ = socket_.get();
}

connect_op::~connect_op() = default;

bool connect_op::attempt() noexcept {
  if (!started_) {
    started_ = true;
    if (::connect(core_->fd(), peer_.data(), peer_.size()) == 0) {
      return true;
    }
    // EINTR: the connection goes on being made, as for EINPROGRESS.
    if (errno == EINPROGRESS || errno == EINTR) {
      return false;
    }
    error_ = last_error();
    return true;
  }
  int failure = 0;
  ::socklen_t size = sizeof failure;
  if (::getsockopt(core_->fd(), SOL_SOCKET, SO_ERROR, &failure, &size) != 0) {
    failure = errno;
  }
  if (failure != 0) {
    error_ = { failure, std::generic_category() };
  }
  return true;
}

void connect_op::prepare_call(io_uring_sqe* entry) noexcept {
  io_uring_prep_connect(entry, core_->fd(), peer_.data(), peer_.size());
}

// A connect made again after a poll (a kernel that answered EINPROGRESS) reports EISCONN.
bool connect_op::call_completed(int result) noexcept {
  if (result < 0 && result != -EISCONN) {
    error_ = { -result, std::generic_category() };
  }
  return true;
}

tcp_socket connect_op::await_resume() {
  finish(("cyan::net::tcp_socket::connect(" + peer_.to_string() + ")").c_str());
  core_ = nullptr;
  return tcp_socket(std::move(socket_));
}

listener_state::listener_state(int fd) : core(fd), spare_fd(open_spare()) {}

listener_state::~listener_state() {
  if (spare_fd >= 0) {
    ::close(spare_fd);
  }
}

void listener_state::shed_connections() noexcept {
  if (spare_fd < 0) {
    back_off = true;
    return;
  }
  ::close(spare_fd);
  for (int fd; (fd = ::accept4(core.fd(), nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) {
    ::close(fd);
  }
  spare_fd = -1;
  reopen_spare();
}

void listener_state::reopen_spare() noexcept {
  if (spare_fd < 0) {
    spare_fd = open_spare();
  }
  back_off = spare_fd < 0;
}

accept_op::~accept_op() {
  if (accepted_ >= 0) {
    ::close(accepted_);  // accepted, but the awaiting coroutine never took it
  }
}

bool accept_op::attempt() noexcept {
  // Linux takes the new descriptor before it looks for a connection, so with the table full
  // accept4() fails at once even when no one connects: after an EMFILE, wait until a
  // connection is there before trying.
  if (std::exchange(speculative_, false) && listener_->out_of_descriptors) {
    return false;
  }
  for (;;) {
    accepted_ = ::accept4(core_->fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (accepted_ >= 0) {
      listener_->out_of_descriptors = false;
      return true;
    }
    switch (errno) {
      case EAGAIN:
#if EAGAIN != EWOULDBLOCK
      case EWOULDBLOCK:
#endif
        return false;
      case EINTR:
      case ECONNABORTED:  // the client gave up before we took it: take the next one
      case EPROTO:
        continue;
      case EMFILE:
      case ENFILE:
        error_ = last_error();
        listener_->out_of_descriptors = true;
        listener_->shed_connections();
        return true;
      default:
        error_ = last_error();
        return true;
    }
  }
}

bool accept_op::poll_first() noexcept {
  return std::exchange(speculative_, false) && listener_->out_of_descriptors;  // see attempt()
}

void accept_op::prepare_call(io_uring_sqe* entry) noexcept {
  io_uring_prep_accept(entry, core_->fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

bool accept_op::call_completed(int result) noexcept {
  if (result >= 0) {
    accepted_ = result;
    listener_->out_of_descriptors = false;
    return true;
  }
  switch (-result) {
    case ECONNABORTED:  // the client gave up before we took it: take the next one
    case EPROTO:
      return false;
    case EMFILE:
    case ENFILE:
      error_ = { -result, std::generic_category() };
      listener_->out_of_descriptors = true;
      listener_->shed_connections();
      return true;
    default:
      error_ = { -result, std::generic_category() };
      return true;
  }
}

tcp_socket accept_op::await_resume() {
  finish("cyan::net::tcp_listener::accept");
  auto core = std::make_unique<socket_core>(accepted_);
  accepted_ = -1;
  return tcp_socket(std::move(core));
}

}  // namespace detail
}  // namespace cyan::net
