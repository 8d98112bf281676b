#include "support/descriptors.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <system_error>
#include <thread>

namespace cyan::test {

namespace {

// A descriptor kind that cyan sets up once per thread and keeps for the thread's life (see the
// top of descriptors.h), and how many of it one thread holds at most.
struct per_thread_kind {
  std::string_view target;
  std::size_t per_thread;
};

constexpr per_thread_kind kPerThreadKinds[] = {
  { "anon_inode:[eventpoll]", 1 },  // the loop's epoll (libev)
  { "anon_inode:[eventfd]", 2 },    // the loop's wake-up (libev) and the ring's completion signal
  { "anon_inode:[io_uring]", 1 },   // the ring
  { "anon_inode:[timerfd]", 1 },    // the loop's precise short waits
};

using directory_handle = std::unique_ptr<DIR, int (*)(DIR*)>;

directory_handle open_directory(const std::string& path) {
  directory_handle directory(::opendir(path.c_str()), &::closedir);
  if (!directory) {
    throw std::system_error(errno, std::generic_category(), "opendir " + path);
  }
  return directory;
}

std::vector<open_descriptor> read_descriptors(const std::string& proc) {
  const directory_handle directory = open_directory(proc + "/fd");
  const int own = proc == "/proc/self" ? ::dirfd(directory.get()) : -1;
  std::vector<open_descriptor> descriptors;
  while (const dirent* entry = ::readdir(directory.get())) {
    if (entry->d_name[0] == '.') {
      continue;
    }
    const int fd = std::atoi(entry->d_name);
    char target[4096];
    const ::ssize_t n =
        ::readlinkat(::dirfd(directory.get()), entry->d_name, target, sizeof target);
    if (fd == own || n < 0) {
      continue;  // ours, or closed since the directory was read
    }
    descriptors.push_back({ fd, std::string(target, static_cast<std::size_t>(n)) });
  }
  std::sort(descriptors.begin(), descriptors.end(),
            [](const open_descriptor& a, const open_descriptor& b) { return a.fd < b.fd; });
  return descriptors;
}

std::size_t count_threads(const std::string& proc) {
  const directory_handle directory = open_directory(proc + "/task");
  std::size_t threads = 0;
  while (const dirent* entry = ::readdir(directory.get())) {
    threads += entry->d_name[0] == '.' ? 0 : 1;
  }
  return threads;
}

std::size_t count_of(const std::vector<open_descriptor>& descriptors, std::string_view target) {
  return static_cast<std::size_t>(
      std::count_if(descriptors.begin(), descriptors.end(),
                    [target](const open_descriptor& d) { return d.target == target; }));
}

}  // namespace

std::vector<open_descriptor> added_descriptors(const std::vector<open_descriptor>& before,
                                               const std::vector<open_descriptor>& now) {
  std::vector<open_descriptor> added;
  for (const open_descriptor& d : now) {
    if (std::find(before.begin(), before.end(), d) == before.end()) {
      added.push_back(d);
    }
  }
  return added;
}

descriptor_table read_descriptor_table(pid_t pid) {
  const std::string proc = pid == 0 ? "/proc/self" : "/proc/" + std::to_string(pid);
  descriptor_table table;
  table.descriptors = read_descriptors(proc);
  table.threads = count_threads(proc);
  return table;
}

std::vector<open_descriptor> descriptors_beyond(const descriptor_table& baseline,
                                                const descriptor_table& now) {
  std::vector<open_descriptor> beyond;
  for (const open_descriptor& d : added_descriptors(baseline.descriptors, now.descriptors)) {
    const auto kind = std::find_if(std::begin(kPerThreadKinds), std::end(kPerThreadKinds),
                                   [&d](const per_thread_kind& k) { return k.target == d.target; });
    const bool owned =
        kind != std::end(kPerThreadKinds) &&
        count_of(now.descriptors, kind->target) <=
            std::max(count_of(baseline.descriptors, kind->target), kind->per_thread * now.threads);
    if (!owned) {
      beyond.push_back(d);
    }
  }
  return beyond;
}

std::string describe(const std::vector<open_descriptor>& descriptors) {
  std::string text;
  for (const open_descriptor& d : descriptors) {
    text += "fd " + std::to_string(d.fd) + " -> " + d.target + "\n";
  }
  return text;
}

std::vector<open_descriptor> wait_for_baseline(pid_t pid, const descriptor_table& baseline,
                                               std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    std::vector<open_descriptor> beyond = descriptors_beyond(baseline, read_descriptor_table(pid));
    if (beyond.empty() || std::chrono::steady_clock::now() >= deadline) {
      return beyond;
    }
    // Polling pace for a condition the process reaches on its own; bounded by `limit`.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace cyan::test
