// cyan::fs::file on the backend CYAN_NET_BACKEND names (ctest runs this suite twice: .io_uring
// and .epoll): reads and writes at offsets, end of file, errors with their errno and path, a
// sparse file's size, many reads in flight, cancellation and timeouts on the ring and on the
// pool fallback, and where a task resumes.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <latch>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "cyan/dispatch.h"
#include "cyan/event/detail/ring.h"
#include "cyan/fs.h"
#include "support/sync_wait.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::fs::file;
using cyan::fs::open_mode;
namespace fs_detail = cyan::fs::detail;

constexpr open_mode kReadWriteNew = open_mode::read | open_mode::write | open_mode::create;

// Whether this run's handler threads use io_uring (the .io_uring registration).
bool ring_backend() {
  const char* backend = std::getenv("CYAN_NET_BACKEND");
  return backend != nullptr && std::string(backend) == "io_uring";
}

// Byte i of the pattern of `seed`: a lost, repeated or misplaced byte breaks it.
std::byte pattern_byte(std::uint32_t seed, std::uint64_t i) {
  const std::uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
  return static_cast<std::byte>((x >> 29) ^ (x >> 7) ^ i);
}

std::vector<std::byte> pattern(std::uint32_t seed, std::size_t size, std::uint64_t first = 0) {
  std::vector<std::byte> bytes(size);
  for (std::size_t i = 0; i < size; ++i) {
    bytes[i] = pattern_byte(seed, first + i);
  }
  return bytes;
}

// A fresh directory (mkdtemp), removed with what is in it.
class temp_dir {
 public:
  temp_dir() {
    const char* base = std::getenv("TMPDIR");
    std::string name = std::string(base != nullptr ? base : "/tmp") + "/cyan-fs-XXXXXX";
    if (::mkdtemp(name.data()) == nullptr) {
      throw std::system_error(errno, std::generic_category(), "mkdtemp");
    }
    path_ = name;
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  [[nodiscard]] std::filesystem::path operator/(const char* name) const { return path_ / name; }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Writes `bytes` to a new file at `path` with the C library (the reference the tests read).
void write_file(const std::filesystem::path& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// The error code a std::system_error thrown by `operation` carries, and its what().
struct failure {
  std::error_code code;
  std::string what;
};
// The operation is a temporary of the caller's full expression: await failure_of() in it.
template <typename Awaitable>
task<failure> failure_of(Awaitable&& operation) {
  try {
    (void)co_await operation;  // as an lvalue: GCC 12 would copy an xvalue awaiter
  } catch (const std::system_error& e) {
    co_return failure{ e.code(), e.what() };
  }
  co_return failure{};
}

template <typename F>
auto run_on(handler_thread& h, F body) {
  return co_spawn(h, std::move(body)).get();
}

// Waits (bounded) until some thread of this process is blocked in system call `number`, as
// /proc/self/task/*/syscall shows; false when it never is or the kernel does not show it.
bool some_thread_blocks_in(long number) {
  const std::string prefix = std::to_string(number) + " ";
  for (int round = 0; round < 20'000; ++round) {
    std::error_code error;
    for (const auto& task_dir : std::filesystem::directory_iterator("/proc/self/task", error)) {
      std::ifstream in(task_dir.path() / "syscall");
      std::string line;
      if (std::getline(in, line) && line.starts_with(prefix)) {
        return true;
      }
    }
    std::this_thread::yield();
  }
  return false;
}

// Keeps every worker of the global pool busy until release(): a call posted meanwhile stays
// queued (it has not started).
class busy_global_pool {
 public:
  busy_global_pool() : workers_(cyan::dispatch::global_concurrent_pool().size()) {
    for (std::size_t i = 0; i < workers_; ++i) {
      cyan::dispatch::async([this] {
        started_.fetch_add(1);
        released_.wait();
        left_.fetch_add(1);  // the last touch of this object
      });
    }
    while (started_.load() < workers_) {
      std::this_thread::yield();
    }
  }
  // Waits for the workers to leave: a worker between started_ and wait() still needs the latch.
  ~busy_global_pool() {
    release();
    while (left_.load() < workers_) {
      std::this_thread::yield();
    }
  }
  void release() {
    if (!done_) {
      done_ = true;
      released_.count_down();
    }
  }

 private:
  std::size_t workers_;
  std::atomic<std::size_t> started_{ 0 };
  std::atomic<std::size_t> left_{ 0 };
  std::latch released_{ 1 };
  bool done_ = false;
};

TEST(file, writes_at_offsets_read_back_byte_for_byte_on_the_backend_asked_for) {
  temp_dir dir;
  handler_thread h;
  const auto path = dir / "data";
  const auto [size, ring_used] = run_on(h, [&]() -> task<std::pair<std::uint64_t, bool>> {
    file f = co_await file::open(path, kReadWriteNew);
    const auto first = pattern(1, 4096);
    const auto second = pattern(2, 1000);
    EXPECT_EQ(co_await f.write_at(0, first), 4096u);
    EXPECT_EQ(co_await f.write_at(10'000, second), 1000u);
    std::vector<std::byte> back(4096);
    EXPECT_EQ(co_await f.read_at(0, back), 4096u);
    EXPECT_EQ(back, first);
    back.resize(1000);
    EXPECT_EQ(co_await f.read_at(10'000, back), 1000u);
    EXPECT_EQ(back, second);
    // The gap between the two writes reads as zeros.
    std::vector<std::byte> gap(10'000 - 4096, std::byte{ 0xff });
    EXPECT_EQ(co_await f.read_at(4096, gap), gap.size());
    EXPECT_EQ(std::count(gap.begin(), gap.end(), std::byte{ 0 }),
              static_cast<std::ptrdiff_t>(gap.size()));
    co_await f.sync();
    co_return std::pair{ f.size(), cyan::event::detail::ring::this_thread_if_set_up() != nullptr };
  });
  EXPECT_EQ(size, 11'000u);
  EXPECT_EQ(ring_used, ring_backend());
}

TEST(file, a_read_at_the_end_returns_zero_and_one_across_it_is_short) {
  temp_dir dir;
  write_file(dir / "hundred", pattern(3, 100));
  handler_thread h;
  const auto counts = run_on(h, [&]() -> task<std::array<std::size_t, 4>> {
    const file f = co_await file::open(dir / "hundred", open_mode::read);
    std::array<std::byte, 64> buffer{};
    const std::size_t at_end = co_await f.read_at(100, buffer);
    const std::size_t past_end = co_await f.read_at(1'000'000, buffer);
    const std::size_t across = co_await f.read_at(90, buffer);
    const std::size_t empty = co_await f.read_at(0, std::span<std::byte>());
    EXPECT_EQ(std::vector<std::byte>(buffer.begin(), buffer.begin() + 10), pattern(3, 10, 90));
    co_return std::array{ at_end, past_end, across, empty };
  });
  EXPECT_EQ(counts, (std::array<std::size_t, 4>{ 0, 0, 10, 0 }));
}

TEST(file, a_missing_file_fails_with_enoent_naming_the_path) {
  temp_dir dir;
  handler_thread h;
  const auto missing = dir / "missing";
  const failure f = run_on(h, [&]() -> task<failure> {
    co_return co_await failure_of(file::open(missing, open_mode::read));
  });
  EXPECT_EQ(f.code, std::errc::no_such_file_or_directory);
  EXPECT_NE(f.what.find(missing.string()), std::string::npos) << f.what;
}

TEST(file, a_directory_fails_with_eisdir_opened_for_writing_or_read) {
  temp_dir dir;
  handler_thread h;
  const auto [open_for_write, read] = run_on(h, [&]() -> task<std::pair<failure, failure>> {
    const failure written = co_await failure_of(file::open(dir.path(), open_mode::write));
    const file f = co_await file::open(dir.path(), open_mode::read);  // open(2) allows it
    std::array<std::byte, 16> buffer{};
    co_return std::pair{ written, co_await failure_of(f.read_at(0, buffer)) };
  });
  EXPECT_EQ(open_for_write.code, std::errc::is_a_directory);
  EXPECT_EQ(read.code, std::errc::is_a_directory);
}

TEST(file, create_exclusive_on_an_existing_file_fails_with_eexist) {
  temp_dir dir;
  write_file(dir / "there", pattern(4, 10));
  handler_thread h;
  const failure f = run_on(h, [&]() -> task<failure> {
    co_return co_await failure_of(
        file::open(dir / "there", open_mode::write | open_mode::create | open_mode::exclusive));
  });
  EXPECT_EQ(f.code, std::errc::file_exists);
}

TEST(file, a_file_without_read_permission_fails_with_eacces) {
  if (::geteuid() == 0) {
    GTEST_SKIP() << "root reads a file of mode 000 (CAP_DAC_OVERRIDE)";
  }
  temp_dir dir;
  write_file(dir / "secret", pattern(5, 10));
  ASSERT_EQ(::chmod((dir / "secret").c_str(), 0), 0);
  handler_thread h;
  const failure f = run_on(h, [&]() -> task<failure> {
    co_return co_await failure_of(file::open(dir / "secret", open_mode::read));
  });
  EXPECT_EQ(f.code, std::errc::permission_denied);
}

TEST(file, a_mode_without_read_or_write_throws_invalid_argument_at_the_call) {
  EXPECT_THROW((void)file::open("/tmp", open_mode::create), std::invalid_argument);
}

TEST(file, a_closed_file_fails_with_ebadf) {
  temp_dir dir;
  handler_thread h;
  const auto [read, synced] = run_on(h, [&]() -> task<std::pair<failure, failure>> {
    file f = co_await file::open(dir / "closed", kReadWriteNew);
    f.close();
    std::array<std::byte, 8> buffer{};
    co_return std::pair{ co_await failure_of(f.read_at(0, buffer)), co_await failure_of(f.sync()) };
  });
  EXPECT_EQ(read.code, std::errc::bad_file_descriptor);
  EXPECT_EQ(synced.code, std::errc::bad_file_descriptor);
  // The call the user made, the path, the reason once (on the ring and over the pool alike).
  const std::string path = (dir / "closed").string();
  EXPECT_EQ(read.what, "cyan::fs::file::read_at '" + path + "': Bad file descriptor");
  EXPECT_EQ(synced.what, "cyan::fs::file::sync '" + path + "': Bad file descriptor");
}

TEST(file, append_mode_writes_at_the_end_whatever_the_offset) {
  temp_dir dir;
  write_file(dir / "log", pattern(6, 100));
  handler_thread h;
  const std::uint64_t size = run_on(h, [&]() -> task<std::uint64_t> {
    const file f = co_await file::open(dir / "log", open_mode::append | open_mode::read);
    const auto tail = pattern(7, 50);
    EXPECT_EQ(co_await f.write_at(0, tail), 50u);
    std::vector<std::byte> back(50);
    EXPECT_EQ(co_await f.read_at(100, back), 50u);
    EXPECT_EQ(back, tail);
    co_return f.size();
  });
  EXPECT_EQ(size, 150u);
}

TEST(file, a_sparse_gibibyte_file_has_that_size_and_reads_as_zeros) {
  constexpr std::uint64_t kGibibyte = std::uint64_t{ 1 } << 30;
  temp_dir dir;
  handler_thread h;
  const auto [size, last, zeros] = run_on(h, [&]() -> task<std::tuple<std::uint64_t, int, long>> {
    const file f = co_await file::open(dir / "sparse", kReadWriteNew | open_mode::truncate);
    const std::array<std::byte, 1> one{ std::byte{ 42 } };
    EXPECT_EQ(co_await f.write_at(kGibibyte - 1, one), 1u);
    std::array<std::byte, 4096> buffer{};
    buffer.fill(std::byte{ 1 });
    EXPECT_EQ(co_await f.read_at(kGibibyte / 2, buffer), buffer.size());
    std::array<std::byte, 8> end{};
    EXPECT_EQ(co_await f.read_at(kGibibyte - 1, end), 1u);
    co_return std::tuple{ f.size(), static_cast<int>(end[0]),
                          static_cast<long>(
                              std::count(buffer.begin(), buffer.end(), std::byte{ 0 })) };
  });
  EXPECT_EQ(size, kGibibyte);
  EXPECT_EQ(last, 42);
  EXPECT_EQ(zeros, 4096);
}

// 256 reads of 4 KiB, started by one task before any is awaited, all pending at once.
TEST(file, many_reads_in_flight_each_get_their_own_bytes) {
  constexpr std::size_t kReads = 256;
  constexpr std::size_t kBlock = 4096;
  temp_dir dir;
  write_file(dir / "blocks", pattern(8, kReads * kBlock));
  handler_thread h;
  const std::size_t matching = run_on(h, [&]() -> task<std::size_t> {
    const file f = co_await file::open(dir / "blocks", open_mode::read);
    std::vector<std::vector<std::byte>> buffers(kReads, std::vector<std::byte>(kBlock));
    std::vector<cyan::dispatch::future<std::size_t>> reads;
    for (std::size_t i = 0; i < kReads; ++i) {
      const std::size_t block = (i * 97) % kReads;  // 97 is coprime to 256: every block once
      const std::uint64_t offset = block * kBlock;
      reads.push_back(co_spawn(h, [&f, &buffer = buffers[block], offset]() -> task<std::size_t> {
        co_return co_await f.read_at(offset, buffer);
      }));
    }
    std::size_t total = 0;
    for (auto& read : reads) {
      total += co_await read;
    }
    EXPECT_EQ(total, kReads * kBlock);
    std::size_t matching = 0;
    for (std::size_t block = 0; block < kReads; ++block) {
      matching += buffers[block] == pattern(8, kBlock, block * kBlock) ? 1 : 0;
    }
    co_return matching;
  });
  EXPECT_EQ(matching, kReads);
}

TEST(file, a_task_resumes_on_its_handler_thread_on_either_path) {
  temp_dir dir;
  write_file(dir / "home", pattern(9, 10));
  handler_thread h;
  const auto on_home = run_on(h, [&]() -> task<std::pair<bool, bool>> {
    const file f = co_await file::open(dir / "home", open_mode::read);
    std::array<std::byte, 10> buffer{};
    (void)co_await f.read_at(0, buffer);
    const bool after_default = h.is_current();
    fs_detail::force_pool_fallback(true);
    (void)co_await f.read_at(0, buffer);
    fs_detail::force_pool_fallback(false);
    co_return std::pair{ after_default, h.is_current() };
  });
  EXPECT_TRUE(on_home.first);
  EXPECT_TRUE(on_home.second);
}

TEST(file, a_task_on_a_thread_pool_takes_the_pool_path_and_resumes_on_its_pool) {
  temp_dir dir;
  write_file(dir / "pooled", pattern(10, 5000));
  cyan::dispatch::thread_pool pool(2);
  const auto [bytes, on_pool] =
      co_spawn(pool, [&]() -> task<std::pair<std::vector<std::byte>, bool>> {
        const file f = co_await file::open(dir / "pooled", open_mode::read);
        std::vector<std::byte> buffer(5000);
        EXPECT_EQ(co_await f.read_at(0, buffer), 5000u);
        co_return std::pair{ buffer, pool.is_current() };
      }).get();
  EXPECT_EQ(bytes, pattern(10, 5000));
  EXPECT_TRUE(on_pool);
}

TEST(file, a_coroutine_on_no_executor_reads_through_the_pool) {
  temp_dir dir;
  write_file(dir / "plain", pattern(11, 300));
  const auto bytes = cyan::test::sync_wait([&]() -> task<std::vector<std::byte>> {
    const file f = co_await file::open(dir / "plain", open_mode::read);
    std::vector<std::byte> buffer(300);
    EXPECT_EQ(co_await f.read_at(0, buffer), 300u);
    co_return buffer;
  }());
  EXPECT_EQ(bytes, pattern(11, 300));
}

// ---- cancellation: on the ring, an operation the kernel has not finished (a FIFO read that
// waits for a writer); on the pool, a call that has not started (every worker busy) ----

class fifo_file : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ring_backend()) {
      GTEST_SKIP() << "a FIFO has no offsets: pread fails with ESPIPE on the pool path";
    }
    ASSERT_EQ(::mkfifo(fifo_.c_str(), 0600), 0);
  }
  temp_dir dir_;
  std::filesystem::path fifo_ = dir_ / "fifo";
};

TEST_F(fifo_file, a_stop_request_cancels_a_ring_read_still_waiting_and_the_fifo_stays_usable) {
  handler_thread h;
  std::stop_source stop;
  std::atomic<bool> waiting{ false };
  std::optional<file> f;  // read | write: opening a FIFO so does not wait for a writer
  run_on(h,
         [&]() -> task<> { f = co_await file::open(fifo_, open_mode::read | open_mode::write); });
  auto reader = co_spawn(
      h,
      [&]() -> task<failure> {
        std::array<std::byte, 8> buffer{};
        waiting = true;
        co_return co_await failure_of(f->read_at(0, buffer));
      },
      stop.get_token());
  for (int i = 0; i < 100'000 && !waiting.load(); ++i) {
    co_spawn(h, []() -> task<> { co_return; }()).get();
  }
  co_spawn(h, []() -> task<> { co_return; }()).get();  // the read's entry is queued by now
  stop.request_stop();
  EXPECT_EQ(reader.get().code, std::errc::operation_canceled);
  // The cancelled read took nothing: the next one gets the bytes written after it.
  const auto bytes = run_on(h, [&]() -> task<std::vector<std::byte>> {
    const auto sent = pattern(12, 8);
    EXPECT_EQ(co_await f->write_at(0, sent), 8u);
    std::vector<std::byte> got(8);
    EXPECT_EQ(co_await f->read_at(0, got), 8u);
    co_return got;
  });
  EXPECT_EQ(bytes, pattern(12, 8));
}

// A ring read in flight when its frame is destroyed (its task hopped to thread B, which then
// finishes) leaves the kernel no pointer into the frame: the destructor cancels the read and
// waits for its completion, so bytes written afterwards are still in the FIFO.
TEST_F(fifo_file, a_ring_read_in_flight_when_its_frame_is_destroyed_takes_no_later_bytes) {
  handler_thread a;
  std::optional<handler_thread> b{ std::in_place };
  std::optional<file> f;  // read | write: opening a FIFO so does not wait for a writer
  run_on(*b,
         [&]() -> task<> { f = co_await file::open(fifo_, open_mode::read | open_mode::write); });
  std::atomic<bool> waiting{ false };
  std::atomic<bool> resumed{ false };
  cyan::dispatch::async_scope scope;
  scope.spawn(a, [&]() -> task<> {
    co_await b->schedule();
    std::array<std::byte, 8> buffer{};
    waiting = true;
    (void)co_await f->read_at(0, buffer);
    resumed = true;
  });
  for (int i = 0; i < 100'000 && !waiting.load(); ++i) {
    co_spawn(*b, []() -> task<> { co_return; }()).get();
  }
  co_spawn(*b, []() -> task<> { co_return; }()).get();  // the read's entry is queued by now
  ASSERT_TRUE(waiting.load());
  b->stop();
  b->join();
  ASSERT_EQ(::write(f->native_handle(), "late", 4), 4);
  ::pollfd readable{ f->native_handle(), POLLIN, 0 };
  ASSERT_EQ(::poll(&readable, 1, 5000), 1) << "the destroyed read took the bytes";
  char got[8] = {};
  ASSERT_EQ(::read(f->native_handle(), got, sizeof got), 4);
  EXPECT_EQ(std::string(got, 4), "late");
  EXPECT_FALSE(resumed.load());
  scope.request_stop();
  scope.join_blocking();
}

TEST_F(fifo_file, a_timeout_ends_a_ring_read_still_waiting_with_timed_out) {
  handler_thread h;
  const failure f = run_on(h, [&]() -> task<failure> {
    const file fifo = co_await file::open(fifo_, open_mode::read | open_mode::write);
    std::array<std::byte, 8> buffer{};
    co_return co_await failure_of(fifo.read_at(0, buffer, 20ms));
  });
  EXPECT_EQ(f.code, std::errc::timed_out);
}

TEST(file_pool, a_stop_request_ends_a_call_not_started_and_the_call_never_runs) {
  temp_dir dir;
  write_file(dir / "data", pattern(13, 16));
  handler_thread h;
  std::optional<file> f;
  run_on(h, [&]() -> task<> { f = co_await file::open(dir / "data", open_mode::read); });
  busy_global_pool busy;
  std::stop_source stop;
  std::atomic<bool> waiting{ false };
  std::array<std::byte, 16> buffer{};
  auto reader = co_spawn(
      h,
      [&]() -> task<failure> {
        fs_detail::force_pool_fallback(true);
        waiting = true;
        const failure outcome = co_await failure_of(f->read_at(0, buffer));
        fs_detail::force_pool_fallback(false);
        co_return outcome;
      },
      stop.get_token());
  for (int i = 0; i < 100'000 && !waiting.load(); ++i) {
    co_spawn(h, []() -> task<> { co_return; }()).get();
  }
  co_spawn(h, []() -> task<> { co_return; }()).get();  // the call is queued on the pool by now
  stop.request_stop();
  EXPECT_EQ(reader.get().code, std::errc::operation_canceled);
  busy.release();
  // The abandoned job finds the call abandoned: a later call on the pool runs after it, and
  // the buffer was never written.
  cyan::dispatch::async_awaitable([] {}).get();
  cyan::dispatch::async_awaitable([] {}).get();
  EXPECT_EQ(std::count(buffer.begin(), buffer.end(), std::byte{ 0 }), 16);
}

TEST(file_pool, a_timeout_ends_a_call_not_started_with_timed_out) {
  temp_dir dir;
  write_file(dir / "data", pattern(14, 16));
  handler_thread h;
  std::optional<file> f;
  run_on(h, [&]() -> task<> { f = co_await file::open(dir / "data", open_mode::read); });
  busy_global_pool busy;
  const failure outcome = run_on(h, [&]() -> task<failure> {
    fs_detail::force_pool_fallback(true);
    std::array<std::byte, 16> buffer{};
    const failure result = co_await failure_of(f->read_at(0, buffer, 20ms));
    fs_detail::force_pool_fallback(false);
    co_return result;
  });
  EXPECT_EQ(outcome.code, std::errc::timed_out);
  EXPECT_EQ(outcome.what,
            "cyan::fs::file::read_at '" + (dir / "data").string() + "': Connection timed out");
}

// Opening a FIFO for reading blocks in openat until a writer comes: the stop request comes
// while the call runs, so the open goes on to its end and returns the file.
TEST(file_pool, a_stop_request_lets_a_call_that_started_finish_and_report_its_result) {
  temp_dir dir;
  const auto fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  handler_thread h;
  std::stop_source stop;
  auto opener = co_spawn(
      h,
      [&]() -> task<bool> {
        fs_detail::force_pool_fallback(true);
        const file f = co_await file::open(fifo, open_mode::read);
        fs_detail::force_pool_fallback(false);
        co_return f.is_open();
      },
      stop.get_token());
  if (!some_thread_blocks_in(SYS_openat)) {
    const int writer = ::open(fifo.c_str(), O_WRONLY);  // lets the open end before skipping
    (void)opener.get();
    ::close(writer);
    GTEST_SKIP() << "this kernel does not show /proc/self/task/*/syscall";
  }
  stop.request_stop();
  const int writer = ::open(fifo.c_str(), O_WRONLY);
  ASSERT_GE(writer, 0);
  EXPECT_TRUE(opener.get());
  ::close(writer);
}

}  // namespace
