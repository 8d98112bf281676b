#pragma once

// How one stop source follows another stop token: a spawned task's own source follows the
// caller's token and the executor's discard token (spawn_state.h), when_any's children's
// source follows the awaiting task's token (when_all.h).

#include <stop_token>

namespace cyan::dispatch::detail {

/// The callback of a std::stop_callback that passes a stop request on to `target`.
struct forward_stop {
  std::stop_source* target;
  void operator()() const noexcept { target->request_stop(); }
};

/// While it lives, a stop request of the token it was made with is one of `target`'s too:
/// `stop_forwarder follow(token, forward_stop{ &source })`.
using stop_forwarder = std::stop_callback<forward_stop>;

}  // namespace cyan::dispatch::detail
