// Which threads a socket's operations may run on, and what happens to a socket wait whose
// thread finishes first:
// - an operation in a task on a thread_pool (a pool task resumes on any worker, a socket is one
//   thread's) throws std::logic_error before it does anything;
// - a task that hopped to a handler thread and waits there on a socket is destroyed when that
//   thread finishes (its spawn executor's stop(drain) does not wait for it for ever), and
//   nothing touches freed memory, also when a stop request races the finish;
// - an idle socket closed or destroyed on another thread (a handler thread, main, a plain
//   std::thread) is closed by its own thread, its descriptor open until then, or at once where it
//   is dropped when its thread has finished.

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "cyan/dispatch.h"
#include "cyan/net.h"
#include "net/net_support.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::async_scope;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::dispatch::thread_pool;
using cyan::net::endpoint;
using cyan::net::tcp_listener;
using cyan::net::tcp_socket;
using cyan::net::udp_socket;
using cyan::test::failure_of;
using cyan::test::frame_sentinel;
using cyan::test::run_on;

// "refused" when awaiting `operation` throws std::logic_error, else "ran". Await it in the full
// expression that makes the operation (the parameter is a reference to it).
template <typename Awaitable>
task<std::string> refusal_of(Awaitable&& operation) {
  try {
    (void)co_await operation;  // as an lvalue: GCC 12 would copy an xvalue awaiter
  } catch (const std::logic_error&) {
    co_return "refused";
  }
  co_return "ran";
}

TEST(socket_threads, every_operation_in_a_thread_pool_task_throws_before_doing_anything) {
  thread_pool pool(2);
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  const endpoint address = listener.local_endpoint();

  // connect(): no connection reaches the listener.
  EXPECT_EQ(co_spawn(pool,
                     [&]() -> task<std::string> {
                       co_return co_await refusal_of(tcp_socket::connect(address, 5s));
                     })
                .get(),
            "refused");
  EXPECT_EQ(run_on(h,
                   [&]() -> task<std::error_code> {
                     co_return co_await failure_of(listener.accept(50ms));
                   }),
            std::errc::timed_out);

  // accept(): the waiting connection is left for the listener's own thread.
  tcp_socket client =
      run_on(h, [&]() -> task<tcp_socket> { co_return co_await tcp_socket::connect(address, 5s); });
  EXPECT_EQ(
      co_spawn(pool,
               [&]() -> task<std::string> { co_return co_await refusal_of(listener.accept(5s)); })
          .get(),
      "refused");
  tcp_socket server =
      run_on(h, [&]() -> task<tcp_socket> { co_return co_await listener.accept(5s); });
  EXPECT_EQ(server.remote_endpoint(), client.local_endpoint());

  // write_all() sends nothing; read_some() takes nothing.
  EXPECT_EQ(co_spawn(pool,
                     [&]() -> task<std::string> {
                       co_return co_await refusal_of(client.write_all(cyan::net::buffer("x")));
                     })
                .get(),
            "refused");
  std::byte byte[1];
  EXPECT_EQ(run_on(h,
                   [&]() -> task<std::error_code> {
                     co_return co_await failure_of(server.read_some(byte, 50ms));
                   }),
            std::errc::timed_out);
  run_on(h, [&]() -> task<> { co_await client.write_all(cyan::net::buffer("y"), 5s); });
  EXPECT_EQ(co_spawn(pool,
                     [&]() -> task<std::string> {
                       co_return co_await refusal_of(server.read_some(byte));
                     })
                .get(),
            "refused");
  EXPECT_EQ(
      run_on(h, [&]() -> task<std::size_t> { co_return co_await server.read_some(byte, 5s); }), 1u);
  EXPECT_EQ(byte[0], std::byte{ 'y' });

  // UDP: send_to() sends nothing.
  udp_socket receiver = udp_socket::bind(endpoint::loopback_v4());
  udp_socket sender = udp_socket::bind(endpoint::loopback_v4());
  const endpoint receiver_address = receiver.local_endpoint();
  EXPECT_EQ(co_spawn(pool,
                     [&]() -> task<std::string> {
                       co_return co_await refusal_of(
                           sender.send_to(cyan::net::buffer("d"), receiver_address));
                     })
                .get(),
            "refused");
  EXPECT_EQ(run_on(h,
                   [&]() -> task<std::error_code> {
                     co_return co_await failure_of(receiver.receive_from(byte, 50ms));
                   }),
            std::errc::timed_out);
  run_on(h, [&]() -> task<> {  // on their thread: closed at once, not in its next round
    client.close();
    server.close();
    receiver = udp_socket();
    co_return;
  });
}

TEST(socket_threads, a_task_on_the_global_pool_is_refused_too) {
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  const endpoint address = listener.local_endpoint();
  EXPECT_EQ(co_spawn([&]() -> task<std::string> {
              co_return co_await refusal_of(tcp_socket::connect(address, 5s));
            }).get(),
            "refused");
}

// ---- a socket closed on another thread ----

// A connection whose client end was made and used in a task on `home` that has ended: the
// client sent "ping", the server end (accepted on `server`) answered "pong" and shut its
// sending side, so that `home`'s loop sees the idle client readable (libev then takes the
// descriptor out of its epoll set in a later turn: an epoll_ctl() of its own).
class idle_connection {
 public:
  idle_connection(handler_thread& home, handler_thread& server, tcp_listener& listener)
      : server_(server) {
    auto accepted = co_spawn(server, [&listener]() -> task<tcp_socket> {
      tcp_socket s = co_await listener.accept(5s);
      std::byte ping[4];
      co_await s.read_exact(ping, 5s);
      co_await s.write_all(cyan::net::buffer("pong"), 5s);
      s.shutdown_send();
      co_return s;
    });
    client = run_on(home, [&listener]() -> task<tcp_socket> {
      tcp_socket s = co_await tcp_socket::connect(listener.local_endpoint(), 5s);
      co_await s.write_all(cyan::net::buffer("ping"), 5s);
      std::byte pong[4];
      co_await s.read_exact(pong, 5s);
      co_return s;
    });
    server_end_ = accepted.get();
    client_fd = client.native_handle();
  }

  idle_connection(const idle_connection&) = delete;
  idle_connection& operator=(const idle_connection&) = delete;
  ~idle_connection() {
    run_on(server_, [this]() -> task<> {
      server_end_.close();
      co_return;
    });
  }

  // What the server end reads before the client's end of stream: no byte (the client sent only
  // its ping). Throws std::system_error (timed_out) when the client end is never closed.
  std::size_t bytes_before_end_of_stream() {
    return run_on(server_, [this]() -> task<std::size_t> {
      std::byte rest[16];
      std::size_t total = 0;
      for (int reads = 0; reads < 16; ++reads) {
        const std::size_t n = co_await server_end_.read_some(rest, 5s);
        if (n == 0) {
          break;
        }
        total += n;
      }
      co_return total;
    });
  }

  tcp_socket client;
  int client_fd = -1;

 private:
  handler_thread& server_;
  tcp_socket server_end_;
};

// Where a test drops a socket: on the test's main thread, in a job on another handler thread,
// or on a std::thread of its own.
enum class dropped_on { main_thread, handler_thread, plain_thread };
constexpr dropped_on kDroppedOn[] = { dropped_on::main_thread, dropped_on::handler_thread,
                                      dropped_on::plain_thread };

void destroy_on(dropped_on where, tcp_socket socket, handler_thread& other) {
  switch (where) {
    case dropped_on::main_thread: {
      const tcp_socket doomed = std::move(socket);
      break;
    }
    case dropped_on::handler_thread:
      other.post_awaitable([doomed = std::move(socket)] {}).get();
      break;
    case dropped_on::plain_thread:
      std::thread([doomed = std::move(socket)] {}).join();
      break;
  }
}

// Keeps `thread` inside a job (its loop does not turn) until release() or destruction.
class held_thread {
 public:
  explicit held_thread(handler_thread& thread) {
    std::promise<void> entered;
    std::future<void> inside = entered.get_future();
    thread.post([&entered, released = released_.get_future().share()] {
      entered.set_value();
      released.wait();
    });
    inside.wait();
  }
  held_thread(const held_thread&) = delete;
  held_thread& operator=(const held_thread&) = delete;
  ~held_thread() { release(); }
  void release() {
    if (!released_set_) {
      released_set_ = true;
      released_.set_value();
    }
  }

 private:
  std::promise<void> released_;
  bool released_set_ = false;
};

bool is_open_descriptor(int fd) {
  return ::fcntl(fd, F_GETFD) != -1;
}

// The program: the socket of a connection whose task ended on `home` is dropped on
// another thread. Its close is home's: while home is busy, the descriptor stays open (so no new
// socket gets its number while home's loop still has it), and once home turns its loop the
// peer reads end of stream.
TEST(socket_threads, a_socket_destroyed_on_another_thread_is_closed_by_its_own_thread) {
  handler_thread home;
  handler_thread server;
  handler_thread other;
  tcp_listener listener = tcp_listener::bind(endpoint::loopback_v4());
  for (const dropped_on where : kDroppedOn) {
    SCOPED_TRACE(static_cast<int>(where));
    idle_connection connection(home, server, listener);
    {
      held_thread held(home);
      destroy_on(where, std::move(connection.client), other);
      EXPECT_TRUE(is_open_descriptor(connection.client_fd))
          << "closed off its thread while its thread's loop still has it";
      const int next = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      EXPECT_NE(next, connection.client_fd) << "its number went to a new socket";
      ::close(next);
    }
    EXPECT_EQ(connection.bytes_before_end_of_stream(), 0u);
  }
}

// The same, many times and without holding home, for the TSan lane: the close races nothing of
// home's loop (before, it raced the epoll_ctl() home's loop made for the readable idle socket).
TEST(socket_threads, sockets_destroyed_on_other_threads_race_nothing_of_their_threads) {
  handler_thread home;
  handler_thread server;
  handler_thread other;
  tcp_listener listener = tcp_listener::bind(endpoint::loopback_v4());
  for (int round = 0; round < 60; ++round) {
    idle_connection connection(home, server, listener);
    destroy_on(kDroppedOn[round % 3], std::move(connection.client), other);
    EXPECT_EQ(connection.bytes_before_end_of_stream(), 0u) << "round " << round;
  }
}

// When the socket's thread has finished (or is gone), the close is made at once where the
// socket is dropped.
TEST(socket_threads, a_socket_whose_thread_finished_is_closed_where_it_is_dropped) {
  handler_thread server;
  handler_thread other;
  tcp_listener listener = tcp_listener::bind(endpoint::loopback_v4());
  for (const bool thread_destroyed : { false, true }) {
    for (const dropped_on where : kDroppedOn) {
      auto home = std::make_unique<handler_thread>();
      idle_connection connection(*home, server, listener);
      home->stop();
      home->join();
      if (thread_destroyed) {
        home.reset();
      }
      destroy_on(where, std::move(connection.client), other);
      EXPECT_FALSE(is_open_descriptor(connection.client_fd));
      EXPECT_EQ(connection.bytes_before_end_of_stream(), 0u);
    }
  }
}

// The drop races the thread's finish: whichever comes first, the descriptor is closed once (the
// test's descriptor check) and the peer reads end of stream.
TEST(socket_threads, a_socket_destroyed_while_its_thread_finishes_is_closed_once) {
  handler_thread server;
  handler_thread other;
  tcp_listener listener = tcp_listener::bind(endpoint::loopback_v4());
  for (int round = 0; round < 30; ++round) {
    handler_thread home;
    idle_connection connection(home, server, listener);
    std::thread dropper([&connection] { const tcp_socket doomed = std::move(connection.client); });
    home.stop();
    home.join();
    dropper.join();
    EXPECT_EQ(connection.bytes_before_end_of_stream(), 0u) << "round " << round;
  }
}

// Ends the test process when `join` has not returned within 20 s: a hang is a failure here.
template <typename Join>
void join_or_abort(Join join, const char* what) {
  std::mutex mutex;
  std::condition_variable done_changed;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock lock(mutex);
    if (!done_changed.wait_for(lock, 20s, [&] { return done; })) {
      std::fprintf(stderr, "socket_threads: %s did not return within 20 s\n", what);
      std::abort();
    }
  });
  join();
  {
    const std::lock_guard lock(mutex);
    done = true;
  }
  done_changed.notify_one();
  watchdog.join();
}

// The program: a task spawned in a scope on thread A hops to thread B, connects there
// and waits in a child task's read with no data coming. B is stopped and joined first.
class hopped_reader {
 public:
  explicit hopped_reader(bool with_time_limit) : with_time_limit_(with_time_limit) {
    accepted_ = co_spawn(
        server_, [this]() -> task<tcp_socket> { co_return co_await listener_.accept(10s); });
    scope_.spawn(a_, [this]() -> task<> {
      const frame_sentinel sentinel{ &destroyed };
      co_await b_->schedule();
      tcp_socket socket = co_await tcp_socket::connect(listener_.local_endpoint(), 5s);
      co_await read(socket);
      resumed = true;
    });
    peer_ = accepted_.get();
    // The read waits once a job posted to B after `waiting` was set has run there.
    for (int i = 0; i < 100'000 && !waiting.load(); ++i) {
      run_on(*b_, []() -> task<> { co_return; });
    }
    run_on(*b_, []() -> task<> { co_return; });
  }

  hopped_reader(const hopped_reader&) = delete;
  hopped_reader& operator=(const hopped_reader&) = delete;
  ~hopped_reader() {
    run_on(server_, [this]() -> task<> {  // on their thread: closed at once
      peer_.close();
      listener_.close();
      co_return;
    });
  }

  handler_thread& a() { return a_; }
  handler_thread& b() { return *b_; }
  async_scope& scope() { return scope_; }
  // The accepted end sends: too late, the reader is gone.
  void send_from_peer() {
    run_on(server_,
           [this]() -> task<> { co_await peer_.write_all(cyan::net::buffer("late"), 5s); });
  }

  std::atomic<bool> waiting{ false };
  std::atomic<bool> resumed{ false };
  std::atomic<bool> destroyed{ false };

 private:
  task<> read(tcp_socket& socket) {
    std::byte buffer[16];
    waiting = true;
    if (with_time_limit_) {
      co_await socket.read_some(buffer, 1h);
    } else {
      co_await socket.read_some(buffer);
    }
  }

  bool with_time_limit_;
  handler_thread server_;
  handler_thread a_;
  std::optional<handler_thread> b_{ std::in_place };
  tcp_listener listener_ = tcp_listener::bind(endpoint::loopback_v4());
  cyan::dispatch::future<tcp_socket> accepted_;
  tcp_socket peer_;
  async_scope scope_;
};

class socket_threads_finish : public ::testing::TestWithParam<bool> {};

TEST_P(socket_threads_finish, the_wait_ends_and_the_task_is_destroyed_when_its_thread_finishes) {
  hopped_reader program(GetParam());
  program.b().stop();
  program.b().join();
  EXPECT_TRUE(program.destroyed.load()) << "the task outlived the thread it waited on";
  EXPECT_EQ(program.scope().size(), 0u);
  program.send_from_peer();
  program.scope().request_stop();
  join_or_abort([&] { program.scope().join_blocking(); }, "the scope's join");
  EXPECT_FALSE(program.resumed.load());
}

// Without a stop request, the spawn executor's stop(drain) returns.
TEST_P(socket_threads_finish, the_spawn_executor_then_drains) {
  hopped_reader program(GetParam());
  program.b().stop();
  program.b().join();
  program.send_from_peer();
  program.a().stop();
  join_or_abort([&] { program.a().join(); }, "the spawn executor's join");
  EXPECT_TRUE(program.destroyed.load());
  EXPECT_FALSE(program.resumed.load());
}

// A stop request from another thread races the thread's finish: whichever comes first ends the
// wait, exactly once (the ASan and TSan lanes check that nothing touches freed memory).
TEST_P(socket_threads_finish, a_stop_request_racing_the_finish_ends_the_wait_once) {
  for (int round = 0; round < 20; ++round) {
    hopped_reader program(GetParam());
    std::thread stopper([&] { program.scope().request_stop(); });
    program.b().stop();
    program.b().join();
    stopper.join();
    join_or_abort([&] { program.scope().join_blocking(); }, "the scope's join");
    EXPECT_TRUE(program.destroyed.load()) << "round " << round;
    EXPECT_FALSE(program.resumed.load()) << "round " << round;
  }
}

INSTANTIATE_TEST_SUITE_P(limits, socket_threads_finish, ::testing::Values(false, true),
                         [](const auto& info) {
                           return info.param ? "with_time_limit" : "without_time_limit";
                         });

}  // namespace
