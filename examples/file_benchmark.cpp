// File benchmark: reads from a 256 MiB file in the page cache (created in a fresh temporary
// directory and read once to warm it), so that what is measured is each runtime's cost per
// operation, not the disk.
//   random 4 KiB  — 65536 reads of 4 KiB at fixed pseudo-random aligned offsets (the same in
//                   every arm), 64 in flight from one thread;
//   sequential 1 MiB — the whole file read twice in order in 1 MiB reads, 8 in flight.
// Arms:
//   cyan fs io_uring — cyan::fs::file on a handler_thread's ring: 64 (8) tasks on that thread,
//                      each awaiting read_at in a loop;
//   cyan fs pool     — the same tasks on the pool fallback (forced in-process with
//                      cyan::fs::detail::force_pool_fallback): blocking preads on the global
//                      pool, resumed on the handler thread;
//   asio random_access_file — Boost.Asio's file on its io_uring backend, 64 (8) chains of
//                      async_read_some_at on one io_context run by one thread;
//   blocking pread pool (4 threads) — libuv's model: 4 std::threads taking the next read
//                      from a shared counter, each making blocking preads.
// Threads start and files open before timing in every arm; the timed region ends when the last
// read completed. CPU per read is the process's user + system time (getrusage) over the timed
// region divided by the reads, median over the runs, printed after each table.
// Checksum: the sum over reads of the count and the first and last byte read.
//
//   CYAN_BENCH_FILE_READS  random reads per run (default 65536)
//   CYAN_BENCH_REPS        repetitions per arm (default 11)
#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/random_access_file.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <cyan/dispatch.h>
#include <cyan/event/detail/ring.h>
#include <cyan/fs.h>

#include "bench/harness.h"

namespace {

using cyan::bench::sample;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;

constexpr std::uint64_t kFileSize = std::uint64_t{ 256 } << 20;

/// One workload: which reads, how many in flight.
struct workload {
  std::filesystem::path path;
  std::uint64_t reads = 0;
  std::size_t block = 0;
  std::size_t in_flight = 0;
  bool random = false;

  /// The i-th read's offset: aligned blocks, a multiplicative hash's order when random.
  [[nodiscard]] std::uint64_t offset(std::uint64_t i) const {
    const std::uint64_t blocks = kFileSize / block;
    const std::uint64_t index = random ? (i * 2654435761u) % blocks : i % blocks;
    return index * block;
  }
};

std::uint64_t checksum_of(const std::byte* data, std::size_t n) {
  return n == 0 ? 0
                : n + static_cast<std::uint64_t>(data[0]) + static_cast<std::uint64_t>(data[n - 1]);
}

/// Wall time and process CPU time (user + system, getrusage) of a timed region.
class region {
 public:
  region() : cpu_(cpu_now()), wall_(std::chrono::steady_clock::now()) {}
  [[nodiscard]] double wall() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_).count();
  }
  [[nodiscard]] double cpu() const { return cpu_now() - cpu_; }

 private:
  static double cpu_now() {
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
    const auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
    return seconds(usage.ru_utime) + seconds(usage.ru_stime);
  }
  double cpu_;
  std::chrono::steady_clock::time_point wall_;
};

/// CPU seconds per read of every run of every arm, for the line after the table.
std::map<std::string, std::vector<double>> cpu_per_read;

sample record(const std::string& arm, const workload& w, const region& timed,
              std::uint64_t checksum) {
  const double wall = timed.wall();
  cpu_per_read[arm].push_back(timed.cpu() / static_cast<double>(w.reads));
  return { wall, checksum };
}

// ---- cyan ----

// One of the in-flight readers: reads into `buffer` until the shared counter passes the end.
// `w`, `f`, `next`, `checksum` and `buffer` belong to the driver, which awaits every reader
// before it returns (and allocated the buffers before the timed region, as the other arms do).
task<> cyan_reader(const workload& w, const cyan::fs::file& f, std::uint64_t& next,
                   std::uint64_t& checksum, std::span<std::byte> buffer) {
  while (next < w.reads) {
    const std::uint64_t i = next++;  // the readers share one thread: no race
    const std::size_t n = co_await f.read_at(w.offset(i), buffer);
    checksum += checksum_of(buffer.data(), n);
  }
}

sample cyan_arm(const std::string& arm, const workload& w, bool pool) {
  handler_thread h;
  return co_spawn(
             h,
             [&]() -> task<sample> {
               cyan::fs::detail::force_pool_fallback(pool);
               if (!pool && cyan::event::detail::ring::this_thread() == nullptr) {
                 throw std::runtime_error("no io_uring here: the io_uring arm would use the pool");
               }
               const cyan::fs::file f =
                   co_await cyan::fs::file::open(w.path, cyan::fs::open_mode::read);
               std::uint64_t next = 0;
               std::uint64_t checksum = 0;
               std::vector<std::vector<std::byte>> buffers(w.in_flight,
                                                           std::vector<std::byte>(w.block));
               const region timed;
               std::vector<cyan::dispatch::future<void>> readers;
               for (std::size_t r = 0; r < w.in_flight; ++r) {
                 readers.push_back(co_spawn(h, cyan_reader(w, f, next, checksum, buffers[r])));
               }
               for (auto& reader : readers) {
                 co_await reader;
               }
               cyan::fs::detail::force_pool_fallback(false);
               co_return record(arm, w, timed, checksum);
             })
      .get();
}

// ---- Boost.Asio ----

// A chain of async_read_some_at: each completion starts the next read.
struct asio_chain {
  const workload* w;
  boost::asio::random_access_file* file;
  std::uint64_t* next;
  std::uint64_t* checksum;
  std::vector<std::byte> buffer;

  void start() {
    if (*next >= w->reads) {
      return;
    }
    const std::uint64_t i = (*next)++;
    file->async_read_some_at(w->offset(i), boost::asio::buffer(buffer),
                             [this](const boost::system::error_code& error, std::size_t n) {
                               if (error) {
                                 throw boost::system::system_error(error);
                               }
                               *checksum += checksum_of(buffer.data(), n);
                               start();
                             });
  }
};

sample asio_arm(const std::string& arm, const workload& w) {
  boost::asio::io_context context(1);
  boost::asio::random_access_file file(context, w.path.string(),
                                       boost::asio::random_access_file::read_only);
  std::uint64_t next = 0;
  std::uint64_t checksum = 0;
  std::vector<asio_chain> chains(w.in_flight);
  for (auto& chain : chains) {
    chain = { &w, &file, &next, &checksum, std::vector<std::byte>(w.block) };
  }
  const region timed;
  for (auto& chain : chains) {
    chain.start();
  }
  context.run();
  return record(arm, w, timed, checksum);
}

// ---- blocking pread pool ----

sample pread_pool_arm(const std::string& arm, const workload& w) {
  constexpr int kThreads = 4;
  const int fd = ::open(w.path.c_str(), O_RDONLY | O_CLOEXEC);
  std::atomic<std::uint64_t> next{ 0 };
  std::atomic<std::uint64_t> checksum{ 0 };
  std::atomic<int> finished{ 0 };
  std::atomic<bool> go{ false };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      std::vector<std::byte> buffer(w.block);
      std::uint64_t sum = 0;
      go.wait(false);
      for (std::uint64_t i = next.fetch_add(1); i < w.reads; i = next.fetch_add(1)) {
        const ssize_t n =
            ::pread(fd, buffer.data(), buffer.size(), static_cast<off_t>(w.offset(i)));
        if (n < 0) {
          throw std::system_error(errno, std::generic_category(), "pread");
        }
        sum += checksum_of(buffer.data(), static_cast<std::size_t>(n));
      }
      checksum += sum;
      finished.fetch_add(1);
      finished.notify_one();
    });
  }
  const region timed;
  go = true;
  go.notify_all();
  for (int done = finished.load(); done < kThreads; done = finished.load()) {
    finished.wait(done);
  }
  const sample result = record(arm, w, timed, checksum.load());
  for (auto& thread : threads) {
    thread.join();
  }
  ::close(fd);
  return result;
}

// ---- the file ----

// A fresh temporary directory with the 256 MiB file, read once so that it is in the page cache.
class test_file {
 public:
  test_file() {
    const char* base = std::getenv("TMPDIR");
    std::string name = std::string(base != nullptr ? base : "/tmp") + "/cyan-file-bench-XXXXXX";
    if (::mkdtemp(name.data()) == nullptr) {
      throw std::system_error(errno, std::generic_category(), "mkdtemp");
    }
    dir_ = name;
    path_ = dir_ / "data";
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    std::vector<std::byte> chunk(1 << 20);
    for (std::uint64_t at = 0; at < kFileSize; at += chunk.size()) {
      for (std::size_t i = 0; i < chunk.size(); ++i) {
        chunk[i] = static_cast<std::byte>((at + i) * 131 >> 7);
      }
      if (::pwrite(fd, chunk.data(), chunk.size(), static_cast<off_t>(at)) !=
          static_cast<ssize_t>(chunk.size())) {
        throw std::system_error(errno, std::generic_category(), "pwrite");
      }
    }
    for (std::uint64_t at = 0; at < kFileSize; at += chunk.size()) {
      (void)::pread(fd, chunk.data(), chunk.size(), static_cast<off_t>(at));  // warm
    }
    ::close(fd);
  }
  test_file(const test_file&) = delete;
  test_file& operator=(const test_file&) = delete;
  ~test_file() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path dir_;
  std::filesystem::path path_;
};

constexpr const char* kRing = "cyan fs io_uring";
constexpr const char* kPool = "cyan fs pool";
constexpr const char* kAsio = "asio random_access_file";
constexpr const char* kPread = "blocking pread pool (4 threads)";

bool run_workload(const char* name, const workload& w) {
  cpu_per_read.clear();
  cyan::bench::suite s{ "file", name };
  s.add(kRing, [&w] { return cyan_arm(kRing, w, false); });
  s.add(kPool, [&w] { return cyan_arm(kPool, w, true); });
  s.add(kAsio, [&w] { return asio_arm(kAsio, w); });
  s.add(kPread, [&w] { return pread_pool_arm(kPread, w); });
  const bool ok = s.run();
  for (const char* arm : { kRing, kPool, kAsio, kPread }) {
    std::vector<double> cpu = cpu_per_read[arm];
    std::sort(cpu.begin(), cpu.end());
    std::printf("  CPU per read, %s: %.2f us (median of %zu)\n", arm, cpu[cpu.size() / 2] * 1e6,
                cpu.size());
  }
  s.goal(kRing, kPread, 1.5);
  s.goal(kRing, kAsio, 1.0);
  return ok;
}

}  // namespace

int main() {
  const std::uint64_t random_reads = cyan::bench::env_or("CYAN_BENCH_FILE_READS", 65536);
  const test_file data;
  std::printf("file benchmark: a %llu MiB file in the page cache\n",
              static_cast<unsigned long long>(kFileSize >> 20));
  const workload random{ data.path(), random_reads, 4096, 64, true };
  const workload sequential{ data.path(), 2 * (kFileSize >> 20), std::size_t{ 1 } << 20, 8, false };
  bool ok = run_workload("random 4 KiB, 64 in flight (wall s)", random);
  ok = run_workload("sequential 1 MiB, 8 in flight (wall s)", sequential) && ok;
  return cyan::bench::exit_status(ok);
}
