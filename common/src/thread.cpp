#include "cyan/common/thread.h"

#include <pthread.h>
#include <sched.h>

#include <cerrno>
#include <system_error>

namespace cyan::this_thread {
namespace {

// Linux's limit on a thread name: 16 bytes including the terminating NUL.
constexpr std::size_t kMaxNameLength = 15;

}  // namespace

bool set_name(std::string_view name) noexcept {
  char buffer[kMaxNameLength + 1] = {};
  name.copy(buffer, kMaxNameLength);
  return pthread_setname_np(pthread_self(), buffer) == 0;
}

std::string get_name() {
  char buffer[kMaxNameLength + 1] = {};
  if (pthread_getname_np(pthread_self(), buffer, sizeof buffer) != 0) {
    return {};
  }
  return buffer;
}

void set_affinity(unsigned cpu) {
  if (cpu >= CPU_SETSIZE) {
    throw std::system_error(EINVAL, std::generic_category(), "cyan::this_thread::set_affinity");
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (int error = pthread_setaffinity_np(pthread_self(), sizeof set, &set); error != 0) {
    throw std::system_error(error, std::generic_category(), "cyan::this_thread::set_affinity");
  }
}

}  // namespace cyan::this_thread
