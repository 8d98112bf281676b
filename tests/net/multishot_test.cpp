// The io_uring backend's multishot receive under stream reads (net/detail/multishot_receive.h):
// a socket whose reads keep waiting switches to it, and every byte still arrives exactly once,
// in order, through timeouts, stop requests, close(), destruction, release() and adopt(), a
// slow reader and a thread whose provided buffers run dry. On the epoll backend the same tests
// run the readiness path (and check that no socket claims a multishot receive).

#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <span>
#include <stop_token>
#include <system_error>
#include <utility>
#include <vector>

#include "cyan/dispatch.h"
#include "cyan/event/detail/ring.h"
#include "cyan/net.h"
#include "net/net_support.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::sleep_for;
using cyan::dispatch::task;
using cyan::event::detail::buffer_ring;
using cyan::event::detail::ring;
using cyan::net::endpoint;
using cyan::net::tcp_listener;
using cyan::net::tcp_socket;
using cyan::net::detail::core_of;
using cyan::net::detail::multishot_receive;
using cyan::test::first_mismatch;
using cyan::test::pattern;

constexpr std::size_t kMessage = 64;
// Request/response rounds that make a socket's reads wait: two are enough to switch.
constexpr int kSwitchRounds = 8;

bool on_io_uring() {
  return cyan::net::current_backend() == cyan::net::backend::io_uring;
}

// Whether the calling thread's reads went through a multishot receive: on io_uring (a kernel
// that has them) a socket whose reads waited must have switched; on epoll none does.
void expect_switched(const tcp_socket& socket) {
  EXPECT_EQ(core_of(socket)->reading_multishot(), on_io_uring());
}

// Every provided buffer of the calling thread is back in its pool.
void expect_buffers_back() {
  if (ring* r = ring::this_thread_if_set_up(); r != nullptr && r->provided_buffers() != nullptr) {
    EXPECT_EQ(r->provided_buffers()->available(), buffer_ring::kCount);
  }
}

// The reader's side of `rounds` request/response rounds of kMessage bytes (each the pattern of
// its round): reads the request exactly, checks it and echoes it.
task<> answer_rounds(tcp_socket& s, int rounds, std::uint32_t seed) {
  std::vector<std::byte> request(kMessage);
  for (int round = 0; round < rounds; ++round) {
    co_await s.read_exact(request, 5s);
    const std::uint32_t expected_seed = seed + static_cast<std::uint32_t>(round);
    EXPECT_EQ(first_mismatch(expected_seed, request), kMessage) << "round " << round;
    co_await s.write_all(std::span<const std::byte>(request), 5s);
  }
}

// The peer's side: sends each round's request and reads its echo, byte-exact. A pause before
// each request makes sure the reader's read waits for it, whatever the load on the machine.
task<> ask_rounds(tcp_socket& s, int rounds, std::uint32_t seed,
                  std::chrono::milliseconds pause = 2ms) {
  std::vector<std::byte> echo(kMessage);
  for (int round = 0; round < rounds; ++round) {
    if (pause > 0ms) {
      co_await sleep_for(pause);
    }
    const std::uint32_t round_seed = seed + static_cast<std::uint32_t>(round);
    co_await s.write_all(std::span<const std::byte>(pattern(round_seed, kMessage)), 5s);
    co_await s.read_exact(echo, 5s);
    EXPECT_EQ(first_mismatch(round_seed, echo), kMessage) << "round " << round;
  }
}

// A connected pair: `server` accepted on the reader's thread, `client` on the peer's.
struct connected_pair {
  handler_thread reader_thread;
  handler_thread peer_thread;
  tcp_listener listener = tcp_listener::bind(endpoint::loopback_v4());
};

TEST(multishot, two_thousand_ping_pong_rounds_switch_the_reader_and_keep_every_byte) {
  connected_pair pair;
  constexpr int kRounds = 2000;
  auto reader = co_spawn(pair.reader_thread, [&]() -> task<bool> {
    tcp_socket s = co_await pair.listener.accept(5s);
    s.set_nodelay();
    co_await answer_rounds(s, kRounds - 1, 1);
    // Before the last round: after it the peer closes, which ends the receive.
    const bool switched = core_of(s)->reading_multishot();
    EXPECT_EQ(switched, on_io_uring()) << "the reads waited every round";
    co_await answer_rounds(s, 1, kRounds);
    s.close();
    expect_buffers_back();
    co_return switched;
  });
  co_spawn(pair.peer_thread, [&]() -> task<> {
    tcp_socket s = co_await tcp_socket::connect(pair.listener.local_endpoint(), 5s);
    s.set_nodelay();
    co_await ask_rounds(s, kRounds, 1, 0ms);  // request/response as fast as it goes
  }).get();
  (void)reader.get();
}

TEST(multishot, a_slow_reader_of_a_mebibyte_in_100_byte_reads_gets_it_all_within_the_bound) {
  connected_pair pair;
  constexpr std::size_t kTotal = 1 << 20;
  auto reader = co_spawn(pair.reader_thread, [&]() -> task<std::size_t> {
    tcp_socket s = co_await pair.listener.accept(5s);
    co_await answer_rounds(s, kSwitchRounds, 7);
    expect_switched(s);
    std::vector<std::byte> received;
    received.reserve(kTotal);
    std::byte piece[100];
    constexpr std::size_t kBound = multishot_receive::kHoldBuffers * buffer_ring::kSize;
    int bursts = 0;  // times the hold went over the bound
    bool over_bound = false;
    for (std::size_t reads = 0; received.size() < kTotal; ++reads) {
      const std::size_t n = co_await s.read_some(piece, 5s);
      EXPECT_GT(n, 0u) << "end of stream before the last byte";
      if (n == 0) {
        break;
      }
      received.insert(received.end(), piece, piece + n);
      const std::size_t held = core_of(s)->multishot_held_bytes();
      bursts += held > kBound && !over_bound ? 1 : 0;
      over_bound = held > kBound;
      if (reads % 256 == 0) {
        co_await sleep_for(1ms);  // slow: the sender fills the hold meanwhile
      }
    }
    EXPECT_EQ(received.size(), kTotal);
    EXPECT_EQ(first_mismatch(99, received), received.size());
    // Over the bound at most once: the batch the kernel fills before the cancellation lands;
    // the socket then reads into the span, and holds nothing more.
    EXPECT_LE(bursts, 1);
    EXPECT_FALSE(core_of(s)->reading_multishot()) << "a bulk reader goes back to single-shot";
    s.close();
    expect_buffers_back();
    co_return received.size();
  });
  co_spawn(pair.peer_thread, [&]() -> task<> {
    tcp_socket s = co_await tcp_socket::connect(pair.listener.local_endpoint(), 5s);
    co_await ask_rounds(s, kSwitchRounds, 7);
    co_await s.write_all(std::span<const std::byte>(pattern(99, kTotal)), 20s);
    std::byte end[1];
    EXPECT_EQ(co_await s.read_some(end, 20s), 0u);  // the reader closed after the last byte
  }).get();
  EXPECT_EQ(reader.get(), kTotal);
}

// The reader asks for the late bytes with one byte of its own once its read timed out (or was
// stopped), so they arrive while nothing reads, and must be held for the next read.
task<> send_late_bytes(tcp_listener& listener, int rounds) {
  tcp_socket s = co_await tcp_socket::connect(listener.local_endpoint(), 5s);
  co_await ask_rounds(s, rounds, 11);
  std::byte go[1];
  EXPECT_EQ(co_await s.read_some(go, 5s), 1u);
  co_await s.write_all(std::span<const std::byte>(pattern(12, 3000)), 5s);
  EXPECT_EQ(co_await s.read_some(go, 5s), 0u);
}

// After a read that ended without its bytes (a timeout, a stop): asks send_late_bytes' peer for
// them, lets them arrive while no read waits, and finds them whole in the next read; then the
// socket closes and the thread's buffers are all back.
task<> late_bytes_are_the_next_read(tcp_socket& s, std::span<std::byte> buffer) {
  const std::byte go[1] = { std::byte{ 1 } };
  co_await s.write_all(std::span<const std::byte>(go), 5s);
  co_await sleep_for(50ms);  // the bytes come while no read waits
  co_await s.read_exact(buffer, 5s);
  EXPECT_EQ(first_mismatch(12, buffer), buffer.size());
  s.close();
  expect_buffers_back();
}

TEST(multishot, bytes_arriving_after_a_read_timed_out_are_the_next_reads) {
  connected_pair pair;
  auto reader = co_spawn(pair.reader_thread, [&]() -> task<> {
    tcp_socket s = co_await pair.listener.accept(5s);
    co_await answer_rounds(s, kSwitchRounds, 11);
    expect_switched(s);
    std::byte buffer[3000];
    EXPECT_EQ(co_await cyan::test::failure_of(s.read_some(buffer, 20ms)), std::errc::timed_out);
    co_await late_bytes_are_the_next_read(s, buffer);
  });
  co_spawn(pair.peer_thread, [&]() { return send_late_bytes(pair.listener, kSwitchRounds); }).get();
  reader.get();
}

TEST(multishot, bytes_arriving_after_a_read_was_stopped_are_the_next_reads) {
  connected_pair pair;
  auto reader = co_spawn(pair.reader_thread, [&]() -> task<> {
    tcp_socket s = co_await pair.listener.accept(5s);
    co_await answer_rounds(s, kSwitchRounds, 11);
    expect_switched(s);
    std::byte buffer[3000];
    std::stop_source stop;
    auto stopped = co_spawn(
        pair.reader_thread,
        [&]() -> task<std::error_code> {
          co_return co_await cyan::test::failure_of(s.read_some(buffer));
        },
        stop.get_token());
    co_await sleep_for(20ms);
    stop.request_stop();
    EXPECT_EQ(co_await stopped, std::errc::operation_canceled);
    co_await late_bytes_are_the_next_read(s, buffer);
  });
  co_spawn(pair.peer_thread, [&]() { return send_late_bytes(pair.listener, kSwitchRounds); }).get();
  reader.get();
}

TEST(multishot, close_with_bytes_held_and_the_receive_armed_gives_the_buffers_back) {
  connected_pair pair;
  auto reader = co_spawn(pair.reader_thread, [&]() -> task<> {
    tcp_socket s = co_await pair.listener.accept(5s);
    co_await answer_rounds(s, kSwitchRounds, 21);
    expect_switched(s);
    std::byte one[1];
    EXPECT_EQ(co_await s.read_some(one, 5s), 1u);
    co_await sleep_for(30ms);  // the rest of the 3 x 1000 bytes is held
    expect_switched(s);
    EXPECT_GT(core_of(s)->multishot_held_bytes() + (on_io_uring() ? 0 : 1), 0u);
    s.close();
    expect_buffers_back();
  });
  co_spawn(pair.peer_thread, [&]() -> task<> {
    tcp_socket s = co_await tcp_socket::connect(pair.listener.local_endpoint(), 5s);
    co_await ask_rounds(s, kSwitchRounds, 21);
    for (int i = 0; i < 3; ++i) {
      co_await s.write_all(std::span<const std::byte>(pattern(22, 1000)), 5s);
    }
    std::byte end[1];
    (void)co_await cyan::test::failure_of(
        s.read_some(end, 5s));  // end of stream, or a reset (bytes unread)
  }).get();
  reader.get();
}

TEST(multishot, a_socket_destroyed_with_its_receive_armed_leaves_nothing_for_a_late_completion) {
  connected_pair pair;
  std::atomic<bool> destroyed{ false };
  auto reader = co_spawn(pair.reader_thread, [&]() -> task<> {
    {
      tcp_socket s = co_await pair.listener.accept(5s);
      co_await answer_rounds(s, kSwitchRounds, 31);
      expect_switched(s);
    }  // destroyed here, its multishot receive armed
    destroyed = true;
    co_await sleep_for(50ms);  // the peer writes now: a completion would come to freed memory
    expect_buffers_back();
    // The thread's ring still works.
    tcp_socket again = co_await pair.listener.accept(5s);
    std::byte bytes[5];
    co_await again.read_exact(bytes, 5s);
    EXPECT_EQ(first_mismatch(32, bytes), sizeof bytes);
  });
  co_spawn(pair.peer_thread, [&]() -> task<> {
    tcp_socket s = co_await tcp_socket::connect(pair.listener.local_endpoint(), 5s);
    co_await ask_rounds(s, kSwitchRounds, 31);
    while (!destroyed) {
      co_await sleep_for(1ms);
    }
    (void)co_await cyan::test::failure_of(
        s.write_all(std::span<const std::byte>(pattern(33, 100)), 5s));
    tcp_socket other = co_await tcp_socket::connect(pair.listener.local_endpoint(), 5s);
    co_await other.write_all(std::span<const std::byte>(pattern(32, 5)), 5s);
  }).get();
  reader.get();
}

// Destroyed on the main thread, the socket cannot cancel its receive on its ring: its close is
// handed to the ring's thread, which ends the receive there (its buffers given back, nothing of
// it left in flight) before it closes the descriptor, whose end of stream the peer then reads:
// once the peer has read it, the reader's thread has nothing left of the receive.
TEST(multishot, a_socket_destroyed_on_another_thread_hands_its_receive_to_its_ring) {
  connected_pair pair;
  auto accepted = co_spawn(pair.reader_thread, [&]() -> task<tcp_socket> {
    tcp_socket s = co_await pair.listener.accept(5s);
    co_await answer_rounds(s, kSwitchRounds, 61);
    expect_switched(s);
    co_return s;
  });
  auto peer = co_spawn(pair.peer_thread, [&]() -> task<std::size_t> {
    tcp_socket s = co_await tcp_socket::connect(pair.listener.local_endpoint(), 5s);
    co_await ask_rounds(s, kSwitchRounds, 61);
    std::byte end[1];
    co_return co_await s.read_some(end, 5s);
  });
  {
    tcp_socket s = accepted.get();
    EXPECT_TRUE(s.is_open());
  }  // destroyed here, on the main thread, its receive armed
  EXPECT_EQ(peer.get(), 0u) << "the peer reads end of stream";
  co_spawn(pair.reader_thread, []() -> task<> {
    if (const ring* r = ring::this_thread_if_set_up(); r != nullptr) {
      EXPECT_EQ(r->in_flight(), 0u) << "the receive is still in flight";
    }
    expect_buffers_back();
    co_return;
  }).get();
}

// The same as an example program does it (echo_client: the socket outlives its thread's last
// task and is destroyed on the main thread just before the thread ends): the close handed to
// the thread runs in its finish, which ends the receive while the ring is whole. The ASan
// lane's leak check catches a receive left behind.
TEST(multishot, a_receive_handed_to_a_ring_that_ends_at_once_is_freed_with_the_ring) {
  auto reader_thread = std::make_unique<handler_thread>();
  handler_thread peer_thread;
  tcp_listener listener = tcp_listener::bind(endpoint::loopback_v4());
  auto accepted = co_spawn(*reader_thread, [&]() -> task<tcp_socket> {
    tcp_socket s = co_await listener.accept(5s);
    co_await answer_rounds(s, kSwitchRounds, 71);
    expect_switched(s);
    co_return s;
  });
  auto peer = co_spawn(peer_thread, [&]() -> task<std::size_t> {
    tcp_socket s = co_await tcp_socket::connect(listener.local_endpoint(), 5s);
    co_await ask_rounds(s, kSwitchRounds, 71);
    std::byte end[1];
    co_return co_await s.read_some(end, 5s);
  });
  {
    tcp_socket s = accepted.get();
    EXPECT_TRUE(s.is_open());
  }                       // destroyed on the main thread, its receive armed
  reader_thread.reset();  // at once: the receive's last completion may not have come
  EXPECT_EQ(peer.get(), 0u) << "the peer reads end of stream";
}

TEST(multishot, release_and_adopt_on_another_thread_keep_the_bytes_held) {
  connected_pair pair;
  handler_thread worker;
  constexpr std::size_t kSent = 3000;
  auto reader = co_spawn(pair.reader_thread, [&]() -> task<std::vector<std::byte>> {
    tcp_socket s = co_await pair.listener.accept(5s);
    co_await answer_rounds(s, kSwitchRounds, 41);
    expect_switched(s);
    std::vector<std::byte> first(10);
    co_await s.read_exact(first, 5s);
    co_await sleep_for(30ms);  // the rest arrives and is held
    cyan::net::socket_handle handle = s.release();
    expect_buffers_back();
    std::vector<std::byte> rest(kSent - 10);
    co_await co_spawn(worker, [&rest, &handle]() -> task<> {  // this frame waits for it
      tcp_socket adopted = tcp_socket::adopt(std::move(handle));
      co_await adopted.read_exact(rest, 5s);
      std::byte end[1];
      EXPECT_EQ(co_await adopted.read_some(end, 5s), 0u);
    });
    first.insert(first.end(), rest.begin(), rest.end());
    co_return first;
  });
  co_spawn(pair.peer_thread, [&]() -> task<> {
    tcp_socket s = co_await tcp_socket::connect(pair.listener.local_endpoint(), 5s);
    co_await ask_rounds(s, kSwitchRounds, 41);
    co_await sleep_for(20ms);  // the reader checks the switch before the end ends its receive
    for (std::size_t at = 0; at < kSent; at += 1000) {
      co_await s.write_all(std::span<const std::byte>(pattern(42, 1000, at)), 5s);
    }
    s.shutdown_send();
    std::byte end[1];
    (void)co_await cyan::test::failure_of(s.read_some(end, 5s));
  }).get();
  const std::vector<std::byte> bytes = reader.get();
  ASSERT_EQ(bytes.size(), kSent);
  EXPECT_EQ(first_mismatch(42, bytes), kSent);
}

TEST(multishot, a_peer_that_closes_after_sending_gives_the_bytes_then_end_of_stream) {
  connected_pair pair;
  constexpr std::size_t kSent = 5000;
  auto reader = co_spawn(pair.reader_thread, [&]() -> task<std::vector<std::byte>> {
    tcp_socket s = co_await pair.listener.accept(5s);
    co_await answer_rounds(s, kSwitchRounds, 51);
    expect_switched(s);
    co_await sleep_for(50ms);  // the bytes and the end are held
    std::vector<std::byte> received;
    std::byte piece[1000];
    for (;;) {
      const std::size_t n = co_await s.read_some(piece, 5s);
      if (n == 0) {
        break;
      }
      received.insert(received.end(), piece, piece + n);
    }
    EXPECT_EQ(co_await s.read_some(piece, 5s), 0u) << "the end of stream stays";
    s.close();
    expect_buffers_back();
    co_return received;
  });
  co_spawn(pair.peer_thread, [&]() -> task<> {
    tcp_socket s = co_await tcp_socket::connect(pair.listener.local_endpoint(), 5s);
    co_await ask_rounds(s, kSwitchRounds, 51);
    co_await sleep_for(20ms);  // the reader checks the switch before the end ends its receive
    co_await s.write_all(std::span<const std::byte>(pattern(52, kSent)), 5s);
  }).get();  // the socket closes here
  const std::vector<std::byte> bytes = reader.get();
  ASSERT_EQ(bytes.size(), kSent);
  EXPECT_EQ(first_mismatch(52, bytes), kSent);
}

// A reset whose completion the reader's thread reaps in the same batch as another operation's,
// which runs first and starts the next read on the reset socket. The receive's last completion
// (ECONNRESET, which takes the socket's error) has been reaped but not run: arming the receive
// again then would have the kernel answer the new one with end of stream, and the reset read
// as a clean end. The reader's thread is held on a job while both arrive, so that one reap
// takes them, in that order.
TEST(multishot, a_reset_reaped_behind_a_completion_that_starts_the_next_read_is_a_reset) {
  connected_pair pair;
  std::promise<void> reading_other;
  auto reader = co_spawn(pair.reader_thread, [&]() -> task<std::error_code> {
    tcp_socket s = co_await pair.listener.accept(5s);
    tcp_socket other = co_await pair.listener.accept(5s);
    co_await answer_rounds(s, kSwitchRounds, 61);
    expect_switched(s);  // and its receive stays armed
    std::byte one[1];
    reading_other.set_value();  // the job posted after this runs once the read suspended
    co_await other.read_exact(one, 5s);
    std::vector<std::byte> request(kMessage);
    const std::error_code failure = co_await cyan::test::failure_of(s.read_exact(request, 5s));
    s.close();
    other.close();
    expect_buffers_back();
    co_return failure;
  });
  // The peer's two ends, as bare descriptors once the rounds are done.
  const auto [reset_fd, other_fd] =
      co_spawn(pair.peer_thread, [&]() -> task<std::pair<int, int>> {
        tcp_socket s = co_await tcp_socket::connect(pair.listener.local_endpoint(), 5s);
        tcp_socket other = co_await tcp_socket::connect(pair.listener.local_endpoint(), 5s);
        co_await ask_rounds(s, kSwitchRounds, 61);
        co_return std::pair{ s.release().release(), other.release().release() };
      }).get();
  ASSERT_EQ(reading_other.get_future().wait_for(5s), std::future_status::ready);
  // Hold the reader's thread while the byte and the reset arrive.
  std::promise<void> parked;
  std::promise<void> release;
  pair.reader_thread.post([&parked, held = release.get_future()] {
    parked.set_value();
    held.wait_for(5s);
  });
  ASSERT_EQ(parked.get_future().wait_for(5s), std::future_status::ready);
  const char byte = 'x';
  ASSERT_EQ(::send(other_fd, &byte, 1, MSG_NOSIGNAL), 1);
  const ::linger abort{ 1, 0 };
  ::setsockopt(reset_fd, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
  ::close(reset_fd);
  release.set_value();
  EXPECT_EQ(reader.get(), std::make_error_code(std::errc::connection_reset));
  ::close(other_fd);
}

// 300 sockets that each switched, then each receive 64 KiB while nothing reads: together they
// want more buffers than the thread has (ENOBUFS ends receives, reads fall back to single-shot
// receives). Every byte must still arrive, within the time limits of the reads.
TEST(multishot, three_hundred_sockets_running_the_buffers_dry_still_get_every_byte) {
  connected_pair pair;
  constexpr int kSockets = 300;
  constexpr std::size_t kEach = 64 * 1024;
  std::atomic<int> written{ 0 };
  auto serving = co_spawn(pair.reader_thread, [&]() -> task<int> {
    cyan::dispatch::async_scope scope;
    std::atomic<int> exact{ 0 };
    for (int i = 0; i < kSockets; ++i) {
      tcp_socket s = co_await pair.listener.accept(10s);
      scope.spawn(pair.reader_thread, [&, i, connection = std::move(s)]() mutable -> task<> {
        const auto seed = static_cast<std::uint32_t>(1000 + i);
        co_await answer_rounds(connection, 3, seed);
        while (written.load() < kSockets) {
          co_await sleep_for(5ms);  // nothing reads while the peers write
        }
        std::vector<std::byte> bytes(kEach);
        co_await connection.read_exact(bytes, 20s);
        if (first_mismatch(seed + 500, bytes) == kEach) {
          exact.fetch_add(1);
        }
      });
    }
    co_await scope.join();
    expect_buffers_back();
    co_return exact.load();
  });
  co_spawn(pair.peer_thread, [&]() -> task<> {
    cyan::dispatch::async_scope scope;
    for (int i = 0; i < kSockets; ++i) {
      scope.spawn(pair.peer_thread, [&, i]() -> task<> {
        const auto seed = static_cast<std::uint32_t>(1000 + i);
        tcp_socket s = co_await tcp_socket::connect(pair.listener.local_endpoint(), 10s);
        co_await ask_rounds(s, 3, seed);
        co_await s.write_all(std::span<const std::byte>(pattern(seed + 500, kEach)), 20s);
        written.fetch_add(1);
        std::byte end[1];
        (void)co_await cyan::test::failure_of(s.read_some(end, 20s));
      });
    }
    co_await scope.join();
  }).get();
  EXPECT_EQ(serving.get(), kSockets);
}

}  // namespace
