// examples/http/request_parser.h: requests one at a time from any split of the stream, what
// they ask for, and the limits counted exactly.

#include "http/request_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

using cyan::examples::http::parse_event;
using cyan::examples::http::request;
using cyan::examples::http::request_limits;
using cyan::examples::http::request_parser;
using cyan::examples::http::status;

// Feeds `text` in pieces of `piece` bytes (0: all at once) and collects the events other than
// need_more; stops at the first error.
std::vector<parse_event> feed_in_pieces(request_parser& parser, std::string_view text,
                                        std::size_t piece = 0) {
  std::vector<parse_event> events;
  while (!text.empty()) {
    const std::size_t size = piece == 0 ? text.size() : std::min(piece, text.size());
    std::string_view chunk = text.substr(0, size);
    text.remove_prefix(size);
    while (!chunk.empty()) {
      const parse_event event = parser.feed(chunk);
      if (event != parse_event::need_more) {
        events.push_back(event);
      }
      if (event == parse_event::error) {
        return events;
      }
    }
  }
  return events;
}

const std::vector<parse_event> kOneRequest{ parse_event::request };

TEST(http_request_parser, one_request_at_a_time_from_every_split_of_the_stream) {
  const std::string text =
      "GET / HTTP/1.1\r\nHost: test\r\n\r\nHEAD /x HTTP/1.1\r\nHost: x\r\n\r\n";
  for (std::size_t split = 0; split <= text.size(); ++split) {
    request_parser parser({});
    std::string_view first = std::string_view(text).substr(0, split);
    std::string_view second = std::string_view(text).substr(split);
    std::vector<request> seen;
    for (std::string_view* part : { &first, &second }) {
      while (!part->empty()) {
        if (parser.feed(*part) == parse_event::request) {
          seen.push_back(parser.last());
        }
      }
    }
    ASSERT_EQ(seen.size(), 2u) << "split at " << split;
    EXPECT_EQ(seen[0].method, request::verb::get);
    EXPECT_TRUE(seen[0].root);
    EXPECT_EQ(seen[1].method, request::verb::head);
    EXPECT_FALSE(seen[1].root);
    EXPECT_EQ(parser.requests_begun(), 2u);
    EXPECT_FALSE(parser.in_request());
  }
}

TEST(http_request_parser, feed_stops_right_after_each_pipelined_request) {
  request_parser parser({});
  const std::string one = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string text = one + one + "GET / HT";
  std::string_view input = text;
  EXPECT_EQ(parser.feed(input), parse_event::request);
  EXPECT_EQ(input.size(), text.size() - one.size());
  EXPECT_EQ(parser.feed(input), parse_event::request);
  EXPECT_EQ(input, "GET / HT");
  EXPECT_EQ(parser.feed(input), parse_event::need_more);
  EXPECT_TRUE(input.empty());
  EXPECT_TRUE(parser.in_request());
  EXPECT_EQ(parser.requests_begun(), 3u);
}

TEST(http_request_parser, methods_paths_and_keep_alive) {
  struct expectation {
    std::string text;
    request::verb method;
    bool root;
    bool keep_alive;
    bool http_1_0;
  };
  const std::vector<expectation> cases{
    { "GET /?q=1 HTTP/1.1\r\nHost: x\r\n\r\n", request::verb::get, true, true, false },
    { "GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n", request::verb::get, false, true, false },
    { "GET http://host/ HTTP/1.1\r\nHost: x\r\n\r\n", request::verb::get, false, true, false },
    { "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc", request::verb::other, true,
      true, false },
    { "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", request::verb::other, false, true, false },
    { "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", request::verb::get, true, false,
      false },
    { "GET / HTTP/1.0\r\n\r\n", request::verb::get, true, false, true },
    { "HEAD / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", request::verb::head, true, true, true },
    // An upgrade would change protocols after this request: the server closes instead.
    { "GET / HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
      request::verb::get, true, false, false },
  };
  for (const expectation& e : cases) {
    request_parser parser({});
    ASSERT_EQ(feed_in_pieces(parser, e.text), kOneRequest) << e.text;
    EXPECT_EQ(parser.last().method, e.method) << e.text;
    EXPECT_EQ(parser.last().root, e.root) << e.text;
    EXPECT_EQ(parser.last().keep_alive, e.keep_alive) << e.text;
    EXPECT_EQ(parser.last().http_1_0, e.http_1_0) << e.text;
  }
}

TEST(http_request_parser, header_limit_counts_up_to_the_blank_line_exactly_across_reads) {
  // Request line, headers and the blank line: 27 bytes.
  const std::string text = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(text.size(), 27u);
  for (const std::size_t piece : { std::size_t{ 0 }, std::size_t{ 1 }, std::size_t{ 5 } }) {
    request_parser at_limit({ .max_header_bytes = 27 });
    EXPECT_EQ(feed_in_pieces(at_limit, text, piece), kOneRequest) << "pieces of " << piece;
    request_parser below({ .max_header_bytes = 26 });
    EXPECT_EQ(feed_in_pieces(below, text, piece), std::vector{ parse_event::error })
        << "pieces of " << piece;
    EXPECT_EQ(below.error_status(), status::header_fields_too_large);
  }
  // The second of two pipelined requests is counted from its own first byte.
  request_parser pipelined({ .max_header_bytes = 27 });
  EXPECT_EQ(feed_in_pieces(pipelined, text + text, 10),
            (std::vector{ parse_event::request, parse_event::request }));
}

// As nginx: a request line (its CRLF included) longer than the limit is 414, in whatever pieces
// it comes; one within it, in a header section that is not, 431.
TEST(http_request_parser, request_line_over_the_header_limit_is_414_and_the_rest_431) {
  const std::string line_41 = "GET /" + std::string(25, 'a') + " HTTP/1.1\r\n";
  ASSERT_EQ(line_41.size(), 41u);
  for (const std::size_t piece : { std::size_t{ 0 }, std::size_t{ 1 }, std::size_t{ 7 } }) {
    request_parser over({ .max_header_bytes = 40 });
    EXPECT_EQ(feed_in_pieces(over, line_41 + "Host: x\r\n\r\n", piece),
              std::vector{ parse_event::error })
        << "pieces of " << piece;
    EXPECT_EQ(over.error_status(), status::uri_too_long) << "pieces of " << piece;
    // 40 bytes of a request line that goes on: refused with its 41st.
    request_parser unfinished({ .max_header_bytes = 40 });
    EXPECT_TRUE(feed_in_pieces(unfinished, "GET /" + std::string(35, 'a'), piece).empty());
    std::string_view more = "a";
    EXPECT_EQ(unfinished.feed(more), parse_event::error) << "pieces of " << piece;
    EXPECT_EQ(unfinished.error_status(), status::uri_too_long) << "pieces of " << piece;
  }
  for (const std::size_t piece : { std::size_t{ 0 }, std::size_t{ 1 }, std::size_t{ 7 } }) {
    request_parser at_limit({ .max_header_bytes = 41 });
    EXPECT_EQ(feed_in_pieces(at_limit, line_41 + "Host: x\r\n\r\n", piece),
              std::vector{ parse_event::error })
        << "pieces of " << piece;
    EXPECT_EQ(at_limit.error_status(), status::header_fields_too_large) << "pieces of " << piece;
  }
}

TEST(http_request_parser, unfinished_header_section_fails_once_it_passes_the_limit) {
  request_parser parser({ .max_header_bytes = 100 });
  std::string_view start = "GET / HTTP/1.1\r\nHost: x\r\nX-Long: ";
  EXPECT_EQ(parser.feed(start), parse_event::need_more);
  const std::string fill(50, 'a');
  std::string_view more = fill;
  EXPECT_EQ(parser.feed(more), parse_event::need_more);  // 83 bytes so far
  more = fill;
  EXPECT_EQ(parser.feed(more), parse_event::error);  // 133
  EXPECT_EQ(parser.error_status(), status::header_fields_too_large);
  std::string_view after = "\r\n\r\n";
  EXPECT_EQ(parser.feed(after), parse_event::error);  // and from then on
}

// Found by fuzz_http_request: a header section over the limit with a bad byte after the limit
// was 400 when it came in one read and 431 when cut into small ones. The limit is passed
// first, so 431 however the stream is cut.
TEST(http_request_parser, a_header_section_past_the_limit_before_a_bad_byte_is_431_however_cut) {
  const request_limits limits{ .max_header_bytes = 64, .max_body_bytes = 64 };
  const std::string text = "GET / HTTP/1.1\r\nHost: t\r\nX-Long: " + std::string(60, 'a') +
                           "\r\nBad header\r\n\r\n";  // no colon: llhttp refuses it
  for (const std::size_t piece : { std::size_t{ 0 }, std::size_t{ 1 }, std::size_t{ 7 } }) {
    request_parser parser(limits);
    EXPECT_EQ(feed_in_pieces(parser, text, piece), std::vector{ parse_event::error })
        << "piece " << piece;
    EXPECT_EQ(parser.error_status(), status::header_fields_too_large) << "piece " << piece;
  }
  // Within the limit, the same bad byte is 400 however cut.
  const std::string short_text = "GET / HTTP/1.1\r\nHost: t\r\nBad header\r\n\r\n";
  for (const std::size_t piece : { std::size_t{ 0 }, std::size_t{ 1 } }) {
    request_parser parser(limits);
    EXPECT_EQ(feed_in_pieces(parser, short_text, piece), std::vector{ parse_event::error });
    EXPECT_EQ(parser.error_status(), status::bad_request) << "piece " << piece;
  }
}

// The same for what the parser refuses beyond llhttp, and for the request line's 414: whichever
// comes first in the stream, the limit or the refused byte, decides, however the stream is cut.
TEST(http_request_parser, the_limit_or_a_refused_line_whichever_comes_first_however_cut) {
  const request_limits limits{ .max_header_bytes = 64, .max_body_bytes = 64 };
  const std::string fill = "X-Long: " + std::string(40, 'a') + "\r\n";
  struct expectation {
    std::string text;
    status error;
  };
  const std::vector<expectation> cases{
    { "GET / HTTP/1.1\r\nHost: t\r\nX-A: a\r\n b\r\n" + fill + "\r\n", status::bad_request },
    { "GET / HTTP/1.1\r\nHost: t\r\n" + fill + "X-A: a\r\n b\r\n\r\n",
      status::header_fields_too_large },
    { "GET / HTTP/1.1\r\nHost: t\r\n\n" + fill + "\r\n", status::bad_request },
    { "GET / HTTP/1.1\r\nHost: t\r\n" + fill + "X: y\r\n\n", status::header_fields_too_large },
    { "GET / HTTP/1.1\r\nHost: t\r\n" + fill + "X: y\r\nTransfer-Encoding: gzip\r\n\r\n",
      status::header_fields_too_large },
    { "GET /" + std::string(70, 'a') + " HTTP/1.1\r\nHost: t\r\n: x\r\n\r\n",
      status::uri_too_long },
  };
  for (const expectation& e : cases) {
    for (const std::size_t piece :
         { std::size_t{ 0 }, std::size_t{ 1 }, std::size_t{ 2 }, std::size_t{ 7 } }) {
      request_parser parser(limits);
      EXPECT_EQ(feed_in_pieces(parser, e.text, piece), std::vector{ parse_event::error })
          << e.text << " in pieces of " << piece;
      EXPECT_EQ(parser.error_status(), e.error) << e.text << " in pieces of " << piece;
    }
  }
}

TEST(http_request_parser, body_limit_by_content_length_and_by_chunks) {
  request_parser declared_at_limit({ .max_body_bytes = 10 });
  EXPECT_EQ(feed_in_pieces(declared_at_limit,
                           "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789"),
            kOneRequest);

  request_parser declared_over({ .max_body_bytes = 10 });
  // Refused at the headers already, before any of the body.
  EXPECT_EQ(
      feed_in_pieces(declared_over, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n"),
      std::vector{ parse_event::error });
  EXPECT_EQ(declared_over.error_status(), status::payload_too_large);

  const std::string chunked =
      "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
      "chunked\r\n\r\n5\r\n01234\r\n5\r\n56789\r\n";
  request_parser chunks_at_limit({ .max_body_bytes = 10 });
  EXPECT_EQ(feed_in_pieces(chunks_at_limit, chunked + "0\r\n\r\n", 3), kOneRequest);
  request_parser chunks_over({ .max_body_bytes = 10 });
  EXPECT_EQ(feed_in_pieces(chunks_over, chunked + "1\r\nx\r\n0\r\n\r\n", 3),
            std::vector{ parse_event::error });
  EXPECT_EQ(chunks_over.error_status(), status::payload_too_large);
}

// RFC 9112, 3.2: an HTTP/1.1 request has exactly one Host (its value may be empty); HTTP/1.0
// needs none. Header names in any case, and split anywhere.
TEST(http_request_parser, http_11_needs_exactly_one_host) {
  const std::vector<std::pair<std::string, bool>> cases{
    { "GET / HTTP/1.1\r\nHost: a\r\n\r\n", true },
    { "GET / HTTP/1.1\r\nhOsT: a\r\n\r\n", true },
    { "GET / HTTP/1.1\r\nHost:\r\n\r\n", true },
    { "GET / HTTP/1.0\r\n\r\n", true },
    { "GET / HTTP/1.1\r\n\r\n", false },
    { "GET / HTTP/1.1\r\nHosts: a\r\nX-Host: a\r\nHos: a\r\n\r\n", false },
    { "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", false },
    { "GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n", false },
  };
  for (const auto& [text, valid] : cases) {
    for (const std::size_t piece : { std::size_t{ 0 }, std::size_t{ 1 }, std::size_t{ 3 } }) {
      request_parser parser({});
      EXPECT_EQ(feed_in_pieces(parser, text, piece),
                valid ? kOneRequest : std::vector{ parse_event::error })
          << text << " in pieces of " << piece;
      if (!valid) {
        EXPECT_EQ(parser.error_status(), status::bad_request) << text;
      }
    }
  }
}

// "Expect: 100-continue" (any case) with a body still to come, from an HTTP/1.1 client: the
// server is to say "100 Continue" first. Not when the body came along, when there is none, or
// to an HTTP/1.0 client (RFC 9110, 10.1.1 and 15.2).
TEST(http_request_parser, expect_continue_is_reported_until_the_body_comes_or_it_is_sent) {
  const std::string head =
      "POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n";
  for (const std::size_t piece : { std::size_t{ 0 }, std::size_t{ 1 }, std::size_t{ 4 } }) {
    request_parser parser({});
    EXPECT_TRUE(feed_in_pieces(parser, head, piece).empty());
    EXPECT_TRUE(parser.continue_expected()) << "pieces of " << piece;
    parser.continue_sent();
    EXPECT_FALSE(parser.continue_expected());
    EXPECT_EQ(feed_in_pieces(parser, "abc", piece), kOneRequest);
    EXPECT_FALSE(parser.continue_expected());
  }
  request_parser before_the_body({});
  EXPECT_TRUE(feed_in_pieces(before_the_body, head + "a").empty());
  EXPECT_FALSE(before_the_body.continue_expected());  // the client did not wait
  for (const std::string text :
       { "GET / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n",
         "POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n",
         "POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
         "POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continues\r\nContent-Length: 3\r\n\r\n",
         "POST / HTTP/1.1\r\nHost: x\r\nX-Expect: 100-continue\r\nContent-Length: 3\r\n\r\n" }) {
    request_parser parser({});
    (void)feed_in_pieces(parser, text, 2);
    EXPECT_FALSE(parser.continue_expected()) << text;
  }
}

TEST(http_request_parser, malformed_requests_are_400_and_stay_failed) {
  for (const std::string text :
       { "NONSENSE\r\n\r\n", "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n",
         "GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", "GET / HTTP/x.1\r\n\r\n",
         "GET / HTTP/1.x\r\n\r\n", "GET / HTTP/11.1\r\n\r\n",
         // llhttp's strict mode: a CR only with its LF, CRLF after each chunk's data, no
         // whitespace before a colon.
         "GET / HTTP/1.1\r\nHost: x\r\n\r\r\n", "GET / HTTP/1.1\r\nHost: x\r\n\rX\r\n\r\n",
         "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
         "GET / HTTP/1.1\r\nHost: x\r\nX-A : x\r\n\r\n",
         // A bare LF for the empty line (llhttp takes it, as it takes no other bare LF).
         "GET / HTTP/1.1\r\nHost: x\r\n\n",
         // A header name is one character at least.
         "GET / HTTP/1.1\r\nHost: x\r\n: x\r\n\r\n" }) {
    request_parser parser({});
    EXPECT_EQ(feed_in_pieces(parser, text), std::vector{ parse_event::error }) << text;
    EXPECT_EQ(parser.error_status(), status::bad_request) << text;
    std::string_view next = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    EXPECT_EQ(parser.feed(next), parse_event::error) << text;
  }
}

// RFC 9112, 5.2: obs-fold (a header line that starts with SP or HTAB) is refused, from every
// split of the stream; SP and HTAB after a line's start, in the body or in the next request's
// line are not folds.
TEST(http_request_parser, obs_fold_is_400_from_every_split_of_the_stream) {
  for (const std::string text :
       { "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n",
         "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n\tb\r\n\r\n",
         "GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n",
         "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n \r\n\r\n" }) {
    for (std::size_t split = 0; split <= text.size(); ++split) {
      request_parser parser({});
      std::string_view first = std::string_view(text).substr(0, split);
      std::string_view second = std::string_view(text).substr(split);
      parse_event last = parse_event::need_more;
      for (std::string_view* part : { &first, &second }) {
        while (!part->empty() && last != parse_event::error) {
          last = parser.feed(*part);
          EXPECT_NE(last, parse_event::request) << text << " split at " << split;
        }
      }
      EXPECT_EQ(last, parse_event::error) << text << " split at " << split;
      EXPECT_EQ(parser.error_status(), status::bad_request) << text << " split at " << split;
    }
  }
  const std::string valid =
      "POST / HTTP/1.1\r\nHost: x\r\nX-A: a b\t c\r\nContent-Length: 4\r\n\r\n\n \t\n"
      "GET / HTTP/1.1\r\nHost:  x\r\n\r\n";
  for (const std::size_t piece : { std::size_t{ 0 }, std::size_t{ 1 }, std::size_t{ 2 } }) {
    request_parser parser({});
    EXPECT_EQ(feed_in_pieces(parser, valid, piece),
              (std::vector{ parse_event::request, parse_event::request }))
        << "pieces of " << piece;
  }
}

// As nginx: a transfer coding other than chunked alone is one the server does not implement
// (501, RFC 9112 6.1); "chunked" in any case, with spaces after it, is served (a tab after it,
// llhttp does not take for chunked, nor does nginx).
TEST(http_request_parser, transfer_coding_other_than_chunked_alone_is_501) {
  for (const std::string coding :
       { "gzip", "identity", "chunked, identity", "identity, chunked", "gzip, chunked", "chunked,",
         "xchunked", "chunkedx", "chunked\t", "chunked \t " }) {
    for (const std::size_t piece : { std::size_t{ 0 }, std::size_t{ 1 }, std::size_t{ 3 } }) {
      request_parser parser({});
      const std::string text =
          "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + coding + "\r\n\r\n0\r\n\r\n";
      EXPECT_EQ(feed_in_pieces(parser, text, piece), std::vector{ parse_event::error })
          << coding << " in pieces of " << piece;
      EXPECT_EQ(parser.error_status(), status::not_implemented) << coding;
    }
  }
  for (const std::string coding : { "chunked", "Chunked", "CHUNKED", "chunked ", "chunked   " }) {
    request_parser parser({});
    const std::string text = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + coding +
                             "\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    EXPECT_EQ(feed_in_pieces(parser, text, 1), kOneRequest) << coding;
  }
}

// As nginx: a second Transfer-Encoding line, or one in an HTTP/1.0 request (RFC 9112 6.1:
// faulty framing), is 400, whatever the codings.
TEST(http_request_parser, transfer_encoding_twice_or_in_http_1_0_is_400) {
  for (const std::string text :
       { "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
         "chunked\r\n\r\n0\r\n\r\n",
         "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\nTransfer-Encoding: "
         "chunked\r\n\r\n0\r\n\r\n",
         "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
         "identity\r\n\r\n0\r\n\r\n",
         "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
         "POST / HTTP/1.0\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
         "POST / HTTP/1.0\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n" }) {
    for (const std::size_t piece : { std::size_t{ 0 }, std::size_t{ 1 }, std::size_t{ 3 } }) {
      request_parser parser({});
      EXPECT_EQ(feed_in_pieces(parser, text, piece), std::vector{ parse_event::error })
          << text << " in pieces of " << piece;
      EXPECT_EQ(parser.error_status(), status::bad_request) << text << " in pieces of " << piece;
    }
  }
}

// As nginx answers: a well-formed version other than 1.0 and 1.1 is one the server does not
// speak (505), not a malformed request (400); one the request line names is refused there,
// before any header, from every split of the stream.
TEST(http_request_parser, a_version_other_than_1_0_or_1_1_is_505_and_stays_failed) {
  for (const std::string version :
       { "HTTP/2.0", "HTTP/1.2", "HTTP/0.9", "HTTP/3.0", "HTTP/9.9", "HTTP/0.0", "HTTP/2.1" }) {
    for (const std::size_t piece : { std::size_t{ 0 }, std::size_t{ 1 } }) {
      request_parser parser({});
      const std::string text = "GET / " + version + "\r\nHost: x\r\n\r\n";
      EXPECT_EQ(feed_in_pieces(parser, text, piece), std::vector{ parse_event::error }) << text;
      EXPECT_EQ(parser.error_status(), status::http_version_not_supported) << text;
      std::string_view next = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
      EXPECT_EQ(parser.feed(next), parse_event::error) << text;
    }
  }
  // HTTP/0.9's request line has no version at all.
  request_parser simple({});
  EXPECT_EQ(feed_in_pieces(simple, "GET /\r\n\r\n"), std::vector{ parse_event::error });
  EXPECT_EQ(simple.error_status(), status::http_version_not_supported);
  for (const std::string version : { "HTTP/1.0", "HTTP/1.1" }) {
    request_parser parser({});
    EXPECT_EQ(feed_in_pieces(parser, "GET / " + version + "\r\nHost: x\r\n\r\n"), kOneRequest)
        << version;
  }
}

}  // namespace
