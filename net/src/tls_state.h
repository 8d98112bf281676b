#pragma once

// What tls_context and tls_stream keep, over OpenSSL's objects (internal to cyan_net).

#include <openssl/ssl.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cyan/net/tls.h"

namespace cyan::net::detail {

struct ssl_ctx_free {
  void operator()(SSL_CTX* ctx) const noexcept { SSL_CTX_free(ctx); }
};
using ssl_ctx_ptr = std::unique_ptr<SSL_CTX, ssl_ctx_free>;

struct ssl_session_free {
  void operator()(SSL_SESSION* session) const noexcept { SSL_SESSION_free(session); }
};
using ssl_session_ptr = std::unique_ptr<SSL_SESSION, ssl_session_free>;

/// The last OpenSSL error of this thread (its queue cleared) as a std::system_error for
/// `where`; `fallback` when the queue is empty.
[[noreturn]] void throw_tls_error(const std::string& where, unsigned long fallback = 0);

/// A server name and the files of its certificate (for add_certificate() and reload()).
struct named_certificate {
  std::string server_name;  // lower case; "" for the default
  std::filesystem::path chain_file;
  std::filesystem::path key_file;
};

/// One generation of a context's OpenSSL objects, immutable once built: reload() builds the
/// next and swaps it in; a connection keeps the one it started with.
struct tls_generation {
  ssl_ctx_ptr primary;                                       // the default certificate
  std::vector<std::pair<std::string, ssl_ctx_ptr>> by_name;  // SNI: (lower-case name, context)
  std::vector<unsigned char> alpn_wire;                      // length-prefixed protocol names

  /// The context for a client's SNI name, or null for the primary.
  [[nodiscard]] SSL_CTX* for_name(std::string_view name) const noexcept;
};

/// What a tls_context handle shares.
struct tls_context_state {
  bool server = false;
  tls_context::server_options server_settings;
  tls_context::client_options client_settings;

  std::mutex mutex;                      // guards the members below
  std::vector<named_certificate> names;  // add_certificate()'s, for reload()
  std::shared_ptr<const tls_generation> current;

  std::mutex sessions_mutex;                                  // guards sessions
  std::unordered_map<std::string, ssl_session_ptr> sessions;  // client: last session per name

  [[nodiscard]] std::shared_ptr<const tls_generation> generation() {
    std::lock_guard lock(mutex);
    return current;
  }
  /// Builds a generation from the settings and `names` (mutex held by the caller); throws.
  [[nodiscard]] std::shared_ptr<const tls_generation> build(const tls_generation* previous);
};

/// What a client connection's SSL carries (its ex_data at client_link_index()), for the
/// session callback: the context to keep the session in and the name to keep it under.
struct tls_client_link {
  tls_context_state* context = nullptr;
  std::string server_name;
};
[[nodiscard]] int client_link_index();

}  // namespace cyan::net::detail
