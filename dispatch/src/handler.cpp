#include "cyan/dispatch/handler.h"

#include <stdexcept>

#include "cyan/common/detail/print_exception.h"

namespace cyan::dispatch {

void handler::on_message(std::any&& /*message*/) {
  throw std::logic_error(
      "cyan::dispatch::handler: a message was sent to a handler that does not override "
      "on_message()");
}

void handler::on_error(std::exception& error) noexcept {
  cyan::detail::print_exception("cyan::dispatch::handler_thread", "unhandled exception", error);
}

}  // namespace cyan::dispatch
