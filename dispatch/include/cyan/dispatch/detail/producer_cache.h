#pragma once

#include <cstddef>
#include <cstdint>

namespace cyan::dispatch::detail {

class inbox;
class inbox_lane;

/// One entry of a producer thread's direct-mapped cache of its lanes: inbox id -> lane.
struct hot_lane {
  std::uint64_t target = 0;  // 0: empty (inbox ids start at 1)
  inbox_lane* lane = nullptr;
};

inline constexpr std::size_t kHotLanes = 8;

/// The calling thread's most recently used lanes, indexed by inbox id modulo kHotLanes.
/// Trivially destructible and constant-initialised, so reading it costs one TLS access with no
/// guard. Filled and cleared by find_lane() and the thread-exit clean-up (producer_cache.cpp).
extern constinit thread_local hot_lane tls_hot_lanes[kHotLanes];

/// The calling thread's lane into the inbox `target`, if it is in the hot cache. [any thread]
inline inbox_lane* find_hot_lane(std::uint64_t target) noexcept {
  const hot_lane& slot = tls_hot_lanes[target % kHotLanes];
  return slot.target == target ? slot.lane : nullptr;
}

/// The slow path: looks the lane up in the thread's full table, counts a post to an inbox the
/// thread has no lane into yet, and opens the lane (inbox::open_lane) once the thread has
/// posted there often enough. Returns nullptr when the post should go through the shared queue
/// (no lane yet, or the thread is exiting). Throws what open_lane() throws. [any thread]
inbox_lane* find_lane(inbox& target);

/// Opens the calling thread's lane into `target` now, however few posts it made there: a
/// handler thread calls it for its own inbox as it starts, so that its posts to itself (a
/// coroutine resuming through its own queue, see io_wait's fair reads) never allocate, not even
/// the first ones. Throws what open_lane() throws. [any thread]
void open_lane_now(inbox& target);

}  // namespace cyan::dispatch::detail
