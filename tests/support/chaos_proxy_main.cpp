// chaos_proxy: the tests' chaos proxy (support/chaos_proxy.h) as a program, for the soak
// (scripts/soak.py) and for trying a client or a server by hand.
//
//   chaos_proxy --target-port N [--faults TO_SERVER/TO_CLIENT]...
//
// Listens on a free port of 127.0.0.1, prints "listening on 127.0.0.1:PORT" and forwards each
// connection to 127.0.0.1:N. Each --faults is one connection's pair of faults: what it does to
// the bytes the client sends, then (after a '/', which may be left out with what follows) to
// the bytes the server sends; each a comma-separated list of
//
//   split               forward one byte per write
//   delay=MS            wait MS milliseconds before each write
//   reset-after=B       after B bytes, reset both sides
//   half-close-after=B  after B bytes, end the destination's stream; drop what follows
//   stall-after=B       after B bytes, forward nothing more
//
// or "none" (an empty list too). Several --faults are taken in turn: connection i, in accept
// order, gets the (i mod K)-th; without any it only forwards. SIGINT or SIGTERM stops it; it
// then prints its figures on one line and exits 0:
//
//   STATS accepted=... bytes_to_server=... bytes_to_client=... writes_to_server=...
//         writes_to_client=... resets=... half_closes=... stalls=... server_ends=... closed=...
//
// (one line). A bad argument: a message on stderr, exit 2; the proxy cannot listen: exit 1.

#include <signal.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "support/chaos_proxy.h"

namespace {

using cyan::test::chaos_proxy;
using action = chaos_proxy::fault::action;

constexpr const char* kUsage =
    "usage: chaos_proxy --target-port N [--faults TO_SERVER/TO_CLIENT]...\n"
    "  a loopback TCP proxy to 127.0.0.1:N that misbehaves on purpose; each --faults is one\n"
    "  connection's faults (several: taken in turn), each direction a comma-separated list of\n"
    "    split               forward one byte per write\n"
    "    delay=MS            wait MS milliseconds before each write\n"
    "    reset-after=B       after B bytes, reset both sides\n"
    "    half-close-after=B  after B bytes, end the destination's stream\n"
    "    stall-after=B       after B bytes, forward nothing more\n"
    "  or none. Prints \"listening on 127.0.0.1:PORT\"; on SIGINT or SIGTERM a STATS line.\n"
    "  example: chaos_proxy --target-port 8080 --faults split,delay=2/split --faults "
    "reset-after=100\n";

// A delay above this is a typo rather than a plan.
constexpr std::uint64_t kMaxDelayMs = 60'000;

// A decimal number up to `most`, all of `text`.
std::uint64_t number(std::string_view text, std::uint64_t most, std::string_view what) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value > most) {
    throw std::invalid_argument(std::string(what) + " wants a number up to " +
                                std::to_string(most) + ", not \"" + std::string(text) + "\"");
  }
  return value;
}

// One item of a direction's list into `f`.
void add_item(std::string_view item, chaos_proxy::fault& f) {
  const auto equals = item.find('=');
  const std::string_view name = item.substr(0, equals);
  const std::string_view value = equals == std::string_view::npos ? "" : item.substr(equals + 1);
  const auto action_after = [&](action a) {
    if (f.after != action::none) {
      throw std::invalid_argument(
          "one direction takes one of reset-after, half-close-after "
          "and stall-after, not two");
    }
    f.after = a;
    f.after_bytes = number(value, std::numeric_limits<std::size_t>::max(), name);
  };
  const bool valued = equals != std::string_view::npos;
  if (item == "split") {
    f.split = true;
  } else if (name == "delay" && valued) {
    f.delay = std::chrono::milliseconds(number(value, kMaxDelayMs, name));
  } else if (name == "reset-after" && valued) {
    action_after(action::reset);
  } else if (name == "half-close-after" && valued) {
    action_after(action::half_close);
  } else if (name == "stall-after" && valued) {
    action_after(action::stall);
  } else if (item != "none") {
    throw std::invalid_argument("unknown fault \"" + std::string(item) + "\"");
  }
}

// A direction's comma-separated list.
chaos_proxy::fault parse_direction(std::string_view text) {
  chaos_proxy::fault f;
  while (!text.empty()) {
    const auto comma = text.find(',');
    add_item(text.substr(0, comma), f);
    text = comma == std::string_view::npos ? "" : text.substr(comma + 1);
  }
  return f;
}

// "TO_SERVER/TO_CLIENT", or "TO_SERVER" alone.
chaos_proxy::connection_faults parse_pair(std::string_view text) {
  const auto slash = text.find('/');
  if (slash != std::string_view::npos && text.find('/', slash + 1) != std::string_view::npos) {
    throw std::invalid_argument("--faults takes two directions, TO_SERVER/TO_CLIENT: \"" +
                                std::string(text) + "\"");
  }
  return { .to_server = parse_direction(text.substr(0, slash)),
           .to_client = parse_direction(slash == std::string_view::npos ? std::string_view()
                                                                        : text.substr(slash + 1)) };
}

chaos_proxy::options parse_arguments(int argc, char** argv) {
  chaos_proxy::options settings;
  std::vector<chaos_proxy::connection_faults> pairs;
  for (int i = 1; i < argc; ++i) {
    const std::string_view name = argv[i];
    if (name != "--target-port" && name != "--faults") {
      throw std::invalid_argument("unknown option \"" + std::string(name) + "\"");
    }
    if (i + 1 == argc) {
      throw std::invalid_argument(std::string(name) + " wants a value");
    }
    const std::string_view value = argv[++i];
    if (name == "--target-port") {
      settings.target_port = static_cast<unsigned>(number(value, 65535, name));
    } else {
      pairs.push_back(parse_pair(value));
    }
  }
  if (settings.target_port == 0) {
    throw std::invalid_argument("--target-port is required (1-65535)");
  }
  if (!pairs.empty()) {
    settings.to_server = pairs.front().to_server;
    settings.to_client = pairs.front().to_client;
    settings.then.assign(pairs.begin() + 1, pairs.end());
  }
  return settings;
}

void print_statistics(const chaos_proxy::statistics& s) {
  const auto n = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
  std::printf(
      "STATS accepted=%llu bytes_to_server=%llu bytes_to_client=%llu writes_to_server=%llu "
      "writes_to_client=%llu resets=%llu half_closes=%llu stalls=%llu server_ends=%llu "
      "closed=%llu\n",
      n(s.accepted), n(s.bytes_to_server), n(s.bytes_to_client), n(s.writes_to_server),
      n(s.writes_to_client), n(s.resets), n(s.half_closes), n(s.stalls), n(s.server_ends),
      n(s.closed));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string_view(argv[1]) == "--help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  chaos_proxy::options settings;
  try {
    settings = parse_arguments(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "chaos_proxy: %s\n%s", e.what(), kUsage);
    return 2;
  }
  // Blocked before the proxy's thread starts (it inherits the mask): the signals wait for
  // sigwait() below whenever they come.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  try {
    chaos_proxy proxy(settings);
    std::printf("listening on 127.0.0.1:%u\n", proxy.port());
    std::fflush(stdout);
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    proxy.stop();
    print_statistics(proxy.stats());
  } catch (const std::system_error& e) {
    std::fprintf(stderr, "chaos_proxy: %s\n", e.what());
    return 1;
  }
  return 0;
}
