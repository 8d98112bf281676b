// examples/http/responses.h: IMF-fixdate, and the precomputed responses with their Date
// rewritten in place.

#include "http/responses.h"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <string_view>

namespace {

using cyan::examples::http::connection_header;
using cyan::examples::http::format_imf_fixdate;
using cyan::examples::http::kImfFixdateLength;
using cyan::examples::http::response_set;
using cyan::examples::http::status;

std::string imf_fixdate(std::time_t seconds) {
  std::array<char, kImfFixdateLength> text;
  format_imf_fixdate(seconds, text);
  return std::string(text.data(), text.size());
}

TEST(http_responses, imf_fixdate_of_known_times) {
  EXPECT_EQ(imf_fixdate(784111777), "Sun, 06 Nov 1994 08:49:37 GMT");  // RFC 9110's example
  EXPECT_EQ(imf_fixdate(0), "Thu, 01 Jan 1970 00:00:00 GMT");
  EXPECT_EQ(imf_fixdate(951782400), "Tue, 29 Feb 2000 00:00:00 GMT");
  EXPECT_EQ(imf_fixdate(4102444799), "Thu, 31 Dec 2099 23:59:59 GMT");
}

TEST(http_responses, whole_response_is_head_blank_line_and_body) {
  response_set responses("<p>hi</p>\n", "text/html");
  responses.refresh(784111777);
  std::string out;
  responses.append_whole(out, status::ok);
  EXPECT_EQ(out,
            "HTTP/1.1 200 OK\r\nServer: cyan\r\nDate: Sun, 06 Nov 1994 08:49:37 "
            "GMT\r\nContent-Type: text/html\r\n"
            "Content-Length: 10\r\n\r\n<p>hi</p>\n");
}

TEST(http_responses, heads_carry_the_connection_header_asked_for) {
  response_set responses("page", "text/plain");
  responses.refresh(0);
  const std::string head =
      "HTTP/1.1 405 Method Not Allowed\r\nServer: cyan\r\nDate: Thu, 01 Jan 1970 00:00:00 GMT\r\n"
      "Content-Type: text/plain\r\nAllow: GET, HEAD\r\nContent-Length: 23\r\n";
  std::string out;
  responses.append_head(out, status::method_not_allowed, connection_header::implied);
  EXPECT_EQ(out, head + "\r\n");
  out.clear();
  responses.append_head(out, status::method_not_allowed, connection_header::close);
  EXPECT_EQ(out, head + "Connection: close\r\n\r\n");
  out.clear();
  responses.append_head(out, status::method_not_allowed, connection_header::keep_alive);
  EXPECT_EQ(out, head + "Connection: keep-alive\r\n\r\n");
  EXPECT_EQ(responses.body(status::method_not_allowed), "405 Method Not Allowed\n");
}

TEST(http_responses, refresh_rewrites_the_date_of_every_response_only_when_the_second_changes) {
  response_set responses("page", "text/plain");
  responses.refresh(0);
  std::string before;
  responses.append_whole(before, status::not_found);
  responses.refresh(0);
  std::string same;
  responses.append_whole(same, status::not_found);
  EXPECT_EQ(same, before);
  responses.refresh(784111777);
  std::string after;
  responses.append_whole(after, status::not_found);
  EXPECT_NE(after.find("Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n"), std::string::npos);
  EXPECT_EQ(after.size(), before.size());
  std::string head;
  responses.append_head(head, status::ok, connection_header::implied);
  EXPECT_NE(head.find("Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n"), std::string::npos);
}

TEST(http_responses, large_body_is_kept_where_it_is) {
  // Above kInlineBodyLimit the connection writes the body from where it is.
  const std::string large(cyan::examples::http::kInlineBodyLimit + 1, 'x');
  response_set responses(large, "text/plain");
  EXPECT_EQ(responses.body(status::ok).data(), large.data());
  std::string head;
  responses.append_head(head, status::ok, connection_header::implied);
  EXPECT_NE(head.find("Content-Length: " + std::to_string(large.size()) + "\r\n\r\n"),
            std::string::npos);
}

}  // namespace
