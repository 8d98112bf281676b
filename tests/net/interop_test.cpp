// cyan's sockets against another implementation: Python's asyncio, as server and as client.
// Each Python program serves or makes one connection on 127.0.0.1 and gives up after 20 s.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cyan/dispatch.h"
#include "cyan/net.h"
#include "net/net_support.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::net::endpoint;
using cyan::net::tcp_listener;
using cyan::net::tcp_socket;

// An asyncio echo server for one connection: prints its port, echoes until end of stream.
constexpr const char* kPythonEchoServer = R"(
import asyncio, sys
async def main():
    done = asyncio.Event()
    async def echo(reader, writer):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()
        done.set()
    server = await asyncio.start_server(echo, '127.0.0.1', 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.wait_for(done.wait(), 20)
asyncio.run(main())
)";

// An asyncio client: sends 100 lines, reads them back, prints "ok <bytes>".
constexpr const char* kPythonClient = R"(
import asyncio, sys
async def main():
    reader, writer = await asyncio.open_connection('127.0.0.1', int(sys.argv[1]))
    sent = b''.join(b'line %d from asyncio\n' % i for i in range(100))
    writer.write(sent)
    await writer.drain()
    writer.write_eof()
    got = await asyncio.wait_for(reader.read(-1), 20)
    print('ok' if got == sent else 'mismatch', len(got), flush=True)
asyncio.run(main())
)";

struct pipe_closer {
  void operator()(std::FILE* f) const noexcept { ::pclose(f); }
};
using process = std::unique_ptr<std::FILE, pipe_closer>;

// Starts `python3 -c script args`, its stdout readable.
process start_python(const char* script, const std::string& args = "") {
  std::string quoted;
  for (const char* c = script; *c != '\0'; ++c) {
    quoted += *c == '\'' ? std::string("'\\''") : std::string(1, *c);
  }
  return process(::popen(("python3 -c '" + quoted + "' " + args).c_str(), "r"));
}

std::string read_line(std::FILE* f) {
  char line[256] = {};
  return std::fgets(line, sizeof line, f) != nullptr ? std::string(line) : std::string();
}

TEST(interop, a_cyan_client_talks_to_an_asyncio_echo_server) {
  process python = start_python(kPythonEchoServer);
  ASSERT_NE(python, nullptr);
  const std::string port = read_line(python.get());
  ASSERT_FALSE(port.empty()) << "python3 did not start its server";
  const endpoint address = endpoint::loopback_v4(static_cast<std::uint16_t>(std::stoi(port)));
  handler_thread h;
  constexpr std::size_t kBytes = 256 * 1024;
  const auto echoed = co_spawn(h, [address]() -> task<std::vector<std::byte>> {
                        tcp_socket s = co_await tcp_socket::connect(address, 5s);
                        const auto data = cyan::test::pattern(3, kBytes);
                        std::vector<std::byte> back(kBytes);
                        for (std::size_t at = 0; at < kBytes; at += 16384) {
                          co_await s.write_all(std::span(data).subspan(at, 16384), 5s);
                          co_await s.read_exact(std::span(back).subspan(at, 16384), 5s);
                        }
                        s.shutdown_send();
                        std::byte end[1];
                        EXPECT_EQ(co_await s.read_some(end, 5s), 0u);
                        co_return back;
                      }).get();
  EXPECT_EQ(cyan::test::first_mismatch(3, echoed), kBytes);
}

TEST(interop, an_asyncio_client_talks_to_a_cyan_echo_server) {
  handler_thread h;
  auto listener = tcp_listener::bind(endpoint::loopback_v4());
  auto served = co_spawn(h, [&]() -> task<std::size_t> {
    tcp_socket connection = co_await listener.accept(20s);
    std::byte buffer[1024];
    std::size_t total = 0;
    while (const std::size_t n = co_await connection.read_some(buffer, 20s)) {
      co_await connection.write_all(std::span(buffer).first(n), 20s);
      total += n;
    }
    co_return total;
  });
  process python = start_python(kPythonClient, std::to_string(listener.local_endpoint().port()));
  ASSERT_NE(python, nullptr);
  const std::string verdict = read_line(python.get());
  std::size_t expected = 0;
  for (int i = 0; i < 100; ++i) {
    expected += ("line " + std::to_string(i) + " from asyncio\n").size();
  }
  EXPECT_EQ(verdict, "ok " + std::to_string(expected) + "\n");
  EXPECT_EQ(served.get(), expected);
}

}  // namespace
