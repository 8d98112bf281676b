// tls_context: OpenSSL contexts built from the options (one per certificate, chosen by SNI),
// rebuilt by reload(); tls_category and the errors of OpenSSL's queue.

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include "cyan/net/tls.h"
#include "tls_state.h"

namespace cyan::net {

namespace {

class tls_category_impl final : public std::error_category {
 public:
  [[nodiscard]] const char* name() const noexcept override { return "cyan.tls"; }
  [[nodiscard]] std::string message(int value) const override {
    switch (value) {
      case static_cast<int>(tls_error::truncated):
        return "the peer ended the stream without close_notify (truncated)";
      case static_cast<int>(tls_error::certificate_verify_failed):
        return "certificate verify failed";
      default:
        break;
    }
    if (const char* reason = ERR_reason_error_string(static_cast<unsigned long>(value));
        reason != nullptr) {
      return reason;
    }
    char text[256];
    ERR_error_string_n(static_cast<unsigned long>(value), text, sizeof text);
    return text;
  }
};

}  // namespace

const std::error_category& tls_category() noexcept {
  static const tls_category_impl category;
  return category;
}

namespace detail {

void throw_tls_error(const std::string& where, unsigned long fallback) {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) {
    code = fallback;
  }
  if (code != 0 && ERR_SYSTEM_ERROR(code)) {
    throw std::system_error(static_cast<int>(ERR_GET_REASON(code)), std::generic_category(), where);
  }
  if (code != 0 && ERR_GET_LIB(code) == ERR_LIB_SSL &&
      ERR_GET_REASON(code) == SSL_R_CERTIFICATE_VERIFY_FAILED) {
    throw std::system_error(make_error_code(tls_error::certificate_verify_failed), where);
  }
  if (code == 0) {
    throw std::system_error(std::make_error_code(std::errc::protocol_error), where);
  }
  throw std::system_error(static_cast<int>(code), tls_category(), where);
}

namespace {

std::string lower(std::string_view text) {
  std::string result(text);
  std::transform(result.begin(), result.end(), result.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return result;
}

// ALPN's wire form: each name prefixed by its length.
std::vector<unsigned char> alpn_wire(const std::vector<std::string>& protocols, const char* where) {
  std::vector<unsigned char> wire;
  for (const std::string& protocol : protocols) {
    if (protocol.empty() || protocol.size() > 255) {
      throw std::system_error(std::make_error_code(std::errc::invalid_argument),
                              std::string(where) + ": ALPN protocol name \"" + protocol +
                                  "\" is empty or longer than 255 bytes");
    }
    wire.push_back(static_cast<unsigned char>(protocol.size()));
    wire.insert(wire.end(), protocol.begin(), protocol.end());
  }
  return wire;
}

// The server's ALPN choice: its first protocol the client offers; none in common: no ALPN.
int select_alpn(SSL* /*ssl*/, const unsigned char** out, unsigned char* out_length,
                const unsigned char* offered, unsigned int offered_length, void* arg) {
  const auto* generation = static_cast<const tls_generation*>(arg);
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, out_length, generation->alpn_wire.data(),
                            static_cast<unsigned int>(generation->alpn_wire.size()), offered,
                            offered_length) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

// SNI: the certificate for the name the client sent.
int select_certificate(SSL* ssl, int* /*alert*/, void* arg) {
  const auto* generation = static_cast<const tls_generation*>(arg);
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  if (name != nullptr) {
    if (SSL_CTX* chosen = generation->for_name(lower(name)); chosen != nullptr) {
      SSL_set_SSL_CTX(ssl, chosen);
    }
  }
  return SSL_TLSEXT_ERR_OK;
}

// A client's new session (TLS 1.3: a ticket that came after the handshake): kept per name.
int keep_session(SSL* ssl, SSL_SESSION* session) {
  auto* link = static_cast<tls_client_link*>(SSL_get_ex_data(ssl, client_link_index()));
  if (link == nullptr || SSL_SESSION_is_resumable(session) == 0) {
    return 0;
  }
  std::lock_guard lock(link->context->sessions_mutex);
  link->context->sessions[link->server_name] = ssl_session_ptr(session);
  return 1;  // the reference is ours
}

ssl_ctx_ptr new_context(bool server, tls_version min_version, const char* where) {
  ssl_ctx_ptr ctx(SSL_CTX_new(server ? TLS_server_method() : TLS_client_method()));
  if (!ctx) {
    throw_tls_error(where);
  }
  SSL_CTX_set_min_proto_version(
      ctx.get(), min_version == tls_version::tls1_3 ? TLS1_3_VERSION : TLS1_2_VERSION);
  // No renegotiation (TLS 1.2): a peer cannot make a read write, or restart the handshake.
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                                     (server ? SSL_OP_CIPHER_SERVER_PREFERENCE : 0));
  return ctx;
}

void use_certificate(SSL_CTX* ctx, const std::filesystem::path& chain,
                     const std::filesystem::path& key, const char* where) {
  const std::string context = std::string(where) + ": " + chain.string();
  if (SSL_CTX_use_certificate_chain_file(ctx, chain.c_str()) != 1) {
    throw_tls_error(context);
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1) {
    throw_tls_error(std::string(where) + ": " + key.string());
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    throw_tls_error(std::string(where) + ": " + key.string() + " does not match " + chain.string());
  }
}

// A server context for one certificate, with everything else from the options.
ssl_ctx_ptr server_context(const tls_context::server_options& options,
                           const std::filesystem::path& chain, const std::filesystem::path& key,
                           tls_generation& generation, const char* where) {
  ssl_ctx_ptr ctx = new_context(true, options.min_version, where);
  use_certificate(ctx.get(), chain, key, where);
  static constexpr unsigned char kSessionContext[] = "cyan";
  SSL_CTX_set_session_id_context(ctx.get(), kSessionContext, sizeof kSessionContext - 1);
  if (!options.session_tickets) {
    SSL_CTX_set_options(ctx.get(), SSL_OP_NO_TICKET);
    SSL_CTX_set_num_tickets(ctx.get(), 0);
    SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
  }
  if (!generation.alpn_wire.empty()) {
    SSL_CTX_set_alpn_select_cb(ctx.get(), select_alpn, &generation);
  }
  if (!options.client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx.get(), options.client_ca_file.c_str(), nullptr) != 1) {
      throw_tls_error(std::string(where) + ": " + options.client_ca_file.string());
    }
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(options.client_ca_file.c_str());
    if (names == nullptr) {
      throw_tls_error(std::string(where) + ": " + options.client_ca_file.string());
    }
    SSL_CTX_set_client_CA_list(ctx.get(), names);
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return ctx;
}

}  // namespace

int client_link_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

SSL_CTX* tls_generation::for_name(std::string_view name) const noexcept {
  for (const auto& [pattern, ctx] : by_name) {
    if (pattern == name) {
      return ctx.get();
    }
  }
  // "*.example.com" matches one label before ".example.com".
  const std::size_t dot = name.find('.');
  if (dot == std::string_view::npos || dot == 0) {
    return nullptr;
  }
  const std::string_view rest = name.substr(dot);
  for (const auto& [pattern, ctx] : by_name) {
    if (pattern.size() > 2 && pattern[0] == '*' && std::string_view(pattern).substr(1) == rest) {
      return ctx.get();
    }
  }
  return nullptr;
}

std::shared_ptr<const tls_generation> tls_context_state::build(const tls_generation* previous) {
  auto generation = std::make_shared<tls_generation>();
  if (server) {
    constexpr const char* kWhere = "cyan::net::tls_context::server";
    const tls_context::server_options& options = server_settings;
    generation->alpn_wire = alpn_wire(options.alpn, kWhere);
    generation->primary = server_context(options, options.certificate_chain_file,
                                         options.private_key_file, *generation, kWhere);
    for (const named_certificate& named : names) {
      generation->by_name.emplace_back(
          named.server_name,
          server_context(options, named.chain_file, named.key_file, *generation, kWhere));
    }
    SSL_CTX_set_tlsext_servername_callback(generation->primary.get(), select_certificate);
    SSL_CTX_set_tlsext_servername_arg(generation->primary.get(), generation.get());
    if (previous != nullptr) {
      // The ticket keys go on, so tickets issued before a reload still resume.
      unsigned char keys[80];
      if (SSL_CTX_get_tlsext_ticket_keys(previous->primary.get(), keys, sizeof keys) == 1) {
        SSL_CTX_set_tlsext_ticket_keys(generation->primary.get(), keys, sizeof keys);
      }
      OPENSSL_cleanse(keys, sizeof keys);
    }
  } else {
    constexpr const char* kWhere = "cyan::net::tls_context::client";
    const tls_context::client_options& options = client_settings;
    generation->alpn_wire = alpn_wire(options.alpn, kWhere);
    ssl_ctx_ptr ctx = new_context(false, options.min_version, kWhere);
    if (options.verify_peer) {
      SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
    }
    if (!options.ca_file.empty() || !options.ca_path.empty()) {
      if (SSL_CTX_load_verify_locations(
              ctx.get(), options.ca_file.empty() ? nullptr : options.ca_file.c_str(),
              options.ca_path.empty() ? nullptr : options.ca_path.c_str()) != 1) {
        throw_tls_error(std::string(kWhere) + ": " +
                        (options.ca_file.empty() ? options.ca_path : options.ca_file).string());
      }
    } else if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1) {
      throw_tls_error(std::string(kWhere) + ": the system's trust store");
    }
    if (!generation->alpn_wire.empty() &&
        SSL_CTX_set_alpn_protos(ctx.get(), generation->alpn_wire.data(),
                                static_cast<unsigned int>(generation->alpn_wire.size())) != 0) {
      throw_tls_error(kWhere);
    }
    if (!options.certificate_chain_file.empty()) {
      use_certificate(ctx.get(), options.certificate_chain_file, options.private_key_file, kWhere);
    }
    if (options.resume_sessions) {
      SSL_CTX_set_session_cache_mode(ctx.get(),
                                     SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
      SSL_CTX_sess_set_new_cb(ctx.get(), keep_session);
    }
    generation->primary = std::move(ctx);
  }
  return generation;
}

}  // namespace detail

tls_context tls_context::server(const server_options& options) {
  auto state = std::make_shared<detail::tls_context_state>();
  state->server = true;
  state->server_settings = options;
  state->current = state->build(nullptr);
  return tls_context(std::move(state));
}

tls_context tls_context::client(const client_options& options) {
  auto state = std::make_shared<detail::tls_context_state>();
  state->server = false;
  state->client_settings = options;
  state->current = state->build(nullptr);
  return tls_context(std::move(state));
}

void tls_context::add_certificate(std::string server_name,
                                  std::filesystem::path certificate_chain_file,
                                  std::filesystem::path private_key_file) {
  if (!state_ || !state_->server) {
    throw std::logic_error("cyan::net::tls_context::add_certificate: not a server context");
  }
  std::lock_guard lock(state_->mutex);
  std::string name = detail::lower(server_name);
  auto same =
      std::find_if(state_->names.begin(), state_->names.end(),
                   [&](const detail::named_certificate& n) { return n.server_name == name; });
  const std::vector<detail::named_certificate> before = state_->names;
  if (same != state_->names.end()) {
    same->chain_file = std::move(certificate_chain_file);
    same->key_file = std::move(private_key_file);
  } else {
    state_->names.push_back(
        { std::move(name), std::move(certificate_chain_file), std::move(private_key_file) });
  }
  try {
    state_->current = state_->build(state_->current.get());
  } catch (...) {
    state_->names = before;
    throw;
  }
}

void tls_context::reload() {
  if (!state_) {
    throw std::logic_error("cyan::net::tls_context::reload: an empty context");
  }
  std::lock_guard lock(state_->mutex);
  state_->current = state_->build(state_->current.get());
}

bool tls_context::is_server() const noexcept {
  return state_ != nullptr && state_->server;
}

}  // namespace cyan::net
