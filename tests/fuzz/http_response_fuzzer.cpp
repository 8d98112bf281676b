// load_tester's HTTP response reader against any bytes from a server. The first input byte
// chooses the reader's header capacity (small, so its limit is reached, or the default); the
// rest comes over a socket pair, followed by the end of stream. What must hold: every response
// read has a status from 100 to 599; reading ends with http_protocol_error or the end of stream (or
// a reset), never a timeout: the reader must not wait for bytes after the end.

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <system_error>

#include "cyan/dispatch.h"
#include "cyan/net.h"
#include "fuzz_check.h"
#include "load/http_response_reader.h"
#include "socket_pair.h"

namespace {

using namespace std::chrono_literals;

cyan::dispatch::handler_thread& reader_thread() {
  static cyan::dispatch::handler_thread thread;
  return thread;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1 || size > cyan::fuzz::kMaxInput) {
    return 0;
  }
  const std::size_t capacity = (data[0] & 1) != 0 ? 64 : 16 * 1024;
  cyan::fuzz::socket_pair pair(data + 1, size - 1);
  cyan::dispatch::co_spawn(reader_thread(), [&]() -> cyan::dispatch::task<> {
    cyan::net::tcp_socket socket = cyan::net::tcp_socket::adopt(pair.take());
    cyan::examples::http_response_reader reader(capacity);
    try {
      // Each response takes at least a status line, so the input bounds the loop.
      for (std::size_t i = 0; i <= size; ++i) {
        const cyan::examples::http_response r = co_await reader.read(socket, 5s);
        CYAN_FUZZ_CHECK(r.status >= 100 && r.status <= 599);
      }
      CYAN_FUZZ_CHECK(false);  // more responses than bytes
    } catch (const cyan::examples::http_protocol_error&) {
    } catch (const std::system_error& e) {
      CYAN_FUZZ_CHECK(e.code() != std::errc::timed_out);
    }
  }).get();
  return 0;
}
