#include "http_test_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "support/descriptor_check.h"

namespace cyan::test {

namespace {

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// poll() for `events` until `deadline`; true when they came.
bool wait_for(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() < 0) {
      return false;
    }
    pollfd p{ fd, events, 0 };
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n > 0) {
      return true;
    }
    if (n == 0 && left.count() == 0) {
      return false;
    }
    if (n < 0 && errno != EINTR) {
      return false;
    }
  }
}

// The head in `text` (up to the blank line, which must be there) as a response without body.
std::optional<http_response> parse_head(std::string_view text) {
  http_response r;
  std::size_t line_end = text.find("\r\n");
  r.status_line = std::string(text.substr(0, line_end));
  if (r.status_line.rfind("HTTP/1.", 0) != 0) {
    return std::nullopt;
  }
  while (line_end != std::string_view::npos) {
    const std::size_t at = line_end + 2;
    line_end = text.find("\r\n", at);
    const std::string_view line =
        text.substr(at, line_end == std::string_view::npos ? line_end : line_end - at);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      return std::nullopt;
    }
    const std::size_t value = line.find_first_not_of(' ', colon + 1);
    r.headers.emplace_back(
        std::string(line.substr(0, colon)),
        value == std::string_view::npos ? std::string() : std::string(line.substr(value)));
  }
  return r;
}

}  // namespace

int http_response::status() const {
  return status_line.size() >= 12 ? std::atoi(status_line.c_str() + 9) : 0;
}

std::optional<std::string> http_response::header(std::string_view name) const {
  for (const auto& [field, value] : headers) {
    if (same_name(field, name)) {
      return value;
    }
  }
  return std::nullopt;
}

http_test_client::http_test_client(unsigned port, std::chrono::milliseconds limit) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0) {
    return;
  }
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 &&
      errno != EINPROGRESS) {
    ::close(fd);
    return;
  }
  int error = 0;
  socklen_t size = sizeof error;
  if (!wait_for(fd, POLLOUT, clock::now() + limit) ||
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0 || error != 0) {
    ::close(fd);
    return;
  }
  fd_ = fd;
}

http_test_client::~http_test_client() {
  close();
}

void http_test_client::close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

bool http_test_client::send(std::string_view bytes, std::chrono::milliseconds limit) {
  const auto deadline = clock::now() + limit;
  while (!bytes.empty() && fd_ >= 0) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
    } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return false;
    } else if (!wait_for(fd_, POLLOUT, deadline)) {
      return false;
    }
  }
  return bytes.empty();
}

bool http_test_client::fill(clock::time_point deadline) {
  if (fd_ < 0 || ended_) {
    return false;
  }
  for (;;) {
    char chunk[16 * 1024];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n > 0) {
      buffer_.append(chunk, static_cast<std::size_t>(n));
      return true;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      ended_ = true;  // end of stream, or a reset
      return false;
    }
    if (!wait_for(fd_, POLLIN, deadline)) {
      return false;
    }
  }
}

std::optional<http_response> http_test_client::read_response(std::chrono::milliseconds limit,
                                                             bool head_request) {
  const auto deadline = clock::now() + limit;
  std::size_t head_end;
  while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
    if (!fill(deadline)) {
      return std::nullopt;
    }
  }
  std::optional<http_response> r = parse_head(std::string_view(buffer_).substr(0, head_end));
  if (!r) {
    return std::nullopt;
  }
  const std::optional<std::string> length = r->header("Content-Length");
  const std::size_t body_size =
      head_request || !length ? 0 : std::strtoull(length->c_str(), nullptr, 10);
  const std::size_t total = head_end + 4 + body_size;
  while (buffer_.size() < total) {
    if (!fill(deadline)) {
      return std::nullopt;
    }
  }
  r->body = buffer_.substr(head_end + 4, body_size);
  buffer_.erase(0, total);
  return r;
}

bool http_test_client::wait_closed(std::chrono::milliseconds limit) {
  const auto deadline = clock::now() + limit;
  while (clock::now() < deadline && fill(deadline)) {
  }
  return ended_ && buffer_.empty();
}

bool http_test_client::wait_readable(std::chrono::milliseconds limit) {
  return !buffer_.empty() || ended_ || (fd_ >= 0 && wait_for(fd_, POLLIN, clock::now() + limit));
}

int http_test_client::get_root(std::chrono::milliseconds limit) {
  if (!send("GET / HTTP/1.1\r\nHost: test\r\n\r\n", limit)) {
    return 0;
  }
  const std::optional<http_response> r = read_response(limit);
  return r ? r->status() : 0;
}

namespace {

std::vector<std::string> http_server_command(std::vector<std::string> options) {
  options.insert(options.begin(), { CYAN_PROGRAM_HTTP_SERVER, "--port", "0" });
  return options;
}

// The next response, checked as one that closes: "Connection: close", a Content-Length that is
// its body's, then the end of the connection. nullopt when none came.
std::optional<http_response> read_closing_answer(http_test_client& client) {
  std::optional<http_response> r = client.read_response(std::chrono::seconds(5));
  if (r) {
    EXPECT_EQ(r->header("Connection"), "close") << r->status_line;
    EXPECT_EQ(r->header("Content-Length"), std::to_string(r->body.size())) << r->status_line;
    EXPECT_TRUE(client.wait_closed(std::chrono::seconds(5))) << r->status_line;
  }
  return r;
}

}  // namespace

http_server_process::http_server_process(std::vector<std::string> options)
    : process_(http_server_command(std::move(options)), -1) {
  port_ = bench::port_of_listening_line(process_.read_line(std::chrono::seconds(10)));
  if (port_ != 0) {
    listening_ = read_descriptor_table(process_.pid());
  }
}

void http_server_process::expect_descriptors_back_to_baseline(
    std::initializer_list<http_test_client*> clients) {
  for (http_test_client* client : clients) {
    client->close();
  }
  test::expect_descriptors_back_to_baseline(process_.pid(), listening_, std::chrono::seconds(5),
                                            "http_server");
}

std::unique_ptr<http_test_client> good_client(unsigned port) {
  auto client = std::make_unique<http_test_client>(port);
  EXPECT_EQ(client->get_root(), 200);
  return client;
}

void expect_answer_and_close(http_test_client& client, int expected) {
  const std::optional<http_response> r = read_closing_answer(client);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status(), expected);
}

void expect_answer_and_close(http_test_client& client, std::string_view status_line) {
  const std::optional<http_response> r = read_closing_answer(client);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status_line, status_line);
}

}  // namespace cyan::test
