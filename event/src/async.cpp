#include "cyan/event/async.h"

#include <utility>

#include "libev.h"

namespace cyan::event {

// Memory ordering: every access to sent_ is seq_cst. A send() is an RMW, so the callback's
// exchange (also an RMW) reads the end of a release sequence that contains every send() since
// the previous callback and synchronizes with all of them. seq_cst also orders sent_ against
// libev's own fenced `sent` flag in the start() race described there.

async::async(std::shared_ptr<loop> owner)
    : basic_watcher(detail::watcher_kind::async, std::move(owner)) {}

async::async(async&& other) noexcept : basic_watcher(std::move(other)) {
  take_sent(other);
}

async& async::operator=(async&& other) noexcept {
  if (this != &other) {
    basic_watcher::operator=(std::move(other));
    take_sent(other);
  }
  return *this;
}

void async::take_sent(async& other) noexcept {
  sent_.value.store(other.sent_.value.exchange(false));
  if (sent_.value.load() && is_active()) {
    ev_async_send(get_loop()->native_handle(), detail::as<ev_async>(raw()));
  }
}

// ev_async_start clears libev's flag, so a send() that ran before it (or races with it) would be
// lost; re-sending when sent_ is set covers both: a racing sender either set sent_ before this
// load, or sets libev's flag after ev_async_start cleared it.
void async::start() {
  start_raw();
  if (sent_.value.load()) {
    ev_async_send(get_loop()->native_handle(), detail::as<ev_async>(raw()));
  }
}

// Only the sender that turns sent_ on wakes the loop; later senders find it on and know that a
// callback, which will synchronize with them too, is still to come.
void async::send() noexcept {
  if (!sent_.value.exchange(true)) {
    ev_async_send(get_loop()->native_handle(), detail::as<ev_async>(raw()));
  }
}

// libev may report a send whose sent_ an earlier callback already took (the send raced with that
// callback); its work was seen then, so nothing runs.
void async::on_raw_event(int revents) noexcept {
  if (sent_.value.exchange(false)) {
    dispatch(revents);
  }
}

}  // namespace cyan::event
