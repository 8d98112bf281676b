#include "cyan/event/signal.h"

#include <csignal>
#include <stdexcept>
#include <string>
#include <utility>

#include "libev.h"

namespace cyan::event {

signal::signal(std::shared_ptr<loop> owner)
    : basic_watcher(detail::watcher_kind::signal, std::move(owner)) {
  if (!get_loop()->is_main()) {
    throw std::invalid_argument(
        "cyan::event::signal: only the main loop (cyan::event::get_main_loop()) may own signal "
        "watchers; libev delivers each signal number to a single loop");
  }
}

void signal::set_number(int number) {
  if (number <= 0 || number >= NSIG || number == SIGKILL || number == SIGSTOP) {
    throw std::invalid_argument("cyan::event::signal: " + std::to_string(number) +
                                " is not a signal number that can be caught");
  }
  const bool was_active = is_active();
  stop();
  ev_signal_set(detail::as<ev_signal>(raw()), number);
  if (was_active) {
    start_raw();
  }
}

int signal::number() const noexcept {
  return detail::as<ev_signal>(raw())->signum;
}

void signal::start() {
  if (number() == 0) {
    throw std::logic_error("cyan::event::signal: call set_number() before start()");
  }
  start_raw();
}

}  // namespace cyan::event
