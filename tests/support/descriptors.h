#pragma once

// A process's open descriptors as /proc/<pid>/fd shows them, for the tests' leak checks: the
// example servers' tests compare a server's table with the one it had when it started
// listening, and every test executable compares its own before and after each test
// (descriptor_check.h).
//
// What counts as a leak. Every descriptor opened since the baseline and still open does, with
// one bounded exception: cyan sets up some descriptors once per thread, on the thread's first
// use, and keeps them for the thread's life — its event loop's epoll and eventfd (libev), its
// io_uring ring and the eventfd that ring signals, the timerfd of its precise short waits.
// Threads that outlive the baseline's moment (a test executable's main thread and the global
// pool's workers, a server's handler threads, whose rings are set up just after it says
// "listening on") may set theirs up later. So descriptors of those anonymous kinds count only
// beyond what the threads alive now can own: per kind, at most one per thread (eventfd: two).
// Sockets, pipes, files and every other kind count from the first one. A thread that exits
// without closing its loop or ring is caught here only once the threads still alive hold
// theirs; tests/dispatch/handler_thread_test.cpp checks that a thread's own close with it, one
// by one.

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace cyan::test {

/// One open descriptor: its number and what /proc/<pid>/fd/<number> links to ("socket:[123]",
/// "pipe:[45]", "anon_inode:[eventfd]", "/a/path").
struct open_descriptor {
  int fd = -1;
  std::string target;

  friend bool operator==(const open_descriptor&, const open_descriptor&) = default;
};

/// A process's descriptors at one moment (by number) and how many threads it had then.
struct descriptor_table {
  std::vector<open_descriptor> descriptors;
  std::size_t threads = 0;
};

/// The descriptor table of process `pid` (0: this process, without the descriptor this call
/// reads the directory through). Throws std::system_error when /proc/<pid> cannot be read (no
/// such process, or not ours).
[[nodiscard]] descriptor_table read_descriptor_table(pid_t pid = 0);

/// The descriptors of `now` that `before` does not hold (the same number linking to the same
/// thing): opened since and still open, whatever their kind.
[[nodiscard]] std::vector<open_descriptor> added_descriptors(
    const std::vector<open_descriptor>& before, const std::vector<open_descriptor>& now);

/// The descriptors `now` holds beyond `baseline` (see the top of this file): opened since,
/// still open, and not a thread's own loop, ring or timer descriptor that `now`'s threads can
/// account for. Empty: no leak.
[[nodiscard]] std::vector<open_descriptor> descriptors_beyond(const descriptor_table& baseline,
                                                              const descriptor_table& now);

/// "fd 7 -> socket:[123]" lines, one per descriptor, for a failure message.
[[nodiscard]] std::string describe(const std::vector<open_descriptor>& descriptors);

/// Waits up to `limit`, looking every few milliseconds, until process `pid` (0: this one) holds
/// no descriptor beyond `baseline`; returns the ones it still holds beyond it (empty: back to
/// the baseline). A server closes a connection asynchronously, after its client saw the end,
/// so this is a bounded wait for a condition.
[[nodiscard]] std::vector<open_descriptor> wait_for_baseline(pid_t pid,
                                                             const descriptor_table& baseline,
                                                             std::chrono::milliseconds limit);

}  // namespace cyan::test
