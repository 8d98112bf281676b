// tls_stream: OpenSSL on memory, the bytes carried by the socket's own operations.
//
// The SSL object reads and writes through a BIO of cyan's (below) that works on two buffers
// of the stream: `in`, ciphertext read from the socket and not yet taken by OpenSSL, and `out`,
// records OpenSSL made and nobody has sent yet. An operation loops:
//   1. OpenSSL   SSL_do_handshake / SSL_read_ex / SSL_write_ex / SSL_shutdown, on memory only;
//   2. send      a writer (write_some, write_all, shutdown, the handshake) sends `out` with the
//                socket's write_all, moving it to `sending` first so that records a read makes
//                meanwhile (a key update's answer) append to `out` without moving the bytes
//                under the pending write; a reader sends such records with one non-blocking
//                send() when no writer is sending, else leaves them to the writer;
//   3. receive   when OpenSSL needs more ciphertext, the socket's read_some into `in`.
// So a read and a write may be pending together, each keeping the socket's one-read-one-write
// rule, and a timeout or a stop leaves both buffers consistent for the next operation. A
// failure of the socket's is the stream's call's: its code, named after the tls_stream call
// the user made (flush() and receive()), its reason said once.

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include "cyan/net/tls.h"
#include "tls_state.h"

namespace cyan::net {

namespace detail {

namespace {

// Ciphertext read from the socket at a time: a whole record of the largest size with room.
constexpr std::size_t kInputBytes = 18 * 1024;
// Plaintext taken into records before they are sent: bounds the unsent records of a write.
constexpr std::size_t kWriteChunk = 64 * 1024;
// Small gathered buffers are joined up to one record.
constexpr std::size_t kRecordBytes = 16 * 1024;

}  // namespace

struct tls_stream_state {
  tcp_socket socket;
  SSL* ssl = nullptr;
  std::shared_ptr<const tls_generation> generation;  // keeps the SNI/ALPN callbacks' data alive
  std::shared_ptr<tls_context_state> context;
  tls_client_link link;  // a client's (SSL ex_data)

  std::vector<std::byte> in;  // ciphertext [in_begin, in_end) not yet taken by OpenSSL
  std::size_t in_begin = 0;
  std::size_t in_end = 0;
  bool end_of_stream = false;  // the socket read 0

  std::vector<std::byte> out;      // records not yet handed to the socket
  std::vector<std::byte> sending;  // records a writer is sending: [sending_begin, end) unsent
  std::size_t sending_begin = 0;
  std::vector<std::byte> staging;  // small gathered buffers joined into one record

  bool reading = false;   // a read_some / read_exact / shutdown reads
  bool writing = false;   // a write_some / write_all / shutdown writes
  bool flushing = false;  // a writer's socket write is pending

  tls_stream_state() = default;
  tls_stream_state(const tls_stream_state&) = delete;
  tls_stream_state& operator=(const tls_stream_state&) = delete;
  ~tls_stream_state() {
    if (ssl != nullptr) {
      SSL_free(ssl);
    }
  }

  static std::shared_ptr<tls_context_state> state_of(const tls_context& context) {
    return context.state_;
  }
};

namespace {

// ---- the BIO: OpenSSL's side of `in` and `out` ----

int bio_write(BIO* bio, const char* data, int length) {
  auto* s = static_cast<tls_stream_state*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  s->out.insert(s->out.end(), bytes, bytes + length);
  return length;
}

int bio_read(BIO* bio, char* data, int length) {
  auto* s = static_cast<tls_stream_state*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  const std::size_t available = s->in_end - s->in_begin;
  if (available == 0) {
    if (s->end_of_stream) {
      return 0;  // OpenSSL: unexpected EOF, unless a close_notify came first
    }
    BIO_set_retry_read(bio);
    return -1;
  }
  const std::size_t n = std::min(available, static_cast<std::size_t>(length));
  std::memcpy(data, s->in.data() + s->in_begin, n);
  s->in_begin += n;
  return static_cast<int>(n);
}

long bio_ctrl(BIO* bio, int command, long /*number*/, void* /*pointer*/) {
  switch (command) {
    case BIO_CTRL_FLUSH:
      return 1;
    case BIO_CTRL_EOF: {
      auto* s = static_cast<tls_stream_state*>(BIO_get_data(bio));
      return s->end_of_stream && s->in_begin == s->in_end ? 1 : 0;
    }
    default:
      return 0;
  }
}

int bio_create(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

const BIO_METHOD* stream_bio_method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "cyan tls_stream");
    if (m == nullptr) {
      throw std::bad_alloc();
    }
    BIO_meth_set_write(m, bio_write);
    BIO_meth_set_read(m, bio_read);
    BIO_meth_set_ctrl(m, bio_ctrl);
    BIO_meth_set_create(m, bio_create);
    return m;
  }();
  return method;
}

// ---- deadlines, flags ----

using clock_type = std::chrono::steady_clock;

// An operation's time limit, counted from its start, as what is left for each wait inside it.
class deadline {
 public:
  explicit deadline(timeout_type limit) noexcept
      : none_(limit == kNoTimeout),
        at_(none_ ? clock_type::time_point::max() : clock_type::now() + limit) {}
  [[nodiscard]] timeout_type left() const noexcept {
    if (none_) {
      return kNoTimeout;
    }
    const auto rest = std::chrono::duration_cast<timeout_type>(at_ - clock_type::now());
    return std::max(rest, timeout_type::zero());
  }

 private:
  bool none_;
  clock_type::time_point at_;
};

// Sets a flag of the stream for the life of an operation.
class flag_guard {
 public:
  explicit flag_guard(bool& flag) noexcept : flag_(flag) { flag_ = true; }
  flag_guard(const flag_guard&) = delete;
  flag_guard& operator=(const flag_guard&) = delete;
  ~flag_guard() { flag_ = false; }

 private:
  bool& flag_;
};

tls_stream_state& open_state(const std::unique_ptr<tls_stream_state>& state, const char* where) {
  if (!state || !state->socket.is_open()) {
    throw std::system_error(std::make_error_code(std::errc::bad_file_descriptor), where);
  }
  return *state;
}

void claim(bool& flag, const char* where, const char* what) {
  if (flag) {
    throw std::logic_error(std::string(where) + ": another " + what + " is pending on this stream");
  }
}

// ---- failures ----

// After an OpenSSL call failed with `ssl_error`: the exception that says why. `reading`: a
// stream that ended without close_notify is truncated (else, in a handshake, end_of_stream).
[[noreturn]] void throw_failure(tls_stream_state& s, int ssl_error, const char* where,
                                bool reading) {
  const unsigned long code = ERR_peek_error();
  const bool eof = (ssl_error == SSL_ERROR_SYSCALL && code == 0) ||
                   (ERR_GET_LIB(code) == ERR_LIB_SSL &&
                    ERR_GET_REASON(code) == SSL_R_UNEXPECTED_EOF_WHILE_READING);
  if (eof) {
    ERR_clear_error();
    throw std::system_error(
        reading ? make_error_code(tls_error::truncated) : make_error_code(error::end_of_stream),
        where);
  }
  if (ERR_GET_LIB(code) == ERR_LIB_SSL && ERR_GET_REASON(code) == SSL_R_CERTIFICATE_VERIFY_FAILED) {
    const long result = SSL_get_verify_result(s.ssl);
    ERR_clear_error();
    std::string what = where;
    if (result != X509_V_OK) {
      what += std::string(": ") + X509_verify_cert_error_string(result);
    }
    throw std::system_error(make_error_code(tls_error::certificate_verify_failed), what);
  }
  if (ssl_error == SSL_ERROR_SYSCALL && code == 0) {
    throw std::system_error(std::make_error_code(std::errc::io_error), where);
  }
  throw_tls_error(where);
}

// ---- moving ciphertext ----

// Room at the end of `in` for the next socket read.
std::span<std::byte> input_room(tls_stream_state& s) {
  if (s.in.empty()) {
    s.in.resize(kInputBytes);
  }
  if (s.in_begin == s.in_end) {
    s.in_begin = s.in_end = 0;
  } else if (s.in.size() - s.in_end < kRecordBytes / 4) {
    std::memmove(s.in.data(), s.in.data() + s.in_begin, s.in_end - s.in_begin);
    s.in_end -= s.in_begin;
    s.in_begin = 0;
  }
  return std::span(s.in).subspan(s.in_end);
}

void took_input(tls_stream_state& s, std::size_t n) noexcept {
  if (n == 0) {
    s.end_of_stream = true;
  }
  s.in_end += n;
}

// The next records to send (what a failed write left first), or none.
std::span<const std::byte> next_to_send(tls_stream_state& s) noexcept {
  if (s.sending_begin == s.sending.size()) {
    s.sending.clear();
    s.sending_begin = 0;
    if (s.out.empty()) {
      return {};
    }
    s.sending.swap(s.out);
  }
  return std::span<const std::byte>(s.sending).subspan(s.sending_begin);
}

[[nodiscard]] bool has_output(const tls_stream_state& s) noexcept {
  return !s.out.empty() || s.sending_begin != s.sending.size();
}

// A reader's records (a key update's answer, an alert): one non-blocking send() when no writer
// is sending; what does not go now goes with the next write.
void send_now(tls_stream_state& s) noexcept {
  if (s.flushing || !has_output(s) || !s.socket.is_open()) {
    return;
  }
  for (std::span<const std::byte> bytes = next_to_send(s); !bytes.empty();
       bytes = next_to_send(s)) {
    const ssize_t n =
        ::send(s.socket.native_handle(), bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) {
      return;
    }
    s.sending_begin += static_cast<std::size_t>(n);
  }
}

// Sends every record made so far. The socket's failure is the stream's: a std::system_error
// with its code, named after `where`, the call the user made (see receive()); what was not
// sent stays first in line.
dispatch::task<> flush(tls_stream_state& s, const deadline& limit, const char* where) {
  flag_guard flushing(s.flushing);
  for (std::span<const std::byte> bytes = next_to_send(s); !bytes.empty();
       bytes = next_to_send(s)) {
    try {
      co_await s.socket.write_all(bytes, limit.left());
    } catch (const transfer_error& e) {
      s.sending_begin += e.bytes_transferred();
      throw std::system_error(e.code(), where);
    }
    s.sending_begin += bytes.size();
  }
}

// `co_await receive(s, limit, where)`: one read of ciphertext from the socket into `in`. A
// layer over another reports the other's failure as its own call's: the socket's code, named
// after `where` ("cyan::net::tls_stream::read_some: Connection timed out"), never the
// socket's call or its what() again.
class receive {
 public:
  receive(tls_stream_state& s, const deadline& limit, const char* where) noexcept
      : s_(s), read_(s.socket.read_some(input_room(s), limit.left())), where_(where) {}
  [[nodiscard]] bool await_ready() const noexcept { return read_.await_ready(); }
  template <typename Promise>
  bool await_suspend(std::coroutine_handle<Promise> suspended) {
    return read_.await_suspend(suspended);
  }
  void await_resume() {
    try {
      took_input(s_, read_.await_resume());
    } catch (const std::system_error& e) {
      throw std::system_error(e.code(), where_);
    }
  }

 private:
  tls_stream_state& s_;
  read_some_op read_;
  const char* where_;
};

// Takes `plaintext` into records (appended to `out`). Throws on a stream that cannot write.
void encrypt(tls_stream_state& s, std::span<const std::byte> plaintext, const char* where) {
  ERR_clear_error();
  std::size_t written = 0;
  const int result = SSL_write_ex(s.ssl, plaintext.data(), plaintext.size(), &written);
  if (result != 1) {
    throw_failure(s, SSL_get_error(s.ssl, result), where, false);
  }
}

// One SSL_read_ex: the bytes read (> 0), 0 after close_notify, -1 when it needs ciphertext.
long read_step(tls_stream_state& s, std::span<std::byte> buffer, const char* where) {
  ERR_clear_error();
  std::size_t n = 0;
  const int result = SSL_read_ex(s.ssl, buffer.data(), buffer.size(), &n);
  const int ssl_error = result == 1 ? SSL_ERROR_NONE : SSL_get_error(s.ssl, result);
  send_now(s);
  switch (ssl_error) {
    case SSL_ERROR_NONE:
      return static_cast<long>(n);
    case SSL_ERROR_ZERO_RETURN:
      return 0;
    case SSL_ERROR_WANT_READ:
      return -1;
    default:
      throw_failure(s, ssl_error, where, true);
  }
}

// The handshake, either side: until SSL_do_handshake succeeds, sending what it makes.
dispatch::task<> handshake(tls_stream_state& s, timeout_type timeout, const char* where) {
  const deadline limit(timeout);
  for (;;) {
    ERR_clear_error();
    const int result = SSL_do_handshake(s.ssl);
    const int ssl_error = result == 1 ? SSL_ERROR_NONE : SSL_get_error(s.ssl, result);
    if (ssl_error != SSL_ERROR_NONE && ssl_error != SSL_ERROR_WANT_READ) {
      send_now(s);  // the alert that tells the peer why, if it goes at once
      throw_failure(s, ssl_error, where, false);
    }
    if (has_output(s)) {
      co_await flush(s, limit, where);
    }
    if (ssl_error == SSL_ERROR_NONE) {
      co_return;
    }
    co_await receive(s, limit, where);
  }
}

std::unique_ptr<tls_stream_state> new_state(tcp_socket socket, const tls_context& context,
                                            bool server, const char* where) {
  if (!context) {
    throw std::invalid_argument(std::string(where) + ": an empty tls_context");
  }
  if (context.is_server() != server) {
    throw std::invalid_argument(std::string(where) +
                                (server ? ": a client tls_context" : ": a server tls_context"));
  }
  if (!socket.is_open()) {
    throw std::system_error(std::make_error_code(std::errc::bad_file_descriptor), where);
  }
  auto s = std::make_unique<tls_stream_state>();
  s->socket = std::move(socket);
  s->context = tls_stream_state::state_of(context);
  s->generation = s->context->generation();
  s->ssl = SSL_new(s->generation->primary.get());
  if (s->ssl == nullptr) {
    throw_tls_error(where);
  }
  BIO* bio = BIO_new(stream_bio_method());
  if (bio == nullptr) {
    throw_tls_error(where);
  }
  BIO_set_data(bio, s.get());
  SSL_set_bio(s->ssl, bio, bio);  // one BIO both ways: SSL takes the one reference
  return s;
}

bool is_ip_address(const std::string& name) {
  unsigned char address[16];
  return ::inet_pton(AF_INET, name.c_str(), address) == 1 ||
         ::inet_pton(AF_INET6, name.c_str(), address) == 1;
}

}  // namespace

}  // namespace detail

bool detail::holds_unread_input(const tls_stream& stream) noexcept {
  const detail::tls_stream_state* s = stream.state_.get();
  return s != nullptr && (s->in_begin != s->in_end || SSL_has_pending(s->ssl) == 1);
}

tls_stream::tls_stream() noexcept = default;
tls_stream::tls_stream(std::unique_ptr<detail::tls_stream_state> state) noexcept
    : state_(std::move(state)) {}
tls_stream::tls_stream(tls_stream&& other) noexcept = default;
tls_stream& tls_stream::operator=(tls_stream&& other) noexcept = default;
tls_stream::~tls_stream() = default;

dispatch::task<tls_stream> tls_stream::accept_within(tcp_socket socket, tls_context context,
                                                     detail::timeout_type limit) {
  constexpr const char* kWhere = "cyan::net::tls_stream::accept";
  std::unique_ptr<detail::tls_stream_state> s =
      detail::new_state(std::move(socket), context, true, kWhere);
  SSL_set_accept_state(s->ssl);
  co_await detail::handshake(*s, limit, kWhere);
  co_return tls_stream(std::move(s));
}

dispatch::task<tls_stream> tls_stream::connect_within(tcp_socket socket, tls_context context,
                                                      std::string server_name,
                                                      detail::timeout_type limit) {
  constexpr const char* kWhere = "cyan::net::tls_stream::connect";
  std::unique_ptr<detail::tls_stream_state> s =
      detail::new_state(std::move(socket), context, false, kWhere);
  SSL_set_connect_state(s->ssl);
  const bool ip = detail::is_ip_address(server_name);
  if (!server_name.empty() && !ip && SSL_set_tlsext_host_name(s->ssl, server_name.c_str()) != 1) {
    detail::throw_tls_error(std::string(kWhere) + ": server name \"" + server_name + "\"");
  }
  if (s->context->client_settings.verify_peer) {
    X509_VERIFY_PARAM* param = SSL_get0_param(s->ssl);
    const int set = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, server_name.c_str())
                       : X509_VERIFY_PARAM_set1_host(param, server_name.c_str(), 0);
    if (set != 1) {
      detail::throw_tls_error(std::string(kWhere) + ": server name \"" + server_name + "\"");
    }
  }
  s->link.context = s->context.get();
  s->link.server_name = server_name;
  SSL_set_ex_data(s->ssl, detail::client_link_index(), &s->link);
  if (s->context->client_settings.resume_sessions) {
    std::lock_guard lock(s->context->sessions_mutex);
    if (auto kept = s->context->sessions.find(server_name); kept != s->context->sessions.end()) {
      SSL_set_session(s->ssl, kept->second.get());
    }
  }
  co_await detail::handshake(*s, limit, kWhere);
  co_return tls_stream(std::move(s));
}

dispatch::task<std::size_t> tls_stream::read_some_within(std::span<std::byte> buffer,
                                                         detail::timeout_type limit) {
  constexpr const char* kWhere = "cyan::net::tls_stream::read_some";
  detail::tls_stream_state& s = detail::open_state(state_, kWhere);
  detail::claim(s.reading, kWhere, "read");
  const detail::flag_guard reading(s.reading);
  if (buffer.empty()) {
    co_return 0;
  }
  const detail::deadline until(limit);
  for (;;) {
    if (const long n = detail::read_step(s, buffer, kWhere); n >= 0) {
      co_return static_cast<std::size_t>(n);
    }
    co_await detail::receive(s, until, kWhere);
  }
}

dispatch::task<> tls_stream::read_exact_within(std::span<std::byte> buffer,
                                               detail::timeout_type limit) {
  constexpr const char* kWhere = "cyan::net::tls_stream::read_exact";
  detail::tls_stream_state& s = detail::open_state(state_, kWhere);
  detail::claim(s.reading, kWhere, "read");
  const detail::flag_guard reading(s.reading);
  const detail::deadline until(limit);
  std::size_t done = 0;
  while (done < buffer.size()) {
    std::error_code failure;
    try {
      const long n = detail::read_step(s, buffer.subspan(done), kWhere);
      if (n > 0) {
        done += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0) {
        co_await detail::receive(s, until, kWhere);
        continue;
      }
      failure = make_error_code(error::end_of_stream);
    } catch (const std::system_error& e) {
      failure = e.code();  // this call's failure, rethrown with the count (code and name only)
    }
    throw transfer_error(failure, kWhere, done);
  }
}

dispatch::task<std::size_t> tls_stream::write_some_within(std::span<const std::byte> buffer,
                                                          detail::timeout_type limit) {
  constexpr const char* kWhere = "cyan::net::tls_stream::write_some";
  detail::tls_stream_state& s = detail::open_state(state_, kWhere);
  detail::claim(s.writing, kWhere, "write");
  const detail::flag_guard writing(s.writing);
  const detail::deadline until(limit);
  const std::span<const std::byte> taken =
      buffer.first(std::min(buffer.size(), detail::kWriteChunk));
  if (!taken.empty()) {
    detail::encrypt(s, taken, kWhere);
  }
  std::error_code failure;
  try {
    co_await detail::flush(s, until, kWhere);
  } catch (const std::system_error& e) {
    failure = e.code();
  }
  if (failure) {
    throw transfer_error(failure, kWhere, taken.size());
  }
  co_return taken.size();
}

dispatch::task<> tls_stream::write_one_within(std::span<const std::byte> buffer,
                                              detail::timeout_type limit) {
  co_await write_all_within(gather(std::span(&buffer, 1)), limit);
}

dispatch::task<> tls_stream::write_all_within(gather buffers, detail::timeout_type limit) {
  constexpr const char* kWhere = "cyan::net::tls_stream::write_all";
  detail::tls_stream_state& s = detail::open_state(state_, kWhere);
  detail::claim(s.writing, kWhere, "write");
  const detail::flag_guard writing(s.writing);
  const detail::deadline until(limit);
  std::size_t taken = 0;  // plaintext in records, in the buffers' order
  std::error_code failure;
  try {
    s.staging.clear();
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      std::span<const std::byte> rest = buffers[i];
      while (!rest.empty()) {
        if (s.staging.empty() && rest.size() >= detail::kRecordBytes) {
          // A large buffer goes into records straight from where it is.
          const std::span<const std::byte> chunk =
              rest.first(std::min(rest.size(), detail::kWriteChunk));
          detail::encrypt(s, chunk, kWhere);
          taken += chunk.size();
          rest = rest.subspan(chunk.size());
        } else {
          const std::size_t n = std::min(rest.size(), detail::kRecordBytes - s.staging.size());
          s.staging.insert(s.staging.end(), rest.begin(), rest.begin() + static_cast<long>(n));
          rest = rest.subspan(n);
          if (s.staging.size() == detail::kRecordBytes) {
            detail::encrypt(s, s.staging, kWhere);
            taken += s.staging.size();
            s.staging.clear();
          }
        }
        if (s.out.size() >= detail::kWriteChunk) {
          co_await detail::flush(s, until, kWhere);
        }
      }
    }
    if (!s.staging.empty()) {
      detail::encrypt(s, s.staging, kWhere);
      taken += s.staging.size();
      s.staging.clear();
    }
    co_await detail::flush(s, until, kWhere);
  } catch (const std::system_error& e) {
    failure = e.code();
  }
  if (failure) {
    s.staging.clear();
    throw transfer_error(failure, kWhere, taken);
  }
}

dispatch::task<bool> tls_stream::shutdown_within(detail::timeout_type limit) {
  constexpr const char* kWhere = "cyan::net::tls_stream::shutdown";
  detail::tls_stream_state& s = detail::open_state(state_, kWhere);
  detail::claim(s.writing, kWhere, "write");
  const detail::flag_guard writing(s.writing);
  const detail::deadline until(limit);
  ERR_clear_error();
  int result = SSL_shutdown(s.ssl);  // queues close_notify (once)
  if (result < 0) {
    ERR_clear_error();
  }
  bool canceled = false;
  try {
    co_await detail::flush(s, until, kWhere);
  } catch (const std::system_error& e) {
    canceled = e.code() == std::errc::operation_canceled;
    if (!canceled) {
      co_return false;
    }
  }
  if (canceled) {
    throw std::system_error(std::make_error_code(std::errc::operation_canceled), kWhere);
  }
  if (result == 1 || (SSL_get_shutdown(s.ssl) & SSL_RECEIVED_SHUTDOWN) != 0) {
    co_return true;
  }
  if (s.reading) {
    co_return false;  // that read sees the peer's close_notify
  }
  const detail::flag_guard reading(s.reading);
  std::byte scratch[2048];
  try {
    for (;;) {
      const long n = detail::read_step(s, scratch, kWhere);
      if (n == 0) {
        co_return true;
      }
      if (n < 0) {
        co_await detail::receive(s, until, kWhere);
      }
    }
  } catch (const std::system_error& e) {
    canceled = e.code() == std::errc::operation_canceled;
  }
  if (canceled) {
    throw std::system_error(std::make_error_code(std::errc::operation_canceled), kWhere);
  }
  co_return false;
}

void tls_stream::close() noexcept {
  if (state_) {
    state_->socket.close();
  }
}

bool tls_stream::is_open() const noexcept {
  return state_ != nullptr && state_->socket.is_open();
}

std::string_view tls_stream::alpn_protocol() const noexcept {
  if (!state_) {
    return {};
  }
  const unsigned char* data = nullptr;
  unsigned int length = 0;
  SSL_get0_alpn_selected(state_->ssl, &data, &length);
  return { reinterpret_cast<const char*>(data), data == nullptr ? 0 : length };
}

std::string_view tls_stream::server_name() const noexcept {
  if (!state_) {
    return {};
  }
  if (!state_->context->server) {
    return state_->link.server_name;
  }
  const char* name = SSL_get_servername(state_->ssl, TLSEXT_NAMETYPE_host_name);
  return name != nullptr ? std::string_view(name) : std::string_view();
}

std::string tls_stream::peer_certificate_subject() const {
  if (!state_) {
    return {};
  }
  X509* certificate = SSL_get1_peer_certificate(state_->ssl);
  if (certificate == nullptr) {
    return {};
  }
  std::string subject;
  if (BIO* text = BIO_new(BIO_s_mem()); text != nullptr) {
    X509_NAME_print_ex(text, X509_get_subject_name(certificate), 0,
                       XN_FLAG_ONELINE & ~ASN1_STRFLGS_ESC_MSB);
    char* data = nullptr;
    const long length = BIO_get_mem_data(text, &data);
    subject.assign(data, static_cast<std::size_t>(std::max(length, 0L)));
    BIO_free(text);
  }
  X509_free(certificate);
  return subject;
}

bool tls_stream::session_reused() const noexcept {
  return state_ != nullptr && SSL_session_reused(state_->ssl) == 1;
}

std::string_view tls_stream::protocol_version() const noexcept {
  return state_ != nullptr ? std::string_view(SSL_get_version(state_->ssl)) : std::string_view();
}

tcp_socket& tls_stream::next_layer() noexcept {
  return state_->socket;
}

const tcp_socket& tls_stream::next_layer() const noexcept {
  return state_->socket;
}

}  // namespace cyan::net
