// http_server's request parser against any byte stream (the input, as a client would send it).
// The stream is parsed with the server's limits and with small ones (so the 431 and 413 paths
// are reached), each time in one read and cut into reads of 1, 2, 3, 7 and 64 bytes (4,096 for
// inputs over 64 KiB). What must hold:
//   - feed() consumes what it reports: need_more leaves nothing, an error consumes nothing more
//     and repeats itself; requests_begun() never goes back;
//   - an error is one of the answers the server gives (400, 413, 414, 431, 501, 505);
//   - the outcome does not depend on how the stream was cut: the requests (method, target,
//     keep-alive, version) and the error, in order, are the same as when it comes in one read.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "http/request_parser.h"

namespace {

using cyan::examples::http::parse_event;
using cyan::examples::http::request;
using cyan::examples::http::request_limits;
using cyan::examples::http::request_parser;
using cyan::examples::http::status;

struct outcome {
  std::vector<request> requests;
  bool failed = false;
  status error = status::ok;
};

bool same(const request& a, const request& b) {
  return a.method == b.method && a.root == b.root && a.keep_alive == b.keep_alive &&
         a.http_1_0 == b.http_1_0;
}

outcome parse(std::string_view stream, std::size_t piece, request_limits limits) {
  outcome out;
  request_parser parser(limits);
  std::uint64_t begun = 0;
  while (!stream.empty() && !out.failed) {
    std::string_view input = stream.substr(0, piece);
    stream.remove_prefix(input.size());
    while (!input.empty()) {
      const std::size_t before = input.size();
      const parse_event event = parser.feed(input);
      CYAN_FUZZ_CHECK(input.size() <= before);
      CYAN_FUZZ_CHECK(parser.requests_begun() >= begun);
      begun = parser.requests_begun();
      if (event == parse_event::need_more) {
        CYAN_FUZZ_CHECK(input.empty());
        break;
      }
      if (event == parse_event::request) {
        CYAN_FUZZ_CHECK(before != input.size());  // a request takes bytes
        out.requests.push_back(parser.last());
        continue;
      }
      out.failed = true;
      out.error = parser.error_status();
      CYAN_FUZZ_CHECK(
          out.error == status::bad_request || out.error == status::payload_too_large ||
          out.error == status::uri_too_long || out.error == status::header_fields_too_large ||
          out.error == status::not_implemented || out.error == status::http_version_not_supported);
      const std::size_t left = input.size();
      CYAN_FUZZ_CHECK(parser.feed(input) == parse_event::error);  // and again
      CYAN_FUZZ_CHECK(input.size() == left);
      CYAN_FUZZ_CHECK(parser.error_status() == out.error);
      break;
    }
  }
  return out;
}

void same_outcome(const outcome& cut, const outcome& whole) {
  CYAN_FUZZ_CHECK(cut.failed == whole.failed);
  CYAN_FUZZ_CHECK(cut.error == whole.error);
  CYAN_FUZZ_CHECK(cut.requests.size() == whole.requests.size());
  for (std::size_t i = 0; i < cut.requests.size(); ++i) {
    CYAN_FUZZ_CHECK(same(cut.requests[i], whole.requests[i]));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view stream(reinterpret_cast<const char*>(data), size);
  constexpr std::size_t kSmallPieces[] = { 1, 2, 3, 7, 64 };
  constexpr std::size_t kLargePieces[] = { 4096 };
  const bool large = size > 64 * 1024;
  for (const request_limits limits :
       { request_limits{}, request_limits{ .max_header_bytes = 256, .max_body_bytes = 64 } }) {
    const outcome whole = parse(stream, size + 1, limits);
    for (const std::size_t piece : large ? std::span<const std::size_t>(kLargePieces)
                                         : std::span<const std::size_t>(kSmallPieces)) {
      same_outcome(parse(stream, piece, limits), whole);
    }
  }
  return 0;
}
