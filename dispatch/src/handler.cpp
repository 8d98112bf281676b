#include "cyan/dispatch/handler.h"

#include <cstdio>
#include <stdexcept>

namespace cyan::dispatch {

void handler::on_message(std::any&& /*message*/) {
  throw std::logic_error(
      "cyan::dispatch::handler: a message was sent to a handler that does not override "
      "on_message()");
}

void handler::on_error(std::exception& error) noexcept {
  std::fprintf(stderr, "cyan::dispatch::handler_thread: unhandled exception: %s\n", error.what());
}

}  // namespace cyan::dispatch
