#pragma once

#include <string_view>

#include "cyan/common/version_config.h"

/// Compile-time version as one number: major * 10000 + minor * 100 + patch.
#define CYAN_VERSION (CYAN_VERSION_MAJOR * 10000 + CYAN_VERSION_MINOR * 100 + CYAN_VERSION_PATCH)

namespace cyan {

/// The version of the cyan library linked into the program, e.g. "0.1.0". [any thread]
/// Compare with CYAN_VERSION_STRING to detect a header/library mismatch.
[[nodiscard]] std::string_view version() noexcept;

}  // namespace cyan
