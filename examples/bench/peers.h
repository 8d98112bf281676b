#pragma once

// The pool benchmarks' peers that run as child programs (examples/peers/rust: rayon_peer,
// tokio_peer; examples/peers/go: go_peer), built next to the benchmarks when their toolchain
// is installed. Each is started once, before the first sample (its runtime's threads started
// and warmed, like the in-process arms' pools), and stays up; per sample it reads one workload
// line on stdin and answers with one line "RESULT seconds=S checksum=C", timed inside the
// child around the work alone — the protocol of pipe_benchmark's child arms (process.h).
//
// Workload lines (the same work as the C++ arms, see each benchmark's comment):
//   fib CUTOFF N     fib(N) with a fork per call at n >= CUTOFF
//   sum N            the sum of the elements 0..N-1 of an array made before timing
//   dispatch N       N tiny tasks f(i % 20 + 1) posted from one thread, every result kept
//   pingpong N       N round trips between two threads through two channels of capacity 1
//                    (Go's unbuffered: its idiomatic form, the same hand-over)

#include <memory>
#include <string>

#include "bench/harness.h"
#include "bench/process.h"

namespace cyan::bench {

/// One peer child program, up from construction to destruction.
class peer_program {
 public:
  /// Starts `program` (a file in executable_directory()), or returns null after printing
  /// "<label>: skipped (...)" when it was not built (its toolchain or packages are missing;
  /// the CMake configure step said which).
  static std::unique_ptr<peer_program> start(const std::string& program, const std::string& label);

  explicit peer_program(const std::string& path);
  peer_program(const peer_program&) = delete;
  peer_program& operator=(const peer_program&) = delete;
  ~peer_program();

  /// Runs one workload line in the child and returns its own timing and checksum. Aborts (the
  /// child's stdin closes with us, so it exits) when the child does not answer or does not
  /// support the workload: a benchmark must not print a row without its work.
  sample run(const std::string& workload_line);

 private:
  child_process process_;
};

}  // namespace cyan::bench
