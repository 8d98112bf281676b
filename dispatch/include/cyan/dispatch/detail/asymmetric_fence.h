#pragma once

#include <atomic>

namespace cyan::dispatch::detail {

/// An asymmetric store-load fence: the frequent side (a producer posting) pays only a compiler
/// barrier, the rare side (a consumer about to sleep, or finishing) pays a heavy barrier that
/// makes every running thread of the process execute a full memory barrier (Linux
/// membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED): a system call, and an interrupt of each other
/// running thread; its cost is in docs/bench/notes.md).
///
/// Guarantee, for `light` and `heavy` used as
///   producer: X.store(1, relaxed); light(); r1 = Y.load(acquire);
///   consumer: Y.fetch_or(1, seq_cst); heavy(); r2 = X.load(acquire);
/// r1 == 0 && r2 == 0 is impossible: the producer's full barrier forced by heavy() comes either
/// after its store (which is then visible to the consumer's load) or before its load (which
/// then sees the consumer's RMW, already globally visible when heavy() started). This is the
/// scheme of Linux RCU and folly's asymmetric barriers; C++ has no name for it.
///
/// Without membarrier (old kernels, seccomp), light() becomes a real seq_cst fence — via a
/// seq_cst store in light_store() — and heavy() a no-op. The choice is made once, the first
/// time enable() runs (an inbox's constructor), before any producer can post to that inbox.
class asymmetric_fence {
 public:
  /// Registers the process for membarrier once; afterwards asymmetric() tells the mode.
  static void enable() noexcept;

  /// True when producers may use the light path. [any thread]
  [[nodiscard]] static bool asymmetric() noexcept {
    // relaxed: written once in enable(), before the inbox whose producers read it exists.
    return mode_.load(std::memory_order_relaxed) == kAsymmetric;
  }

  /// Stores `value` in `flag` on the producer side, ordered before the producer's next load.
  static void light_store(std::atomic<bool>& flag, bool value) noexcept {
    if (asymmetric()) {
      flag.store(value, std::memory_order_relaxed);  // ordered by heavy(), see above
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
      flag.store(value, std::memory_order_seq_cst);
    }
  }

  /// The consumer side. Never fails once enable() chose the asymmetric mode.
  static void heavy() noexcept;

 private:
  static constexpr int kUnknown = 0;
  static constexpr int kAsymmetric = 1;
  static constexpr int kSymmetric = 2;
  static constinit inline std::atomic<int> mode_{ kUnknown };
};

}  // namespace cyan::dispatch::detail
