// load_tester run as a user runs it: against echo_server (exact counts, no errors), against a
// port where no one listens (connect failures, non-zero exit), and against small scripted
// servers in this process that answer wrongly (each kind of wrong answer is counted).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bench/process.h"
#include "support/descriptor_check.h"

namespace {

using namespace std::chrono_literals;
using cyan::bench::child_process;
using cyan::bench::parse_result_line;
using cyan::bench::port_of_listening_line;

struct run_result {
  int status = -1;
  std::string output;
  std::map<std::string, double> result;  // the RESULT line
};

run_result run_load(std::vector<std::string> arguments) {
  // The bounds first: a test's own --timeout-ms or --max-seconds comes later and wins.
  arguments.insert(arguments.begin(),
                   { CYAN_PROGRAM_LOAD_TESTER, "--timeout-ms", "5000", "--max-seconds", "30" });
  child_process load(arguments, -1);
  run_result r;
  r.output = load.read_all(40s);
  r.status = load.wait(10s);
  r.result = parse_result_line(r.output);
  return r;
}

// echo_server on a free port, stopped at the end of the test, once load_tester's connections
// are all closed: it must be back to the descriptors it listened with, and exit 0.
class echo_server {
 public:
  echo_server() : process_({ CYAN_PROGRAM_ECHO_SERVER, "--port", "0", "--threads", "2" }, -1) {
    port_ = port_of_listening_line(process_.read_line(10s));
    if (up()) {
      listening_ = cyan::test::read_descriptor_table(process_.pid());
    }
  }
  ~echo_server() {
    if (up()) {
      cyan::test::expect_descriptors_back_to_baseline(process_.pid(), listening_, 5s,
                                                      "echo_server");
    }
    EXPECT_EQ(process_.stop(10s), 0);
  }
  [[nodiscard]] std::string port() const { return std::to_string(port_); }
  [[nodiscard]] bool up() const { return port_ != 0; }

 private:
  child_process process_;
  unsigned port_ = 0;
  cyan::test::descriptor_table listening_;  // its descriptors when it said "listening on"
};

TEST(load_tester, echo_counts_every_request_exactly_with_no_error) {
  echo_server server;
  ASSERT_TRUE(server.up());
  const run_result r = run_load({ "--port", server.port(), "--connections", "10", "--threads", "2",
                                  "--requests", "300", "--size", "100" });
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.result.at("requests"), 3000) << r.output;
  EXPECT_EQ(r.result.at("errors"), 0) << r.output;
  EXPECT_GT(r.result.at("p50_us"), 0);
  EXPECT_LE(r.result.at("p50_us"), r.result.at("p99_us"));
  EXPECT_LE(r.result.at("p99_us"), r.result.at("max_us"));
  EXPECT_NE(r.output.find("errors 0: connect 0, read 0, write 0, invalid 0\n"), std::string::npos)
      << r.output;
}

TEST(load_tester, duration_prints_totals_every_second) {
  echo_server server;
  ASSERT_TRUE(server.up());
  const run_result r =
      run_load({ "--port", server.port(), "--connections", "4", "--duration", "2" });
  EXPECT_EQ(r.status, 0) << r.output;
  // Each progress line holds the totals so far: 4 connections made, nothing failed.
  const auto first = r.output.find("t=1s requests=");
  ASSERT_NE(first, std::string::npos) << r.output;
  const std::string line = r.output.substr(first, r.output.find('\n', first) - first);
  EXPECT_NE(line.find(" connect ok=4 fail=0 "), std::string::npos) << line;
  EXPECT_NE(line.find(" invalid=0"), std::string::npos) << line;
  const unsigned long long at_one_second =
      std::stoull(line.substr(std::string("t=1s requests=").size()));
  EXPECT_GT(at_one_second, 0u);
  EXPECT_GE(r.result.at("requests"), static_cast<double>(at_one_second));
  EXPECT_GE(r.result.at("seconds"), 2.0);
  EXPECT_LT(r.result.at("seconds"), 10.0);
  EXPECT_EQ(r.result.at("errors"), 0);
}

// 64 MiB is more than both ends' socket buffers hold together (the tcp_wmem and tcp_rmem
// maxima are 4 and 6 MiB by default; 4 and 32 on the development machine): written whole
// before any of it is read back, the message would stall both ends until the write timed out.
TEST(load_tester, echoes_a_message_larger_than_the_socket_buffers_hold) {
  echo_server server;
  ASSERT_TRUE(server.up());
  const run_result r = run_load({ "--port", server.port(), "--connections", "1", "--requests", "2",
                                  "--size", std::to_string(64 << 20) });
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.result.at("requests"), 2) << r.output;
  EXPECT_NE(r.output.find("errors 0: connect 0, read 0, write 0, invalid 0\n"), std::string::npos)
      << r.output;
}

// A zero where a count or a time is needed is a mistake, said so (exit status 2) rather than
// quietly run as 1.
TEST(load_tester, rejects_a_zero_count_or_time) {
  echo_server server;
  ASSERT_TRUE(server.up());
  for (const char* option :
       { "--connections", "--threads", "--size", "--timeout-ms", "--max-seconds" }) {
    const run_result r = run_load({ "--port", server.port(), "--requests", "3", option, "0" });
    EXPECT_EQ(r.status, 2) << option << ": " << r.output;
    EXPECT_TRUE(r.result.empty()) << option << ": " << r.output;
  }
}

// --size 999999999999 would end in std::bad_alloc: a run whose echo buffers (connections x 2 x
// size) pass 1 GiB is refused before it starts, with a message and exit status 2. No server is
// needed: nothing connects.
TEST(load_tester, refuses_a_size_whose_echo_buffers_pass_the_limit) {
  const std::vector<std::vector<std::string>> runs = {
    { "--size", "999999999999" },                     // 100 connections, the default
    { "--connections", "2", "--size", "268435457" },  // 1 GiB and 4 bytes
    { "--connections", "1", "--size", "536870913" },  // 1 GiB and 2 bytes
  };
  const std::vector<std::string> messages = {
    "load_tester: --size 999999999999 with --connections 100 needs more than 1 GiB of echo "
    "buffers (connections x 2 x size)\n",
    "load_tester: --size 268435457 with --connections 2 needs more than 1 GiB of echo buffers "
    "(connections x 2 x size)\n",
    "load_tester: --size 536870913 with --connections 1 needs more than 1 GiB of echo buffers "
    "(connections x 2 x size)\n",
  };
  for (std::size_t i = 0; i < runs.size(); ++i) {
    std::vector<std::string> arguments = { CYAN_PROGRAM_LOAD_TESTER, "--port", "9", "--requests",
                                           "1" };
    arguments.insert(arguments.end(), runs[i].begin(), runs[i].end());
    child_process load(arguments, -1, false, true);
    const std::string output = load.read_all(20s);
    EXPECT_EQ(load.wait(10s), 2) << output;
    EXPECT_EQ(output, messages[i]);
  }
}

TEST(load_tester, no_server_counts_connect_failures_and_exits_non_zero) {
  std::string port;
  {
    echo_server gone;  // a port that was free a moment ago
    ASSERT_TRUE(gone.up());
    port = gone.port();
  }
  const run_result r = run_load({ "--port", port, "--connections", "5", "--requests", "10" });
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.result.at("requests"), 0) << r.output;
  EXPECT_EQ(r.result.at("errors"), 5) << r.output;
  EXPECT_NE(r.output.find("errors 5: connect 5, read 0, write 0, invalid 0\n"), std::string::npos)
      << r.output;
}

// A TCP server on 127.0.0.1 in this process: one thread per connection runs `serve` on the
// descriptor. Every wait is bounded; the destructor stops and joins everything.
class scripted_server {
 public:
  explicit scripted_server(std::function<void(int)> serve) : serve_(std::move(serve)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ::sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::socklen_t length = sizeof address;
    if (::bind(listener_, reinterpret_cast<::sockaddr*>(&address), length) != 0 ||
        ::listen(listener_, 64) != 0 ||
        ::getsockname(listener_, reinterpret_cast<::sockaddr*>(&address), &length) != 0) {
      ADD_FAILURE() << "cannot listen on 127.0.0.1";
      return;
    }
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~scripted_server() {
    stopping_ = true;
    if (acceptor_.joinable()) {
      acceptor_.join();
    }
    for (std::thread& connection : connections_) {
      connection.join();
    }
    ::close(listener_);
  }
  [[nodiscard]] std::string port() const { return std::to_string(port_); }
  [[nodiscard]] const std::atomic<bool>& stopping() const { return stopping_; }

  // Reads what is there (waiting up to 5 s, or until stopping); "" at end of stream.
  static std::string read_some(int fd, const std::atomic<bool>& stopping) {
    for (int waited = 0; waited < 50 && !stopping; ++waited) {
      ::pollfd ready{ fd, POLLIN, 0 };
      if (::poll(&ready, 1, 100) == 1) {
        char buffer[4096];
        const ::ssize_t n = ::read(fd, buffer, sizeof buffer);
        return n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : std::string();
      }
    }
    return {};
  }
  static void write_all(int fd, const std::string& text) {
    std::size_t done = 0;
    while (done < text.size()) {
      const ::ssize_t n = ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
      if (n <= 0) {
        return;
      }
      done += static_cast<std::size_t>(n);
    }
  }

 private:
  void accept_loop() {
    // At most 30 s and 1,000 connections.
    for (int round = 0; round < 300 && !stopping_ && connections_.size() < 1000; ++round) {
      ::pollfd ready{ listener_, POLLIN, 0 };
      if (::poll(&ready, 1, 100) != 1) {
        continue;
      }
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        connections_.emplace_back([this, fd] {
          serve_(fd);
          ::close(fd);
        });
      }
    }
  }

  std::function<void(int)> serve_;
  int listener_ = -1;
  unsigned port_ = 0;
  std::atomic<bool> stopping_{ false };
  std::thread acceptor_;
  std::vector<std::thread> connections_;
};

TEST(load_tester, an_echo_that_differs_is_counted_invalid) {
  std::atomic<bool> stop{ false };
  // Echoes every byte but turns the last one of each read into '#'.
  scripted_server server([&](int fd) {
    for (int i = 0; i < 1000; ++i) {
      std::string bytes = scripted_server::read_some(fd, stop);
      if (bytes.empty()) {
        return;
      }
      bytes.back() = '#';
      scripted_server::write_all(fd, bytes);
    }
  });
  const run_result r = run_load(
      { "--port", server.port(), "--connections", "3", "--requests", "10", "--size", "16" });
  stop = true;
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.result.at("requests"), 0) << r.output;
  EXPECT_EQ(r.result.at("errors"), 3) << r.output;
  EXPECT_NE(r.output.find("errors 3: connect 0, read 0, write 0, invalid 3\n"), std::string::npos)
      << r.output;
}

TEST(load_tester, a_server_that_closes_mid_echo_is_a_read_failure) {
  std::atomic<bool> stop{ false };
  scripted_server server(
      [&](int fd) { (void)scripted_server::read_some(fd, stop); });  // reads, then closes
  const run_result r =
      run_load({ "--port", server.port(), "--connections", "2", "--requests", "5" });
  stop = true;
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.result.at("errors"), 2) << r.output;
  EXPECT_NE(r.output.find("errors 2: connect 0, read 2, write 0, invalid 0\n"), std::string::npos)
      << r.output;
}

// Answers each GET (one per read: load_tester sends one request at a time) with `response`.
std::function<void(int)> http_answering(const std::string& response, std::atomic<bool>& stop,
                                        bool close_after) {
  return [&stop, response, close_after](int fd) {
    for (int i = 0; i < 10000; ++i) {
      if (scripted_server::read_some(fd, stop).empty()) {
        return;
      }
      scripted_server::write_all(fd, response);
      if (close_after) {
        return;
      }
    }
  };
}

TEST(load_tester, http_status_other_than2xx_is_counted_invalid) {
  std::atomic<bool> stop{ false };
  scripted_server server(http_answering(
      "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\n\r\noops!", stop, false));
  const run_result r = run_load(
      { "--mode", "http", "--port", server.port(), "--connections", "4", "--requests", "10" });
  stop = true;
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.result.at("requests"), 0) << r.output;
  EXPECT_NE(r.output.find("errors 4: connect 0, read 0, write 0, invalid 4\n"), std::string::npos)
      << r.output;
}

TEST(load_tester, http_server_that_closes_after_each_response_gets_a_new_connection) {
  std::atomic<bool> stop{ false };
  scripted_server server(http_answering(
      "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", stop, true));
  const run_result r = run_load(
      { "--mode", "http", "--port", server.port(), "--connections", "3", "--requests", "7" });
  stop = true;
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.result.at("requests"), 21) << r.output;
  EXPECT_EQ(r.result.at("errors"), 0) << r.output;
}

TEST(load_tester, http_keep_alive_counts_exactly) {
  std::atomic<bool> stop{ false };
  scripted_server server(
      http_answering("HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world", stop, false));
  const run_result r = run_load(
      { "--mode", "http", "--port", server.port(), "--connections", "5", "--requests", "40" });
  stop = true;
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.result.at("requests"), 200) << r.output;
  EXPECT_EQ(r.result.at("errors"), 0) << r.output;
}

}  // namespace
