// The Boost.Asio peer of echo_server for the echo benchmark, in Asio's idiomatic C++20 style:
// co_spawn per connection, async_read_some / async_write with use_awaitable. One io_context
// per thread, each with its own SO_REUSEPORT acceptor (the shape echo_server has).
//
//   asio_echo_server [--port N] [--threads N]     prints "listening on 127.0.0.1:PORT";
//                                                 SIGINT/SIGTERM stop it (exit 0)

#include <boost/asio.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

asio::awaitable<void> echo(tcp::socket socket) {
  char data[4096];
  try {
    for (;;) {
      const std::size_t n =
          co_await socket.async_read_some(asio::buffer(data), asio::use_awaitable);
      co_await asio::async_write(socket, asio::buffer(data, n), asio::use_awaitable);
    }
  } catch (const std::exception&) {
    // end of stream or reset: the connection is done
  }
}

asio::awaitable<void> listen(tcp::acceptor& acceptor) {
  for (;;) {
    tcp::socket socket = co_await acceptor.async_accept(asio::use_awaitable);
    socket.set_option(tcp::no_delay(true));
    asio::co_spawn(acceptor.get_executor(), echo(std::move(socket)), asio::detached);
  }
}

tcp::acceptor open_acceptor(asio::io_context& context, unsigned short port) {
  tcp::acceptor acceptor(context);
  const tcp::endpoint where(asio::ip::make_address("127.0.0.1"), port);
  acceptor.open(where.protocol());
  acceptor.set_option(tcp::acceptor::reuse_address(true));
  const int on = 1;
  ::setsockopt(acceptor.native_handle(), SOL_SOCKET, SO_REUSEPORT, &on, sizeof on);
  acceptor.bind(where);
  acceptor.listen();
  return acceptor;
}

}  // namespace

int main(int argc, char** argv) {
  unsigned short port = 0;
  unsigned threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--port") == 0) {
      port = static_cast<unsigned short>(std::atoi(argv[i + 1]));
    } else if (std::strcmp(argv[i], "--threads") == 0) {
      threads = static_cast<unsigned>(std::max(1, std::atoi(argv[i + 1])));
    }
  }
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  std::vector<tcp::acceptor> acceptors;
  acceptors.reserve(threads);  // listen() holds a reference to its acceptor
  for (unsigned i = 0; i < threads; ++i) {
    contexts.push_back(std::make_unique<asio::io_context>(1));
    acceptors.push_back(open_acceptor(*contexts.back(), port));
    port = acceptors.back().local_endpoint().port();
    asio::co_spawn(*contexts.back(), listen(acceptors.back()), asio::detached);
  }
  asio::signal_set signals(*contexts.front(), SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int) {
    for (auto& context : contexts) {
      context->stop();
    }
  });
  std::printf("listening on 127.0.0.1:%u\n", port);
  std::fflush(stdout);
  std::vector<std::thread> runners;
  for (unsigned i = 1; i < threads; ++i) {
    runners.emplace_back([&context = *contexts[i]] { context.run(); });
  }
  contexts.front()->run();
  for (auto& runner : runners) {
    runner.join();
  }
  return 0;
}
