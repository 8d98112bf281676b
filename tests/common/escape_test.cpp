// append_escaped / quoted (cyan/common/detail/escape.h) and print_exception
// (cyan/common/detail/print_exception.h): every byte of foreign text shows, and an escaped
// exception prints as one line.

#include "cyan/common/detail/escape.h"

#include <gtest/gtest.h>

#include <exception>
#include <stdexcept>
#include <string>

#include "cyan/common/detail/print_exception.h"

namespace {

using namespace std::string_literals;
using cyan::detail::append_escaped;

TEST(escape, control_bytes_quotes_and_backslashes_show) {
  EXPECT_EQ(cyan::detail::quoted("a\0b\t\n\r\"\\\x01\x7f\xc3\xa9"s),
            R"("a\0b\t\n\r\"\\\x01\x7f)"s + "\xc3\xa9\"");
  std::string unquoted = "> ";
  append_escaped(unquoted, "say \"hi\"\n", false);
  EXPECT_EQ(unquoted, R"(> say "hi"\n)");
}

TEST(escape, print_exception_writes_one_line_with_what_escaped) {
  testing::internal::CaptureStderr();
  cyan::detail::print_exception("cyan::test", "a task threw",
                                std::make_exception_ptr(std::runtime_error("two\nlines")));
  cyan::detail::print_exception("cyan::test", "a task threw", std::make_exception_ptr(42));
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "cyan::test: a task threw: two\\nlines\n"
            "cyan::test: a task threw: an exception not derived from std::exception\n");
}

}  // namespace
