#pragma once

#include <cstddef>

namespace cyan {

/// Size, in bytes, that keeps two objects from sharing a cache line (false sharing).
/// 64 on x86-64 and most ARM cores; 128 on Apple silicon and POWER, whose lines (or adjacent-line
/// prefetch pairs) are 128 bytes. std::hardware_destructive_interference_size is not used
/// because GCC warns that its value may differ between translation units.
#if defined(__aarch64__) && defined(__APPLE__) || defined(__powerpc64__)
inline constexpr std::size_t cache_line_size = 128;
#else
inline constexpr std::size_t cache_line_size = 64;
#endif

/// A value alone on its cache line(s): for indexes and counters that different threads write.
template <typename T>
struct alignas(cache_line_size) cache_padded {
  T value{};
};

static_assert(sizeof(cache_padded<char>) == cache_line_size);
static_assert(alignof(cache_padded<long>) == cache_line_size);

/// Tells the CPU that the calling thread is spinning (pause on x86, yield on ARM). [any thread]
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace cyan
