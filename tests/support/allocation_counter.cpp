#include "support/allocation_counter.h"

#include <cstdlib>
#include <new>

namespace {
thread_local bool counting = false;
thread_local int allocations = 0;
}  // namespace

void* operator new(std::size_t size) {
  if (counting) {
    ++allocations;
  }
  if (void* p = std::malloc(size == 0 ? 1 : size)) {
    return p;
  }
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace cyan::test {

void start_counting_allocations() noexcept {
  allocations = 0;
  counting = true;
}

int stop_counting_allocations() noexcept {
  counting = false;
  return allocations;
}

}  // namespace cyan::test
