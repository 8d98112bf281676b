// A tls_stream's server side against any bytes from a client: the handshake (cyan's record
// reading under OpenSSL's parser) and, should one complete, the reads after it. The input comes
// over a socket pair, followed by the end of stream; what the server sends goes unread. What
// must hold: accept() and the reads end with a std::system_error (a TLS error, the end of
// stream, truncation), never a timeout (nothing may wait for bytes after the end), and nothing
// leaks or overflows (ASan). The seeds are ClientHellos recorded from openssl s_client.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>

#include "cyan/dispatch.h"
#include "cyan/net.h"
#include "cyan/net/tls.h"
#include "fuzz_check.h"
#include "socket_pair.h"
#include "support/tls_certificates.h"

namespace {

using namespace std::chrono_literals;

cyan::dispatch::handler_thread& server_thread() {
  static cyan::dispatch::handler_thread thread;
  return thread;
}

const cyan::net::tls_context& server_context() {
  static const cyan::net::tls_context context = cyan::net::tls_context::server(
      { .certificate_chain_file = cyan::test::tls_certificates() + "/server.crt",
        .private_key_file = cyan::test::tls_certificates() + "/server.key" });
  return context;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > cyan::fuzz::kMaxInput) {
    return 0;
  }
  const cyan::net::tls_context& context = server_context();
  cyan::fuzz::socket_pair pair(data, size);
  cyan::dispatch::co_spawn(server_thread(), [&]() -> cyan::dispatch::task<> {
    try {
      cyan::net::tls_stream stream = co_await cyan::net::tls_stream::accept(
          cyan::net::tcp_socket::adopt(pair.take()), context, 5s);
      std::byte buffer[4096];
      for (std::size_t i = 0; i <= size; ++i) {
        if (co_await stream.read_some(buffer, 5s) == 0) {
          co_return;  // close_notify
        }
      }
      CYAN_FUZZ_CHECK(false);  // more reads than bytes
    } catch (const std::system_error& e) {
      CYAN_FUZZ_CHECK(e.code() != std::errc::timed_out);
    }
  }).get();
  return 0;
}
