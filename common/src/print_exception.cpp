#include "cyan/common/detail/print_exception.h"

#include <cstdio>
#include <new>
#include <string>

#include "cyan/common/detail/escape.h"

namespace cyan::detail {

void print_exception(const char* who, const char* what_happened,
                     const std::exception& error) noexcept {
  try {
    std::string what;
    append_escaped(what, error.what(), false);
    std::fprintf(stderr, "%s: %s: %s\n", who, what_happened, what.c_str());
  } catch (const std::bad_alloc&) {  // no memory to escape it: the text as it is
    std::fprintf(stderr, "%s: %s: %s\n", who, what_happened, error.what());
  }
}

void print_exception(const char* who, const char* what_happened,
                     const std::exception_ptr& error) noexcept {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    print_exception(who, what_happened, e);
  } catch (...) {
    std::fprintf(stderr, "%s: %s: an exception not derived from std::exception\n", who,
                 what_happened);
  }
}

}  // namespace cyan::detail
