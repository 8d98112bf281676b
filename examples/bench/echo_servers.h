#pragma once

// The echo servers the network benchmarks compare, each a child process that stays up while the
// arms alternate, and one load_tester run against one of them. Shared by echo_benchmark and
// echo_crossover_benchmark. The arms:
//   cyan echo_server          echo_server on its default network backend (CYAN_NET_BACKEND=auto
//                             in its environment: io_uring where a ring can be set up);
//   cyan echo_server (epoll)  the same program with CYAN_NET_BACKEND=epoll, the fallback path;
//   Boost.Asio coroutines     an idiomatic Asio C++20-coroutine server (peers/asio_echo_server)
//                             on Asio's default epoll reactor;
//   Boost.Asio (io_uring)     the same source built with BOOST_ASIO_HAS_IO_URING and
//                             BOOST_ASIO_DISABLE_EPOLL (asio_uring_echo_server);
//   raw epoll (floor)         an edge-triggered epoll server (peers/epoll_echo_server);
//   raw io_uring (floor)      a liburing server with multishot accept and receive and a provided
//                             buffer ring (peers/uring_echo_server).

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/harness.h"
#include "bench/process.h"

namespace cyan::bench {

inline constexpr const char* kCyanEcho = "cyan echo_server";
inline constexpr const char* kCyanEchoEpoll = "cyan echo_server (epoll)";
inline constexpr const char* kAsioEcho = "Boost.Asio coroutines";
inline constexpr const char* kAsioUringEcho = "Boost.Asio (io_uring)";
inline constexpr const char* kEpollFloorEcho = "raw epoll (floor)";
inline constexpr const char* kUringFloorEcho = "raw io_uring (floor)";

/// One running echo server: its arm's name, its process and the port it listens on.
struct echo_server {
  std::string arm;
  std::unique_ptr<child_process> process;
  unsigned port = 0;
};

/// Starts the six servers above, cyan's default first (the harness's reference), each with
/// `threads` threads on CPU `cpu` (any CPU when negative). Throws std::runtime_error when one
/// does not print its listening line.
[[nodiscard]] std::vector<echo_server> start_echo_servers(unsigned threads, int cpu);

/// What one load_tester run measured: the server's CPU seconds and the load's wall seconds for
/// the whole run, the messages echoed (the checksum) and the latency percentiles. All zero when
/// the run failed or reported an error (said on stderr).
struct load_result {
  double server_cpu = 0;
  double wall = 0;
  std::uint64_t messages = 0;
  double p50_us = 0;
  double p99_us = 0;
};

/// One shape of echo load: `connections` connections, each echoing `requests` messages of
/// `size` bytes one after another.
struct echo_load {
  unsigned connections = 0;
  std::size_t size = 0;
  std::uint64_t requests = 0;
};

/// Runs load_tester (on CPU `cpu`, any when negative) against `target` once. The server's CPU
/// time is read once load_tester has exited and the server has gone idle, so that the closing
/// of this run's connections counts in this run.
[[nodiscard]] load_result run_echo_load(echo_server& target, const echo_load& load, int cpu);

/// Each arm's figures per sample, besides the suite's (which holds the server's CPU seconds).
struct echo_figures {
  std::vector<double> cpu_per_message_us;
  std::vector<double> rate;  // messages per second
  std::vector<double> p50_us;
  std::vector<double> p99_us;
};

/// Adds one arm per server to `cpu`, in the servers' order: a sample is one run_echo_load() of
/// `load` with the load on CPU `load_cpu`, its time the server's CPU seconds, its checksum the
/// messages echoed (the same for every arm, so the CPU seconds compare as CPU per message).
/// Each sample's other figures go to `figures[arm]`. `servers` and `figures` must outlive
/// cpu.run().
void add_echo_arms(suite& cpu, std::vector<echo_server>& servers, const echo_load& load,
                   int load_cpu, std::map<std::string, echo_figures>& figures);

/// Stops every server (SIGTERM); false, said on stderr, when one did not exit 0.
[[nodiscard]] bool stop_echo_servers(std::vector<echo_server>& servers);

/// The median of `values` (the upper one of an even count, as echo_benchmark always printed);
/// 0 when empty.
[[nodiscard]] double median_or_zero(std::vector<double> values);

}  // namespace cyan::bench
