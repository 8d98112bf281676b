#include "bench/process.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <system_error>
#include <thread>
#include <utility>

extern char** environ;

namespace cyan::bench {

namespace {

// Our environment with `additions` ("NAME=value") replacing or extending it. Built before fork():
// the child may only make async-signal-safe calls, and setenv() allocates.
std::vector<std::string> environment_with(const std::vector<std::string>& additions) {
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const std::string name = text.substr(0, text.find('=') + 1);  // "NAME="
    const bool replaced =
        !name.empty() && std::any_of(additions.begin(), additions.end(),
                                     [&](const auto& added) { return added.rfind(name, 0) == 0; });
    if (!replaced) {
      entries.push_back(text);
    }
  }
  entries.insert(entries.end(), additions.begin(), additions.end());
  return entries;
}

std::vector<char*> pointers_to(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (const std::string& text : strings) {
    pointers.push_back(const_cast<char*>(text.c_str()));
  }
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace

child_process::child_process(const std::vector<std::string>& argv, int cpu, bool piped_input,
                             bool piped_errors, const std::vector<std::string>& environment) {
  int pipe_fds[2];
  int input_fds[2] = { -1, -1 };
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    throw std::system_error(errno, std::generic_category(), "pipe2");
  }
  if (piped_input && ::pipe2(input_fds, O_CLOEXEC) != 0) {
    const int error = errno;
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    throw std::system_error(error, std::generic_category(), "pipe2");
  }
  std::vector<char*> args = pointers_to(argv);
  const std::vector<std::string> environment_entries = environment_with(environment);
  std::vector<char*> environment_pointers = pointers_to(environment_entries);
  pid_ = ::fork();
  if (pid_ < 0) {
    const int error = errno;
    for (const int fd : { pipe_fds[0], pipe_fds[1], input_fds[0], input_fds[1] }) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
    throw std::system_error(error, std::generic_category(), "fork");
  }
  if (pid_ == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    if (piped_errors) {
      ::dup2(pipe_fds[1], STDERR_FILENO);
    }
    if (input_fds[0] >= 0) {
      ::dup2(input_fds[0], STDIN_FILENO);
    }
    if (cpu >= 0) {
      ::cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      ::sched_setaffinity(0, sizeof set, &set);
    }
    ::execve(args[0], args.data(), environment_pointers.data());
    std::fprintf(stderr, "cannot run %s\n", args[0]);
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  out_ = pipe_fds[0];
  if (input_fds[0] >= 0) {
    ::close(input_fds[0]);
    in_ = input_fds[1];
  }
}

child_process::~child_process() {
  if (!reaped_) {
    (void)stop(std::chrono::seconds(2));
  }
  if (out_ >= 0) {
    ::close(out_);
  }
  close_input();
}

bool child_process::write_input(const std::string& text) {
  // A child that has stopped reading would raise SIGPIPE in us: report it as false instead.
  static const bool sigpipe_ignored = ::signal(SIGPIPE, SIG_IGN) != SIG_ERR;
  (void)sigpipe_ignored;
  std::size_t done = 0;
  while (in_ >= 0 && done < text.size()) {
    const ::ssize_t n = ::write(in_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return in_ >= 0;
}

void child_process::close_input() {
  if (in_ >= 0) {
    ::close(in_);
    in_ = -1;
  }
}

std::string child_process::read_line(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (const auto end = pending_.find('\n'); end != std::string::npos) {
      std::string line = pending_.substr(0, end);
      pending_.erase(0, end + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    ::pollfd ready{ out_, POLLIN, 0 };
    if (left.count() <= 0 || ::poll(&ready, 1, static_cast<int>(left.count())) <= 0) {
      return {};
    }
    char buffer[4096];
    const ::ssize_t n = ::read(out_, buffer, sizeof buffer);
    if (n <= 0) {
      return std::exchange(pending_, {});
    }
    pending_.append(buffer, static_cast<std::size_t>(n));
  }
}

std::string child_process::read_all(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::string all = std::exchange(pending_, {});
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    ::pollfd ready{ out_, POLLIN, 0 };
    if (left.count() <= 0 || ::poll(&ready, 1, static_cast<int>(left.count())) <= 0) {
      return all;
    }
    char buffer[4096];
    const ::ssize_t n = ::read(out_, buffer, sizeof buffer);
    if (n <= 0) {
      return all;  // its end
    }
    all.append(buffer, static_cast<std::size_t>(n));
  }
}

double child_process::cpu_seconds() const {
  // The process's CPU-time clock counts in nanoseconds; /proc's utime and stime in clock ticks
  // (10 ms), too coarse for samples of a tenth of a second. Both are the same total (the kernel
  // scales utime + stime to the scheduler's runtime), so /proc is only the fallback.
  clockid_t clock{};
  timespec now{};
  if (::clock_getcpuclockid(pid_, &clock) == 0 && ::clock_gettime(clock, &now) == 0) {
    return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
  }
  std::ifstream stat("/proc/" + std::to_string(pid_) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces) start after the last ')'.
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14 || i == 15) {  // utime, stime
      ticks += std::stod(field);
    }
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

int child_process::wait(std::chrono::milliseconds limit) {
  if (reaped_) {
    return status_;
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      reaped_ = true;
      return status_ = -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  reaped_ = true;
  return status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int child_process::stop(std::chrono::milliseconds limit) {
  if (!reaped_) {
    ::kill(pid_, SIGTERM);
  }
  return wait(limit);
}

int last_allowed_cpu() {
  ::cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) {
    return 0;
  }
  for (int cpu = CPU_SETSIZE - 1; cpu > 0; --cpu) {
    if (CPU_ISSET(cpu, &set)) {
      return cpu;
    }
  }
  return 0;
}

busy_loop_process::busy_loop_process(int cpu) : cpu_(cpu >= 0 ? cpu : last_allowed_cpu()) {
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) {
    throw std::system_error(errno, std::generic_category(), "pipe2");
  }
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) {
    const int error = errno;
    ::close(ready[0]);
    ::close(ready[1]);
    throw std::system_error(error, std::generic_category(), "fork");
  }
  if (pid_ == 0) {
    // Only system calls here: the parent may have other threads (no allocation after fork()).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) {
      ::_exit(0);  // the parent died before the line above
    }
    ::cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu_, &set);
    ::sched_setaffinity(0, sizeof set, &set);
    const char byte = 1;
    (void)!::write(ready[1], &byte, 1);  // on its CPU now: the arm may start
    ::close(ready[1]);
    for (;;) {
      asm volatile("" ::: "memory");  // a loop the compiler keeps
    }
  }
  ::close(ready[1]);
  // Until the child runs on its CPU (bounded: a child that never reports is busy soon anyway).
  ::pollfd readable{ ready[0], POLLIN, 0 };
  char byte = 0;
  if (::poll(&readable, 1, 2000) == 1) {
    (void)!::read(ready[0], &byte, 1);
  }
  ::close(ready[0]);
}

busy_loop_process::~busy_loop_process() {
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

unsigned port_of_listening_line(const std::string& line) {
  const auto colon = line.rfind(':');
  if (line.rfind("listening on ", 0) != 0 || colon == std::string::npos) {
    return 0;
  }
  return static_cast<unsigned>(std::strtoul(line.c_str() + colon + 1, nullptr, 10));
}

std::map<std::string, double> parse_result_line(const std::string& output) {
  std::map<std::string, double> values;
  const auto start = output.rfind("RESULT ");
  if (start == std::string::npos) {
    return values;
  }
  std::istringstream fields(output.substr(start + 7, output.find('\n', start) - start - 7));
  for (std::string pair; fields >> pair;) {
    if (const auto eq = pair.find('='); eq != std::string::npos) {
      values[pair.substr(0, eq)] = std::strtod(pair.c_str() + eq + 1, nullptr);
    }
  }
  return values;
}

std::string executable_directory() {
  char path[4096];
  const ::ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) {
    return ".";
  }
  std::string text(path, static_cast<std::size_t>(n));
  return text.substr(0, text.rfind('/'));
}

}  // namespace cyan::bench
