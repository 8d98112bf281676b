#pragma once

// The one way cyan reports an exception that escaped to a place with nobody to rethrow it to
// (a loop callback without an error handler, a detached task on a thread without a handler, a
// pool task without an error callback): one line on stderr.

#include <exception>

namespace cyan::detail {

/// Writes "<who>: <what happened>: <what()>\n" to stderr, what() escaped (escape.h), or
/// "... : an exception not derived from std::exception" for one that is not. [any thread]
void print_exception(const char* who, const char* what_happened,
                     const std::exception_ptr& error) noexcept;
/// The same for an exception at hand.
void print_exception(const char* who, const char* what_happened,
                     const std::exception& error) noexcept;

}  // namespace cyan::detail
