// Pipe benchmark: libevent's test/bench.c (Provos, with Libenzi's chain propagation) on one
// event loop. N socketpairs (AF_UNIX, SOCK_STREAM); a byte that pair i reads, it writes to pair
// (i + 1) mod N. A run starts by writing one byte to each of M active pairs spaced N/M apart,
// then passes bytes on until W further writes have been made, and ends when every byte written
// has been read. bench.c's counters, kept by every arm alike (see `chain`): `fired` bytes
// written (the M first ones included), `writes` still to make (W at the start), `count` bytes
// read; the run is over when count == fired, i.e. after M + W reads.
//
// Arms, each with its loop on one thread pinned to the same CPU (see shared_cpu()):
//   cyan coroutines — a handler_thread; a cyan::dispatch::task per pair, `co_await
//                     reader.read_some(1 byte)` then `co_await next.write_some(1 byte)`, on
//                     tcp_socket::adopt()-ed ends of the pairs; on cyan's default network
//                     backend (io_uring where a ring can be set up);
//   cyan coroutines (epoll) — the same on the epoll readiness path;
//   raw libev       — one ev_io per pair and bench.c's read_cb (read(), then write() to the
//                     next pair), the loop driven as bench.c drives it (non-blocking rounds
//                     until count == fired);
//   Boost.Asio      — an io_context(1) run by one thread; a posix::stream_descriptor per pair
//                     end, async_read_some with a callback that writes the next pair with the
//                     descriptor's (synchronous) write_some — bench.c's plain write(), and what
//                     cyan's write_some does when the socket takes the byte at once — and
//                     re-arms its read.
// Every run of every arm makes its own N socketpairs and its own watchers or tasks, and tears
// them down afterwards (bench.c re-adds its events for each run, too). Only the event
// processing is timed, on the loop thread: from just after the M first writes to the read that
// makes count == fired. Set-up — socketpairs, adopting or wrapping them, starting the watchers
// or tasks, one non-blocking loop round so that libev has made its epoll_ctl calls (bench.c's
// event_loop(EVLOOP_NONBLOCK) before timing; Asio registers a descriptor when it is made) — and
// the teardown stay outside. Checksum: the bytes read that were the byte written, M + W in
// every arm that did the whole work.
//
// cyan reads CYAN_NET_BACKEND once per process, so its two arms cannot share one: each runs in a
// child process, this program started again with --cyan-arm and CYAN_NET_BACKEND=auto or epoll
// in its environment, which runs the cyan arm for each workload line it reads on stdin and
// answers with a RESULT line (seconds, checksum). The child times the run on its loop thread
// exactly as the in-process arms do, so only untimed set-up crosses the pipe; both children
// start before the first sample and stay up, like the other arms' threads.
//
// N = 100, 1,000 and 10,000, each with M = 1 and M = 100. RLIMIT_NOFILE's soft limit is raised
// to the hard one; a size whose 2N descriptors (plus kSpareDescriptors) do not fit is skipped
// with a line saying so.
//
// W defaults to 10,000 rather than bench.c's W = N: W = N would make the N = 100 runs too short
// to rise above a shared host's noise, while a fixed W makes runs of a few tens of ms for every
// size and keeps the whole program short (docs/bench/notes.md, "Figures behind the examples'
// comments").
//
//   CYAN_BENCH_PIPE_WRITES  W, the writes after the first M (default 10000)
//   CYAN_BENCH_REPS         repetitions per arm (default 25: bench.c's 25 runs)

#include <ev.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <latch>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>

#include <cyan/common/thread.h>
#include <cyan/dispatch.h>
#include <cyan/event/loop.h>
#include <cyan/net.h>

#include "bench/harness.h"
#include "bench/process.h"

namespace {

namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;
using cyan::bench::sample;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;

/// Descriptors beyond the 2N of the pairs: stdio, each arm's loop (epoll, eventfd, timerfd).
constexpr std::size_t kSpareDescriptors = 64;
constexpr int kReps = 25;
constexpr unsigned char kByte = 'e';  // what bench.c writes

[[noreturn]] void fail(const char* what) {
  std::perror(what);
  std::abort();
}

/// The CPU every arm's loop thread is pinned to: on this host one vCPU runs a loop up to 1.6x
/// slower than the other, for minutes at a time. Null: no pinning (a single-CPU machine).
std::optional<unsigned> shared_cpu() {
  if (std::thread::hardware_concurrency() < 2) {
    return std::nullopt;
  }
  return 1U;
}

/// N socketpairs in bench.c's layout: pair i is read at fd 2i and written at fd 2i+1. Each arm
/// takes the ends it wraps; the destructor closes the rest.
class pipe_set {
 public:
  explicit pipe_set(std::size_t pairs) : fds_(2 * pairs, -1) {
    for (std::size_t i = 0; i < pairs; ++i) {
      if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, &fds_[2 * i]) != 0) {
        fail("socketpair");
      }
    }
  }
  pipe_set(const pipe_set&) = delete;
  pipe_set& operator=(const pipe_set&) = delete;
  ~pipe_set() {
    for (const int fd : fds_) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
  }
  [[nodiscard]] std::size_t size() const { return fds_.size() / 2; }
  [[nodiscard]] int read_end(std::size_t i) const { return fds_[2 * i]; }
  [[nodiscard]] int write_end(std::size_t i) const { return fds_[2 * i + 1]; }
  /// Hands an end over: the caller closes it.
  [[nodiscard]] int take_read_end(std::size_t i) { return std::exchange(fds_[2 * i], -1); }
  [[nodiscard]] int take_write_end(std::size_t i) { return std::exchange(fds_[2 * i + 1], -1); }

 private:
  std::vector<int> fds_;
};

/// bench.c's counters for one run. Touched only by the arm's loop thread.
struct chain {
  std::size_t pipes = 0;
  std::size_t active = 0;
  std::uint64_t count = 0;   // bytes read
  std::uint64_t writes = 0;  // writes still to make
  std::uint64_t fired = 0;   // bytes written, the M first ones included
  std::uint64_t good = 0;    // bytes read that were kByte: the checksum
  clock_type::time_point start{};
  clock_type::time_point end{};

  [[nodiscard]] std::size_t next(std::size_t i) const { return i + 1 == pipes ? 0 : i + 1; }

  /// Writes the M first bytes (spaced N/M apart, as bench.c does), then starts the clock.
  /// `write_end(i)` is the descriptor that writes pair i.
  template <typename WriteEnd>
  void begin(std::uint64_t total_writes, WriteEnd write_end) {
    const std::size_t space = pipes / active;
    for (std::size_t i = 0; i < active; ++i, ++fired) {
      if (::write(write_end(i * space), &kByte, 1) != 1) {
        fail("write");
      }
    }
    writes = total_writes;
    start = clock_type::now();
  }

  /// After a read of `byte`: whether to pass a byte on (bench.c's `if (writes)`), counting it.
  [[nodiscard]] bool read_one(unsigned char byte) {
    ++count;
    good += byte == kByte ? 1 : 0;
    if (writes == 0) {
      return false;
    }
    --writes;
    ++fired;
    return true;
  }

  /// Every byte written has been read: stops the clock and says so.
  [[nodiscard]] bool finished() {
    if (count != fired) {
      return false;
    }
    end = clock_type::now();
    return true;
  }

  [[nodiscard]] sample result() const {
    return { std::chrono::duration<double>(end - start).count(), good };
  }
};

/// What one run needs to know.
struct workload {
  std::size_t pipes;
  std::size_t active;
  std::uint64_t writes;
};

// ---- cyan coroutines ----------------------------------------------------------------------

struct cyan_run {
  chain counters;
  std::vector<cyan::net::tcp_socket>
      writers;              // pair i's write end; made and destroyed on the thread
  std::size_t started = 0;  // tasks waiting in their first read
  std::latch done{ 1 };
};

task<> cyan_pipe(cyan::net::tcp_socket reader, std::size_t index, cyan_run* run) {
  std::byte byte{};
  cyan::net::tcp_socket& next = run->writers[run->counters.next(index)];
  const std::byte out{ kByte };
  ++run->started;
  try {
    for (;;) {
      if (co_await reader.read_some(std::span(&byte, 1)) != 1) {
        fail("cyan read_some: end of stream");
      }
      if (run->counters.read_one(static_cast<unsigned char>(byte))) {
        co_await next.write_some(std::span(&out, 1));
      }
      if (run->counters.finished()) {
        run->done.count_down();
      }
    }
  } catch (const std::system_error& e) {
    if (e.code() != std::errc::operation_canceled) {
      std::fprintf(stderr, "cyan pipe %zu: %s\n", index, e.what());
      std::abort();
    }
  }
}

sample cyan_arm(handler_thread& thread, const workload& w) {
  pipe_set pipes(w.pipes);
  cyan_run run;
  run.counters = { .pipes = w.pipes, .active = w.active };
  run.writers.reserve(w.pipes);
  cyan::dispatch::async_scope scope;
  thread
      .post_awaitable([&] {
        for (std::size_t i = 0; i < w.pipes; ++i) {
          run.writers.push_back(
              cyan::net::tcp_socket::adopt(cyan::net::socket_handle(pipes.take_write_end(i))));
        }
        for (std::size_t i = 0; i < w.pipes; ++i) {
          scope.spawn(thread, cyan_pipe(cyan::net::tcp_socket::adopt(
                                            cyan::net::socket_handle(pipes.take_read_end(i))),
                                        i, &run));
        }
      })
      .get();
  // The spawned tasks start after the set-up job; then one loop round makes libev's epoll_ctl
  // calls for their read watchers.
  while (thread.post_awaitable([&] { return run.started; }).get() < w.pipes) {
  }
  thread.post_awaitable([&] { thread.get_event_loop()->run_nowait(); }).get();

  thread
      .post_awaitable([&] {
        run.counters.begin(w.writes, [&](std::size_t i) { return run.writers[i].native_handle(); });
      })
      .get();
  run.done.wait();

  scope.request_stop();  // ends each task's pending read with operation_canceled
  scope.join_blocking();
  thread.post_awaitable([&] { run.writers.clear(); }).get();
  return run.counters.result();
}

/// The cyan arm in a child process (see the top of the file): this program with --cyan-arm and
/// CYAN_NET_BACKEND=`backend`.
class cyan_child {
 public:
  explicit cyan_child(const std::string& backend)
      : process_({ cyan::bench::executable_directory() + "/pipe_benchmark", "--cyan-arm" }, -1,
                 /*piped_input=*/true, /*piped_errors=*/false, { "CYAN_NET_BACKEND=" + backend }) {}
  cyan_child(const cyan_child&) = delete;
  cyan_child& operator=(const cyan_child&) = delete;
  ~cyan_child() {
    process_.close_input();  // the child's end of stdin: it returns from main
    (void)process_.wait(std::chrono::seconds(10));
  }

  /// Runs `w` in the child; aborts when it does not answer.
  sample run(const workload& w) {
    process_.write_input(std::to_string(w.pipes) + " " + std::to_string(w.active) + " " +
                         std::to_string(w.writes) + "\n");
    const auto values = cyan::bench::parse_result_line(process_.read_line(std::chrono::minutes(2)));
    if (values.empty()) {
      std::fprintf(stderr, "pipe_benchmark --cyan-arm did not answer\n");
      std::abort();
    }
    return { values.at("seconds"), static_cast<std::uint64_t>(values.at("checksum")) };
  }

 private:
  cyan::bench::child_process process_;
};

/// The child's side: runs the cyan arm for each "N M W" line on stdin until its end.
int serve_cyan_arm() {
  handler_thread thread{ handler_thread::options{ .name = "pipe-cyan", .cpu = shared_cpu() } };
  workload w{};
  unsigned long long writes = 0;
  while (std::scanf("%zu %zu %llu", &w.pipes, &w.active, &writes) == 3) {
    w.writes = writes;
    const sample result = cyan_arm(thread, w);
    std::printf("RESULT seconds=%.9f checksum=%llu\n", result.seconds,
                static_cast<unsigned long long>(result.checksum));
    std::fflush(stdout);
  }
  return 0;
}

// ---- raw libev ----------------------------------------------------------------------------

/// A thread that runs jobs handed to it one at a time: the raw libev arm's loop thread.
class job_thread {
 public:
  job_thread() : thread_([this] { serve(); }) {}
  job_thread(const job_thread&) = delete;
  job_thread& operator=(const job_thread&) = delete;
  ~job_thread() {
    run({});
    thread_.join();
  }
  /// Runs `job` on the thread and waits for it; an empty job ends the thread.
  void run(std::function<void()> job) {
    std::unique_lock lock(mutex_);
    job_ = std::move(job);
    has_job_ = true;
    changed_.notify_all();
    changed_.wait(lock, [this] { return !has_job_; });
  }

 private:
  void serve() {
    cyan::this_thread::set_name("pipe-libev");  // perf report --comm tells the arms apart
    if (shared_cpu()) {
      cyan::this_thread::set_affinity(*shared_cpu());
    }
    for (;;) {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [this] { return has_job_; });
      const bool last = !job_;
      if (job_) {
        job_();
      }
      has_job_ = false;
      changed_.notify_all();
      if (last) {
        return;
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::function<void()> job_;  // guarded by mutex_
  bool has_job_ = false;       // guarded by mutex_
  std::thread thread_;
};

struct libev_run;

struct libev_pipe {
  ev_io watcher;  // first: read_cb gets its address
  std::size_t index;
  libev_run* run;
};

struct libev_run {
  chain counters;
  const pipe_set* pipes;
  std::vector<libev_pipe> watchers;
};

// bench.c's read_cb.
void read_cb(struct ev_loop* /*loop*/, ev_io* watcher, int /*revents*/) {
  auto* pipe = reinterpret_cast<libev_pipe*>(watcher);
  chain& counters = pipe->run->counters;
  unsigned char byte = 0;
  if (::read(watcher->fd, &byte, 1) != 1) {
    fail("read");
  }
  if (counters.read_one(byte) &&
      ::write(pipe->run->pipes->write_end(counters.next(pipe->index)), &kByte, 1) != 1) {
    fail("write");
  }
}

sample libev_arm(job_thread& thread, struct ev_loop* loop, const workload& w) {
  pipe_set pipes(w.pipes);
  libev_run run;
  run.counters = { .pipes = w.pipes, .active = w.active };
  run.pipes = &pipes;
  run.watchers.resize(w.pipes);
  thread.run([&] {
    for (std::size_t i = 0; i < w.pipes; ++i) {
      libev_pipe& pipe = run.watchers[i];
      pipe.index = i;
      pipe.run = &run;
      ev_io_init(&pipe.watcher, read_cb, pipes.read_end(i), EV_READ);
      ev_io_start(loop, &pipe.watcher);
    }
    ev_run(loop, EVRUN_NOWAIT);

    run.counters.begin(w.writes, [&](std::size_t i) { return pipes.write_end(i); });
    do {
      ev_run(loop, EVRUN_NOWAIT);
    } while (!run.counters.finished());

    for (libev_pipe& pipe : run.watchers) {
      ev_io_stop(loop, &pipe.watcher);
    }
    ev_run(loop, EVRUN_NOWAIT);
  });
  return run.counters.result();
}

// ---- Boost.Asio ---------------------------------------------------------------------------

/// An io_context for one thread, run by its own thread (pinned) until destroyed.
class asio_thread {
 public:
  asio_thread()
      : io_(1), guard_(io_.get_executor()), thread_([this] {
          cyan::this_thread::set_name("pipe-asio");
          if (shared_cpu()) {
            cyan::this_thread::set_affinity(*shared_cpu());
          }
          io_.run();
        }) {}
  asio_thread(const asio_thread&) = delete;
  asio_thread& operator=(const asio_thread&) = delete;
  ~asio_thread() {
    guard_.reset();
    thread_.join();
  }
  asio::io_context& io() { return io_; }
  /// Runs `job` on the thread and waits for it.
  template <typename Job>
  void run(Job job) {
    asio::post(io_, asio::use_future(std::move(job))).get();
  }

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
  std::thread thread_;
};

struct asio_run {
  chain counters;
  std::vector<asio::posix::stream_descriptor> readers;
  std::vector<asio::posix::stream_descriptor> writers;
  std::vector<unsigned char> bytes;  // each pipe's read buffer
  std::latch done{ 1 };
};

void asio_read(asio_run& run, std::size_t index);

/// A pipe's read handler: bench.c's read_cb, then the next read.
struct asio_reader {
  asio_run* run;
  std::size_t index;
  void operator()(const boost::system::error_code& error, std::size_t n) const {
    if (error == asio::error::operation_aborted) {
      return;  // the run is over
    }
    if (error || n != 1) {
      std::fprintf(stderr, "asio pipe %zu: %s\n", index, error.message().c_str());
      std::abort();
    }
    chain& counters = run->counters;
    if (counters.read_one(run->bytes[index])) {
      run->writers[counters.next(index)].write_some(asio::buffer(&kByte, 1));
    }
    if (counters.finished()) {
      run->done.count_down();
    }
    asio_read(*run, index);
  }
};

void asio_read(asio_run& run, std::size_t index) {
  run.readers[index].async_read_some(asio::buffer(&run.bytes[index], 1),
                                     asio_reader{ &run, index });
}

sample asio_arm(asio_thread& thread, const workload& w) {
  pipe_set pipes(w.pipes);
  asio_run run;
  run.counters = { .pipes = w.pipes, .active = w.active };
  run.bytes.resize(w.pipes);
  run.readers.reserve(w.pipes);
  run.writers.reserve(w.pipes);
  thread.run([&] {
    for (std::size_t i = 0; i < w.pipes; ++i) {
      run.readers.emplace_back(thread.io(), pipes.take_read_end(i));
      run.writers.emplace_back(thread.io(), pipes.take_write_end(i));
    }
    for (std::size_t i = 0; i < w.pipes; ++i) {
      asio_read(run, i);
    }
  });

  thread.run([&] {
    run.counters.begin(w.writes, [&](std::size_t i) { return run.writers[i].native_handle(); });
  });
  run.done.wait();

  thread.run([&] {
    for (auto& reader : run.readers) {
      reader.close();  // queues each pending read's handler with operation_aborted
    }
  });
  thread.run([&] {  // after those handlers
    run.readers.clear();
    run.writers.clear();
  });
  return run.counters.result();
}

// ---- running and reporting ----------------------------------------------------------------

/// Raises RLIMIT_NOFILE's soft limit to the hard one; returns the descriptors now allowed.
rlim_t raise_descriptor_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    fail("getrlimit");
  }
  limit.rlim_cur = limit.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    fail("setrlimit");
  }
  return limit.rlim_cur;
}

struct arms {
  cyan_child cyan{ "auto" };
  cyan_child cyan_epoll{ "epoll" };
  job_thread libev_thread;
  struct ev_loop* libev_loop = ev_loop_new(EVFLAG_AUTO);  // what cyan's loops use, too
  asio_thread asio;
  arms() {
    if (libev_loop == nullptr) {
      fail("ev_loop_new");
    }
  }
  arms(const arms&) = delete;
  arms& operator=(const arms&) = delete;
  ~arms() { ev_loop_destroy(libev_loop); }
};

bool run_workload(arms& threads, const workload& w) {
  char name[64];
  std::snprintf(name, sizeof name, "N=%zu M=%zu", w.pipes, w.active);
  cyan::bench::suite s{ "pipe", name };
  s.add("cyan coroutines", [&] { return threads.cyan.run(w); });
  s.add("cyan coroutines (epoll)", [&] { return threads.cyan_epoll.run(w); });
  s.add("raw libev", [&] { return libev_arm(threads.libev_thread, threads.libev_loop, w); });
  s.add("Boost.Asio", [&] { return asio_arm(threads.asio, w); });
  const bool ok = s.run();
  if (w.pipes == 1000) {
    s.goal_at_most("cyan coroutines", "raw libev", 1.15);
    s.goal("cyan coroutines", "Boost.Asio", 1.0);
  }
  if (w.active == 100) {
    s.goal_at_most("cyan coroutines", "raw libev", 1.0);
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--cyan-arm") == 0) {
    return serve_cyan_arm();
  }
  // The harness reads its repetitions from $CYAN_BENCH_REPS; this benchmark's default is
  // bench.c's 25 runs rather than the harness's 11.
  ::setenv("CYAN_BENCH_REPS", std::to_string(kReps).c_str(), /*overwrite=*/0);
  const std::uint64_t writes = cyan::bench::env_or("CYAN_BENCH_PIPE_WRITES", 10'000);
  const rlim_t descriptors = raise_descriptor_limit();
  std::printf(
      "pipe benchmark (libevent's test/bench.c): N socketpairs, M active, W = %llu writes after "
      "the first M; %d reps; RLIMIT_NOFILE %llu\n",
      static_cast<unsigned long long>(writes), cyan::bench::repetitions(),
      static_cast<unsigned long long>(descriptors));
  std::fflush(stdout);
  arms threads;
  bool ok = true;
  for (const std::size_t pipes : { 100, 1000, 10000 }) {
    if (2 * pipes + kSpareDescriptors > descriptors) {
      std::printf("\nN=%zu skipped: it needs %zu descriptors, RLIMIT_NOFILE allows %llu\n", pipes,
                  2 * pipes + kSpareDescriptors, static_cast<unsigned long long>(descriptors));
      continue;
    }
    for (const std::size_t active : { 1, 100 }) {
      ok = run_workload(threads, { pipes, active, writes }) && ok;
    }
  }
  return cyan::bench::exit_status(ok);
}
