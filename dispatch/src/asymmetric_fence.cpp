#include "cyan/dispatch/detail/asymmetric_fence.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace cyan::dispatch::detail {
namespace {

long membarrier(int command) noexcept {
  return syscall(SYS_membarrier, command, 0, 0);
}

bool register_membarrier() noexcept {
  const long supported = membarrier(MEMBARRIER_CMD_QUERY);
  return supported > 0 && (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
         membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}

}  // namespace

void asymmetric_fence::enable() noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
    // relaxed: published to producers and consumers by the creation of the inbox (and its
    // thread) that called enable() first; see asymmetric().
    mode_.store(register_membarrier() ? kAsymmetric : kSymmetric, std::memory_order_relaxed);
  });
}

void asymmetric_fence::heavy() noexcept {
  if (!asymmetric()) {
    return;  // producers use seq_cst stores; the consumer's seq_cst RMW and loads suffice
  }
  if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
    std::perror("cyan::dispatch: membarrier failed after registration");
    std::abort();
  }
}

}  // namespace cyan::dispatch::detail
