#include "cyan/event/detail/buffer_ring.h"

#include <liburing.h>
#include <sys/mman.h>

namespace cyan::event::detail {
namespace {

constexpr std::size_t kRingBytes = buffer_ring::kCount * sizeof(io_uring_buf);
constexpr std::size_t kMemoryBytes = buffer_ring::kCount * buffer_ring::kSize;

void* map(std::size_t bytes) noexcept {
  void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
  return memory == MAP_FAILED ? nullptr : memory;
}

}  // namespace

std::unique_ptr<buffer_ring> buffer_ring::set_up(io_uring& ring) noexcept {
  void* shared = map(kRingBytes);
  void* memory = map(kMemoryBytes);
  if (shared == nullptr || memory == nullptr) {
    if (shared != nullptr) {
      ::munmap(shared, kRingBytes);
    }
    if (memory != nullptr) {
      ::munmap(memory, kMemoryBytes);
    }
    return nullptr;
  }
  io_uring_buf_reg registration{};
  registration.ring_addr = reinterpret_cast<std::uintptr_t>(shared);
  registration.ring_entries = kCount;
  registration.bgid = kGroup;
  if (io_uring_register_buf_ring(&ring, &registration, 0) < 0) {
    ::munmap(shared, kRingBytes);
    ::munmap(memory, kMemoryBytes);
    return nullptr;
  }
  std::unique_ptr<buffer_ring> buffers(
      new buffer_ring(static_cast<io_uring_buf_ring*>(shared), static_cast<std::byte*>(memory)));
  io_uring_buf_ring_init(buffers->shared_);
  buffers->taken_ = kCount;
  for (unsigned id = 0; id < kCount; ++id) {
    buffers->give_back(static_cast<std::uint16_t>(id));
  }
  buffers->publish();
  return buffers;
}

// The ring released its registration first (io_uring_queue_exit); the kernel unpins the pages.
buffer_ring::~buffer_ring() {
  ::munmap(shared_, kRingBytes);
  ::munmap(memory_, kMemoryBytes);
}

void buffer_ring::give_back(std::uint16_t id) noexcept {
  io_uring_buf_ring_add(shared_, memory_ + std::size_t{ id } * kSize, kSize, id,
                        io_uring_buf_ring_mask(kCount), static_cast<int>(returned_++));
  --taken_;
}

void buffer_ring::publish() noexcept {
  if (returned_ != 0) {
    io_uring_buf_ring_advance(shared_, static_cast<int>(returned_));
    returned_ = 0;
  }
}

}  // namespace cyan::event::detail
