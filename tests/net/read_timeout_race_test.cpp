// A read whose data and deadline arrive together, 1,000 times: whichever wins, no byte is lost
// or read twice. The writer sends one byte per round, each the round's number (mod 251), a
// millisecond apart; the reader reads with a 1 ms deadline, so most rounds race the data
// against the deadline (on io_uring: the completion against the cancellation). Every byte the
// reader got, in order, then every byte left once the writer ended, must be exactly the bytes
// sent.

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <system_error>
#include <vector>

#include "cyan/dispatch.h"
#include "cyan/net.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::net::endpoint;
using cyan::net::tcp_listener;
using cyan::net::tcp_socket;

constexpr int kRounds = 1000;

std::byte byte_of(int round) {
  return static_cast<std::byte>(round % 251);
}

struct read_outcome {
  std::vector<std::byte> bytes;  // every byte read, in order
  int timeouts = 0;
};

TEST(read_timeout_race, every_byte_arrives_exactly_once_whichever_wins) {
  handler_thread reader_thread;
  handler_thread writer_thread;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  const endpoint address = listener.local_endpoint();
  auto reading = co_spawn(reader_thread, [&]() -> task<read_outcome> {
    tcp_socket connection = co_await listener.accept(5s);
    read_outcome outcome;
    std::byte buffer[4];
    for (int round = 0; round < kRounds; ++round) {
      try {
        const std::size_t n = co_await connection.read_some(buffer, 1ms);
        outcome.bytes.insert(outcome.bytes.end(), buffer, buffer + n);
      } catch (const std::system_error& e) {
        EXPECT_EQ(e.code(), std::errc::timed_out) << "round " << round;
        ++outcome.timeouts;
      }
    }
    for (;;) {  // the rest, until the writer's end of stream (bounded: kRounds bytes in all)
      const std::size_t n = co_await connection.read_some(buffer, 5s);
      if (n == 0) {
        break;
      }
      outcome.bytes.insert(outcome.bytes.end(), buffer, buffer + n);
    }
    co_return outcome;
  });
  co_spawn(writer_thread, [&]() -> task<> {
    tcp_socket s = co_await tcp_socket::connect(address, 5s);
    s.set_nodelay();
    for (int round = 0; round < kRounds; ++round) {
      const std::byte one[1] = { byte_of(round) };
      co_await s.write_all(std::span<const std::byte>(one), 5s);
      co_await cyan::dispatch::sleep_for(1ms);
    }
    s.shutdown_send();
  }).get();
  const read_outcome outcome = reading.get();
  ASSERT_EQ(outcome.bytes.size(), static_cast<std::size_t>(kRounds));
  for (int round = 0; round < kRounds; ++round) {
    ASSERT_EQ(outcome.bytes[round], byte_of(round)) << "byte " << round;
  }
  // Both ends happened: the race was run, not avoided.
  EXPECT_GT(outcome.timeouts, 0);
}

}  // namespace
