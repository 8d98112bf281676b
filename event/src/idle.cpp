#include "cyan/event/idle.h"

#include <utility>

namespace cyan::event {

idle::idle(std::shared_ptr<loop> owner)
    : basic_watcher(detail::watcher_kind::idle, std::move(owner)) {}

}  // namespace cyan::event
