#include "cyan/net/error.h"

#include <netdb.h>

#include <string>

namespace cyan::net {
namespace {

class net_category_impl final : public std::error_category {
 public:
  [[nodiscard]] const char* name() const noexcept override { return "cyan.net"; }
  [[nodiscard]] std::string message(int code) const override {
    switch (static_cast<error>(code)) {
      case error::end_of_stream:
        return "end of stream before the requested number of bytes";
    }
    return "unknown cyan.net error " + std::to_string(code);
  }
};

class resolve_category_impl final : public std::error_category {
 public:
  [[nodiscard]] const char* name() const noexcept override { return "getaddrinfo"; }
  [[nodiscard]] std::string message(int code) const override { return ::gai_strerror(code); }
};

}  // namespace

const std::error_category& net_category() noexcept {
  static const net_category_impl category;
  return category;
}

const std::error_category& resolve_category() noexcept {
  static const resolve_category_impl category;
  return category;
}

}  // namespace cyan::net
