#pragma once

// Private to the event module: the only place <ev.h> is included.
#include <ev.h>

#include <new>

#include "cyan/event/detail/watcher.h"
#include "cyan/event/loop.h"

namespace cyan::event::detail {

template <typename Raw>
inline constexpr bool fits_raw_watcher = sizeof(Raw) <= sizeof(raw_watcher) &&
                                         alignof(Raw) <= alignof(raw_watcher);

static_assert(fits_raw_watcher<ev_io> && fits_raw_watcher<ev_timer> &&
                  fits_raw_watcher<ev_signal> && fits_raw_watcher<ev_async> &&
                  fits_raw_watcher<ev_idle>,
              "raise kRawWatcherSize: this libev's watcher structs are larger");

/// The libev struct living in `storage` (constructed there by watcher_base or loop).
template <typename Raw>
Raw* as(raw_watcher& storage) noexcept {
  return std::launder(reinterpret_cast<Raw*>(storage.bytes));
}

template <typename Raw>
const Raw* as(const raw_watcher& storage) noexcept {
  return std::launder(reinterpret_cast<const Raw*>(storage.bytes));
}

/// The callback libev calls for a watcher of type Raw: hands the event to its cyan watcher.
template <typename Raw>
struct libev_callback {
  static void call(struct ev_loop*, Raw* raw, int revents) noexcept {
    static_cast<watcher_base*>(raw->data)->on_raw_event(revents);
  }
};

}  // namespace cyan::event::detail
