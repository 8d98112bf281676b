#include "cyan/common/version.h"

namespace cyan {

std::string_view version() noexcept {
  return CYAN_VERSION_STRING;
}

}  // namespace cyan
