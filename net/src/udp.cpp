#include "cyan/net/udp.h"

#include <liburing.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <string>
#include <system_error>

namespace cyan::net {

udp_socket& udp_socket::operator=(udp_socket&& other) noexcept {
  if (this != &other) {
    close();
    core_ = std::move(other.core_);
  }
  return *this;
}

udp_socket::~udp_socket() {
  close();
}

udp_socket udp_socket::bind(const endpoint& local) {
  constexpr const char* what = "cyan::net::udp_socket::bind";
  if (local.is_unix()) {
    throw std::invalid_argument("cyan::net::udp_socket::bind: a Unix-domain endpoint (" +
                                local.to_string() + ") is not a UDP address");
  }
  auto core =
      std::make_unique<detail::socket_core>(detail::open_socket(local.family(), SOCK_DGRAM, what));
  if (::bind(core->fd(), local.data(), local.size()) != 0) {
    throw std::system_error(detail::last_error(),
                            std::string(what) + "(" + local.to_string() + ")");
  }
  return udp_socket(std::move(core));
}

void udp_socket::connect(const endpoint& peer) {
  constexpr const char* what = "cyan::net::udp_socket::connect";
  if (!is_open()) {
    throw std::system_error(std::make_error_code(std::errc::bad_file_descriptor), what);
  }
  core_->attach_here("connect()");
  if (::connect(core_->fd(), peer.data(), peer.size()) != 0) {
    throw std::system_error(detail::last_error(), std::string(what) + "(" + peer.to_string() + ")");
  }
}

void udp_socket::close() noexcept {
  if (core_ != nullptr && core_->has_waiters()) {
    core_->check_owner("close()");  // only the owner may end pending operations
  }
  core_.reset();
}

endpoint udp_socket::local_endpoint() const {
  return detail::socket_name(native_handle(), false, "cyan::net::udp_socket::local_endpoint");
}

namespace detail {

bool send_op::attempt() noexcept {
  const long n = io_call(
      [&] {
        return ::sendto(core_->fd(), datagram_.data(), datagram_.size(), MSG_NOSIGNAL,
                        peer_ != nullptr ? peer_->data() : nullptr,
                        peer_ != nullptr ? peer_->size() : 0);
      },
      error_);
  if (n == kWouldBlock) {
    return false;
  }
  done_ = n > 0 ? static_cast<std::size_t>(n) : 0;
  return true;
}

void send_op::prepare_call(io_uring_sqe* entry) noexcept {
  piece_ = { const_cast<std::byte*>(datagram_.data()), datagram_.size() };
  message_ = {};
  message_.msg_name = peer_ != nullptr ? const_cast<::sockaddr*>(peer_->data()) : nullptr;
  message_.msg_namelen = peer_ != nullptr ? peer_->size() : 0;
  message_.msg_iov = &piece_;
  message_.msg_iovlen = 1;
  io_uring_prep_sendmsg(entry, core_->fd(), &message_, MSG_NOSIGNAL);
}

bool send_op::call_completed(int result) noexcept {
  if (result < 0) {
    error_ = { -result, std::generic_category() };
  } else {
    done_ = static_cast<std::size_t>(result);
  }
  return true;
}

bool receive_op::attempt() noexcept {
  // MSG_TRUNC: the result is the datagram's real length, so truncation shows.
  const long n = io_call(
      [&] {
        sender_size_ = endpoint::capacity();
        return ::recvfrom(core_->fd(), buffer_.data(), buffer_.size(), MSG_TRUNC,
                          result_.sender.storage(), &sender_size_);
      },
      error_);
  if (n == kWouldBlock) {
    return false;
  }
  if (n >= 0) {
    const auto length = static_cast<std::size_t>(n);
    result_.truncated = length > buffer_.size();
    result_.size = result_.truncated ? buffer_.size() : length;
  }
  return true;
}

void receive_op::prepare_call(io_uring_sqe* entry) noexcept {
  piece_ = { buffer_.data(), buffer_.size() };
  message_ = {};
  message_.msg_name = result_.sender.storage();
  message_.msg_namelen = endpoint::capacity();
  message_.msg_iov = &piece_;
  message_.msg_iovlen = 1;
  io_uring_prep_recvmsg(entry, core_->fd(), &message_, MSG_TRUNC);  // as attempt()
}

bool receive_op::call_completed(int result) noexcept {
  if (result < 0) {
    error_ = { -result, std::generic_category() };
    return true;
  }
  sender_size_ = message_.msg_namelen;
  const auto length = static_cast<std::size_t>(result);
  result_.truncated = length > buffer_.size() || (message_.msg_flags & MSG_TRUNC) != 0;
  result_.size = std::min(length, buffer_.size());
  return true;
}

received_datagram receive_op::await_resume() {
  finish("cyan::net::udp_socket::receive");
  result_.sender = endpoint::from_sockaddr(result_.sender.storage(), sender_size_);
  return result_;
}

}  // namespace detail
}  // namespace cyan::net
