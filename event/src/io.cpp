#include "cyan/event/io.h"

#include <fcntl.h>

#include <cerrno>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include "libev.h"

namespace cyan::event {

static_assert(static_cast<int>(io_events::read) == EV_READ);
static_assert(static_cast<int>(io_events::write) == EV_WRITE);

namespace {

constexpr int kReadWrite = EV_READ | EV_WRITE;

}  // namespace

io::io(std::shared_ptr<loop> owner) : basic_watcher(detail::watcher_kind::io, std::move(owner)) {
  ev_io_set(detail::as<ev_io>(raw()), -1, 0);
}

void io::set_file_descriptor(int fd) {
  if (fd < 0) {
    throw std::invalid_argument("cyan::event::io: a file descriptor cannot be negative");
  }
  if (::fcntl(fd, F_GETFD) == -1) {
    throw std::system_error(errno, std::generic_category(),
                            "cyan::event::io: file descriptor " + std::to_string(fd));
  }
  configure(fd, interest());
}

int io::file_descriptor() const noexcept {
  return detail::as<ev_io>(raw())->fd;
}

void io::set_events(events interest) {
  if ((static_cast<unsigned>(interest) & ~static_cast<unsigned>(kReadWrite)) != 0) {
    throw std::invalid_argument("cyan::event::io: events must be io::read, io::write or both");
  }
  configure(file_descriptor(), interest);
}

io::events io::interest() const noexcept {
  return static_cast<events>(detail::as<ev_io>(raw())->events & kReadWrite);
}

void io::start() {
  if (file_descriptor() < 0) {
    throw std::logic_error("cyan::event::io: call set_file_descriptor() before start()");
  }
  start_raw();
}

// libev only lets an inactive watcher change, so an active one is restarted.
void io::configure(int fd, events interest) {
  const bool was_active = is_active();
  stop();
  ev_io_set(detail::as<ev_io>(raw()), fd, static_cast<int>(interest));
  if (was_active) {
    start_raw();
  }
}

// EV_ERROR means libev could not watch the descriptor and stopped the watcher; libev's advice
// is to treat it as read and write readiness, so the caller's next I/O call reports the error.
void io::on_raw_event(int revents) noexcept {
  dispatch((revents & EV_ERROR) != 0 ? kReadWrite : revents & kReadWrite);
}

}  // namespace cyan::event
