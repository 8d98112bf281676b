#include "cyan/net/endpoint.h"

#include <gtest/gtest.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "support/ipv6.h"

namespace {

using cyan::net::endpoint;
using cyan::test::kernel_has_ipv6;

constexpr std::size_t kPathOffset = offsetof(::sockaddr_un, sun_path);

// A socket closed at the end of the test.
class socket_fd {
 public:
  socket_fd(int domain, int type) : fd_(::socket(domain, type, 0)) {}
  socket_fd(const socket_fd&) = delete;
  socket_fd& operator=(const socket_fd&) = delete;
  ~socket_fd() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  [[nodiscard]] int get() const noexcept { return fd_; }

 private:
  int fd_;
};

// What the kernel says `fd` is bound to.
endpoint local_endpoint_of(int fd) {
  ::sockaddr_storage address{};
  ::socklen_t size = sizeof(address);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<::sockaddr*>(&address), &size), 0);
  return endpoint::from_sockaddr(reinterpret_cast<const ::sockaddr*>(&address), size);
}

// Binds a stream socket to `wanted` and returns what the kernel says it is bound to.
endpoint bind_and_read_back(const endpoint& wanted) {
  const socket_fd s(wanted.family(), SOCK_STREAM);
  EXPECT_GE(s.get(), 0);
  EXPECT_EQ(::bind(s.get(), wanted.data(), wanted.size()), 0) << wanted;
  return local_endpoint_of(s.get());
}

std::string what_parse_throws(const std::string& text) {
  try {
    (void)endpoint::parse(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "parse(\"" << text << "\") did not throw std::invalid_argument";
  return {};
}

TEST(endpoint, parses_ipv4_with_port) {
  const endpoint e = endpoint::parse("127.0.0.1:8080");
  EXPECT_TRUE(e.is_v4());
  EXPECT_FALSE(e.is_v6());
  EXPECT_FALSE(e.is_unix());
  EXPECT_EQ(e.family(), AF_INET);
  EXPECT_EQ(e.size(), sizeof(::sockaddr_in));
  EXPECT_EQ(e.port(), 8080);
  EXPECT_EQ(e.address(), "127.0.0.1");
  EXPECT_EQ(e.path(), "");
  EXPECT_EQ(e.to_string(), "127.0.0.1:8080");
}

TEST(endpoint, parses_ipv6_in_brackets) {
  const endpoint e = endpoint::parse("[::1]:8080");
  EXPECT_TRUE(e.is_v6());
  EXPECT_EQ(e.family(), AF_INET6);
  EXPECT_EQ(e.size(), sizeof(::sockaddr_in6));
  EXPECT_EQ(e.port(), 8080);
  EXPECT_EQ(e.address(), "::1");
  EXPECT_EQ(e.to_string(), "[::1]:8080");
  EXPECT_EQ(reinterpret_cast<const ::sockaddr_in6*>(e.data())->sin6_scope_id, 0U);
}

TEST(endpoint, prints_ipv6_in_its_shortest_form) {
  EXPECT_EQ(endpoint::parse("[0:0:0:0:0:0:0:1]:80").to_string(), "[::1]:80");
  EXPECT_EQ(endpoint::parse("[2001:DB8:0::1]:443").to_string(), "[2001:db8::1]:443");
}

TEST(endpoint, parses_an_ipv6_zone_by_interface_name_and_prints_it_by_name) {
  const unsigned lo = ::if_nametoindex("lo");
  ASSERT_NE(lo, 0U) << "this test needs the loopback interface \"lo\"";
  const endpoint by_name = endpoint::parse("[fe80::1%lo]:80");
  EXPECT_EQ(reinterpret_cast<const ::sockaddr_in6*>(by_name.data())->sin6_scope_id, lo);
  EXPECT_EQ(by_name.address(), "fe80::1%lo");
  EXPECT_EQ(by_name.to_string(), "[fe80::1%lo]:80");
  // The numeric zone of a known interface is the same endpoint, printed by name.
  const endpoint by_index = endpoint::parse("[fe80::1%" + std::to_string(lo) + "]:80");
  EXPECT_EQ(by_index, by_name);
  EXPECT_EQ(by_index.to_string(), "[fe80::1%lo]:80");
}

TEST(endpoint, prints_a_zone_no_interface_has_by_number) {
  ASSERT_EQ(::if_nametoindex("cyan-no-such0"), 0U);
  char name[IF_NAMESIZE];
  ASSERT_EQ(::if_indextoname(40000, name), nullptr) << "interface 40000 exists here";
  const endpoint e = endpoint::parse("[fe80::1%40000]:80");
  EXPECT_EQ(reinterpret_cast<const ::sockaddr_in6*>(e.data())->sin6_scope_id, 40000U);
  EXPECT_EQ(e.to_string(), "[fe80::1%40000]:80");
}

TEST(endpoint, parses_a_unix_path) {
  const endpoint e = endpoint::parse("unix:/run/x.sock");
  EXPECT_TRUE(e.is_unix());
  EXPECT_EQ(e.family(), AF_UNIX);
  EXPECT_EQ(e.size(), kPathOffset + std::strlen("/run/x.sock") + 1);
  EXPECT_EQ(e.port(), 0);
  EXPECT_EQ(e.path(), "/run/x.sock");
  EXPECT_EQ(e.address(), "/run/x.sock");
  EXPECT_EQ(e.to_string(), "unix:/run/x.sock");
  EXPECT_STREQ(reinterpret_cast<const ::sockaddr_un*>(e.data())->sun_path, "/run/x.sock");
}

TEST(endpoint, parses_an_abstract_unix_name_as_a_nul_then_the_name) {
  const endpoint e = endpoint::parse("unix:@cyan-test");
  EXPECT_TRUE(e.is_unix());
  EXPECT_EQ(e.size(), kPathOffset + 1 + std::strlen("cyan-test"));
  const char* sun_path = reinterpret_cast<const ::sockaddr_un*>(e.data())->sun_path;
  EXPECT_EQ(sun_path[0], '\0');
  EXPECT_EQ(std::string(sun_path + 1, 9), "cyan-test");
  EXPECT_EQ(e.path(), "@cyan-test");
  EXPECT_EQ(e.to_string(), "unix:@cyan-test");
}

TEST(endpoint, every_form_round_trips_through_to_string) {
  const std::vector<std::string> forms = {
    "127.0.0.1:8080", "0.0.0.0:0",       "255.255.255.255:65535", "[::1]:8080",
    "[::]:0",         "[fe80::1%lo]:80", "[2001:db8::7]:443",     "unix:/run/x.sock",
    "unix:relative",  "unix:@abstract",
  };
  for (const std::string& text : forms) {
    const endpoint parsed = endpoint::parse(text);
    EXPECT_EQ(parsed.to_string(), text);
    EXPECT_EQ(endpoint::parse(parsed.to_string()), parsed) << text;
  }
}

TEST(endpoint, accepts_the_longest_unix_names_sun_path_holds) {
  const std::string path(107, 'p');  // 108 bytes with the terminating '\0'
  const endpoint named = endpoint::parse("unix:" + path);
  EXPECT_EQ(named.path(), path);
  EXPECT_EQ(named.size(), sizeof(::sockaddr_un));
  const std::string name(107, 'a');  // 108 bytes after the leading '\0'
  const endpoint abstract = endpoint::parse("unix:@" + name);
  EXPECT_EQ(abstract.path(), "@" + name);
  EXPECT_EQ(abstract.size(), sizeof(::sockaddr_un));
}

TEST(endpoint, malformed_text_throws_invalid_argument_naming_it) {
  EXPECT_EQ(what_parse_throws("1.2.3:80"), R"(cyan::net::endpoint: malformed endpoint "1.2.3:80")");
  const std::vector<std::string> malformed = {
    "1.2.3:80",         // three parts
    "127.0.0.1",        // no port
    "127.0.0.1:",       // empty port
    "127.0.0.1:65536",  // port > 65535
    "127.0.0.1:99999999999",
    "127.0.0.1:8a",   // non-digit in port
    "127.0.0.1:+80",  // sign
    "127.0.0.1:-80",
    "127.0.0.1:80 ",  // trailing junk
    "127.0.0.1:80:80",
    "",
    ":80",
    "localhost:80",  // names need resolve()
    "::1:80",        // IPv6 without brackets
    "::1",
    "[::1]",  // no port
    "[::1]:",
    "[::1]80",
    "[::1]:80]",
    "[::1]:80x",
    "[127.0.0.1]:80",
    "[fe80::1%]:80",  // empty zone
    "[fe80::1%cyan-no-such0]:80",
    "unix:",   // empty path
    "unix:@",  // empty abstract name
    "unix:" + std::string(108, 'p'),
    "unix:@" + std::string(108, 'a'),
  };
  for (const std::string& text : malformed) {
    EXPECT_NE(what_parse_throws(text).find('"' + text + '"'), std::string::npos) << text;
  }
}

TEST(endpoint, a_unix_path_too_long_or_empty_is_refused_by_unix_socket_too) {
  EXPECT_THROW((void)endpoint::unix_socket(""), std::invalid_argument);
  EXPECT_THROW((void)endpoint::unix_socket("@"), std::invalid_argument);
  const std::string too_long(108, 'p');
  try {
    (void)endpoint::unix_socket(too_long);
    FAIL() << "unix_socket() of 108 bytes should have thrown";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find('"' + too_long + '"'), std::string::npos);
  }
  EXPECT_EQ(endpoint::unix_socket("/tmp/x").to_string(), "unix:/tmp/x");
  EXPECT_EQ(endpoint::unix_socket("@x"), endpoint::parse("unix:@x"));
}

// A NUL ends a C string, so a check that reads only up to it (inet_pton, if_nametoindex)
// would take "127.0.0.1\0evil:80" for 127.0.0.1:80. The message shows the NUL as \0.
TEST(endpoint, text_with_a_nul_throws_invalid_argument_naming_it_printably) {
  EXPECT_EQ(what_parse_throws(std::string("127.0.0.1\0evil:80", 17)),
            R"(cyan::net::endpoint: malformed endpoint "127.0.0.1\0evil:80")");
  EXPECT_EQ(what_parse_throws(std::string("[::1%lo\0junk]:80", 16)),
            R"(cyan::net::endpoint: malformed endpoint "[::1%lo\0junk]:80")");
  const std::vector<std::pair<std::string, std::string>> cases = {
    { std::string("127.0.0.1:80\0", 13), R"("127.0.0.1:80\0")" },
    { std::string("[::1\0]:80", 9), R"("[::1\0]:80")" },
    { std::string("unix:/tmp/a\0b", 13), R"("unix:/tmp/a\0b")" },
    { std::string("unix:@a\0b", 9), R"("unix:@a\0b")" },
    { std::string("\0", 1), R"("\0")" },
  };
  for (const auto& [text, quoted] : cases) {
    EXPECT_NE(what_parse_throws(text).find(quoted), std::string::npos) << quoted;
  }
}

TEST(endpoint, a_message_escapes_control_characters_quotes_and_backslashes) {
  EXPECT_EQ(what_parse_throws("a\"b\\c\td\n\x01"),
            R"(cyan::net::endpoint: malformed endpoint "a\"b\\c\td\n\x01")");
}

TEST(endpoint, unix_socket_refuses_a_nul_in_a_path_name) {
  try {
    (void)endpoint::unix_socket(std::string("/tmp/a\0b", 8));
    ADD_FAILURE() << "unix_socket() of a path with a NUL should have thrown";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(
        e.what(),
        R"(cyan::net::endpoint: bad Unix-domain path "/tmp/a\0b" (empty, longer than 107 bytes, or a path name with a NUL))");
  }
}

// The kernel takes any bytes in an abstract name, a NUL among them, and reports them as they
// are: the endpoint keeps them (path()), and its text writes the NUL as \0 (a backslash as \\)
// so that it parses back to the same endpoint.
TEST(endpoint, an_abstract_name_with_a_nul_the_kernel_reports_round_trips_through_to_string) {
  const std::string name = std::string("@cyan-\0-\\0-", 11) + std::to_string(::getpid());
  ::sockaddr_un wanted{};
  wanted.sun_family = AF_UNIX;
  std::memcpy(wanted.sun_path, name.data(), name.size());
  wanted.sun_path[0] = '\0';
  const socket_fd s(AF_UNIX, SOCK_STREAM);
  ASSERT_EQ(::bind(s.get(), reinterpret_cast<const ::sockaddr*>(&wanted),
                   static_cast<::socklen_t>(kPathOffset + name.size())),
            0);
  const endpoint bound = local_endpoint_of(s.get());
  EXPECT_EQ(bound.size(), kPathOffset + name.size());
  EXPECT_EQ(bound.path(), name);
  const std::string text = bound.to_string();
  EXPECT_EQ(text, "unix:@cyan-\\0-\\\\0-" + std::to_string(::getpid()));
  const endpoint parsed = endpoint::parse(text);
  EXPECT_EQ(parsed, bound);
  EXPECT_EQ(parsed.size(), bound.size());
  EXPECT_EQ(parsed.path(), name);
  EXPECT_EQ(parsed.to_string(), text);
  EXPECT_EQ(endpoint::unix_socket(name), bound);
}

TEST(endpoint, a_backslash_in_an_abstract_name_is_written_doubled_and_read_either_way) {
  const endpoint single = endpoint::parse(R"(unix:@a\b)");
  const endpoint doubled = endpoint::parse(R"(unix:@a\\b)");
  EXPECT_EQ(single.path(), R"(@a\b)");
  EXPECT_EQ(single, doubled);
  EXPECT_EQ(single.to_string(), R"(unix:@a\\b)");
  EXPECT_EQ(endpoint::parse(R"(unix:@trailing\)").path(), R"(@trailing\)");
  // A path name has no escapes: it cannot hold a NUL.
  EXPECT_EQ(endpoint::parse(R"(unix:/tmp/a\0b)").path(), R"(/tmp/a\0b)");
  EXPECT_EQ(endpoint::parse(R"(unix:/tmp/a\0b)").to_string(), R"(unix:/tmp/a\0b)");
}

TEST(endpoint, factories_give_the_loopback_and_wildcard_addresses) {
  EXPECT_EQ(endpoint().to_string(), "0.0.0.0:0");
  EXPECT_EQ(endpoint(), endpoint::any_v4());
  EXPECT_EQ(endpoint::loopback_v4(80).to_string(), "127.0.0.1:80");
  EXPECT_EQ(endpoint::loopback_v6(7).to_string(), "[::1]:7");
  EXPECT_EQ(endpoint::any_v4(9).to_string(), "0.0.0.0:9");
  EXPECT_EQ(endpoint::any_v6(9).to_string(), "[::]:9");
  EXPECT_EQ(endpoint::loopback_v6().port(), 0);
}

TEST(endpoint, with_port_keeps_the_address_and_zone) {
  EXPECT_EQ(endpoint::parse("10.1.2.3:80").with_port(443).to_string(), "10.1.2.3:443");
  EXPECT_EQ(endpoint::parse("[fe80::1%lo]:80").with_port(0).to_string(), "[fe80::1%lo]:0");
  EXPECT_THROW((void)endpoint::parse("unix:/x").with_port(80), std::logic_error);
}

TEST(endpoint, from_sockaddr_reads_a_kernel_bound_ipv4_socket) {
  const endpoint bound = bind_and_read_back(endpoint::loopback_v4(0));
  EXPECT_TRUE(bound.is_v4());
  EXPECT_NE(bound.port(), 0);
  EXPECT_EQ(bound.address(), "127.0.0.1");
  EXPECT_EQ(bound.to_string(), "127.0.0.1:" + std::to_string(bound.port()));
  EXPECT_EQ(bound, endpoint::loopback_v4(bound.port()));
}

TEST(endpoint, from_sockaddr_reads_a_kernel_bound_ipv6_socket) {
  if (!kernel_has_ipv6()) {
    GTEST_SKIP() << "no IPv6 in this kernel: socket(AF_INET6) failed";
  }
  const endpoint bound = bind_and_read_back(endpoint::loopback_v6(0));
  EXPECT_TRUE(bound.is_v6());
  EXPECT_NE(bound.port(), 0);
  EXPECT_EQ(bound.address(), "::1");
  EXPECT_EQ(bound.to_string(), "[::1]:" + std::to_string(bound.port()));
  EXPECT_EQ(bound, endpoint::loopback_v6(bound.port()));
}

TEST(endpoint, from_sockaddr_reads_a_kernel_bound_unix_path) {
  char directory[] = "/tmp/cyan-endpoint-XXXXXX";
  ASSERT_NE(::mkdtemp(directory), nullptr);
  const std::string path = std::string(directory) + "/s";
  const endpoint wanted = endpoint::unix_socket(path);
  const endpoint bound = bind_and_read_back(wanted);
  EXPECT_EQ(bound.path(), path);
  EXPECT_EQ(bound.to_string(), "unix:" + path);
  EXPECT_EQ(bound.size(), wanted.size());
  EXPECT_EQ(bound, wanted);
  EXPECT_EQ(::unlink(path.c_str()), 0);
  EXPECT_EQ(::rmdir(directory), 0);
}

TEST(endpoint, from_sockaddr_reads_a_kernel_bound_abstract_unix_name) {
  const std::string name = "@cyan-endpoint-test-" + std::to_string(::getpid());
  const endpoint wanted = endpoint::unix_socket(name);
  const endpoint bound = bind_and_read_back(wanted);
  EXPECT_EQ(bound.path(), name);
  EXPECT_EQ(bound.size(), wanted.size());
  EXPECT_EQ(bound, wanted);
}

TEST(endpoint, from_sockaddr_of_an_unnamed_unix_socket_has_an_empty_path) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  const endpoint unnamed = local_endpoint_of(pair[0]);
  ::close(pair[0]);
  ::close(pair[1]);
  EXPECT_TRUE(unnamed.is_unix());
  EXPECT_EQ(unnamed.size(), kPathOffset);
  EXPECT_EQ(unnamed.path(), "");
  EXPECT_EQ(unnamed.to_string(), "unix:");
}

TEST(endpoint, from_sockaddr_counts_a_paths_terminator_once) {
  // The same path, given with and without its '\0' in the size, is one endpoint.
  ::sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strcpy(address.sun_path, "/run/x.sock");
  const auto* raw = reinterpret_cast<const ::sockaddr*>(&address);
  const endpoint without = endpoint::from_sockaddr(raw, kPathOffset + 11);
  const endpoint with = endpoint::from_sockaddr(raw, kPathOffset + 12);
  const endpoint whole = endpoint::from_sockaddr(raw, sizeof(address));
  EXPECT_EQ(without.size(), kPathOffset + 12);
  EXPECT_EQ(whole.size(), kPathOffset + 12);
  EXPECT_EQ(without, with);
  EXPECT_EQ(whole, with);
  EXPECT_EQ(without.hash(), with.hash());
  EXPECT_EQ(with, endpoint::parse("unix:/run/x.sock"));
}

TEST(endpoint, an_abstract_name_differs_from_a_path_spelled_with_an_at_sign) {
  ::sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strcpy(address.sun_path, "@x");
  const endpoint path =
      endpoint::from_sockaddr(reinterpret_cast<const ::sockaddr*>(&address), kPathOffset + 3);
  const endpoint abstract = endpoint::unix_socket("@x");
  EXPECT_EQ(path.path(), "@x");
  EXPECT_EQ(abstract.path(), "@x");
  EXPECT_NE(path, abstract);
}

TEST(endpoint, from_sockaddr_refuses_other_families_and_wrong_sizes) {
  ::sockaddr_storage address{};
  const auto* raw = reinterpret_cast<const ::sockaddr*>(&address);
  address.ss_family = AF_PACKET;
  EXPECT_THROW((void)endpoint::from_sockaddr(raw, sizeof(address)), std::invalid_argument);
  address.ss_family = AF_INET;
  EXPECT_THROW((void)endpoint::from_sockaddr(raw, 1), std::invalid_argument);
  EXPECT_THROW((void)endpoint::from_sockaddr(raw, sizeof(::sockaddr_in) - 1),
               std::invalid_argument);
  address.ss_family = AF_INET6;
  EXPECT_THROW((void)endpoint::from_sockaddr(raw, sizeof(::sockaddr_in)), std::invalid_argument);
  address.ss_family = AF_UNIX;
  EXPECT_THROW((void)endpoint::from_sockaddr(raw, sizeof(::sockaddr_un) + 1),
               std::invalid_argument);
  EXPECT_THROW((void)endpoint::from_sockaddr(nullptr, 0), std::invalid_argument);
}

TEST(endpoint, storage_takes_what_recvfrom_writes) {
  const socket_fd receiver(AF_INET, SOCK_DGRAM);
  const socket_fd sender(AF_INET, SOCK_DGRAM);
  const endpoint any_port = endpoint::loopback_v4(0);
  ASSERT_EQ(::bind(receiver.get(), any_port.data(), any_port.size()), 0);
  ASSERT_EQ(::bind(sender.get(), any_port.data(), any_port.size()), 0);
  const endpoint to = local_endpoint_of(receiver.get());
  ASSERT_EQ(::sendto(sender.get(), "x", 1, 0, to.data(), to.size()), 1);

  endpoint from;
  ::socklen_t size = endpoint::capacity();
  char byte = 0;
  ASSERT_EQ(::recvfrom(receiver.get(), &byte, 1, 0, from.storage(), &size), 1);
  EXPECT_EQ(endpoint::capacity(), sizeof(::sockaddr_storage));
  EXPECT_EQ(endpoint::from_sockaddr(from.storage(), size), local_endpoint_of(sender.get()));
}

TEST(endpoint, orders_by_family_then_address_then_port_then_zone) {
  // AF_UNIX (1) < AF_INET (2) < AF_INET6 (10); addresses compare by their network-order bytes.
  const std::vector<std::string> ordered = {
    "unix:@a",    "unix:/a", "unix:/b", "9.0.0.1:80",   "10.0.0.1:80",     "10.0.0.1:443",
    "10.0.0.2:1", "[::]:80", "[::1]:1", "[fe80::1]:80", "[fe80::1%lo]:80", "[fe80::1]:81",
  };
  const std::set<endpoint> sorted = {
    endpoint::parse("[fe80::1]:81"),    endpoint::parse("10.0.0.2:1"),
    endpoint::parse("unix:/b"),         endpoint::parse("[::1]:1"),
    endpoint::parse("10.0.0.1:443"),    endpoint::parse("unix:@a"),
    endpoint::parse("[fe80::1%lo]:80"), endpoint::parse("9.0.0.1:80"),
    endpoint::parse("[::]:80"),         endpoint::parse("unix:/a"),
    endpoint::parse("10.0.0.1:80"),     endpoint::parse("[fe80::1]:80"),
    endpoint::parse("10.0.0.1:80")
  };
  std::vector<std::string> printed;
  for (const endpoint& e : sorted) {
    printed.push_back(e.to_string());
  }
  EXPECT_EQ(printed, ordered);
  for (std::size_t i = 0; i + 1 < ordered.size(); ++i) {
    const endpoint a = endpoint::parse(ordered[i]);
    const endpoint b = endpoint::parse(ordered[i + 1]);
    EXPECT_TRUE(a < b) << ordered[i] << " < " << ordered[i + 1];
    EXPECT_TRUE(b > a);
    EXPECT_NE(a, b);
    EXPECT_EQ(a <=> a, std::strong_ordering::equal);
  }
}

TEST(endpoint, equal_endpoints_hash_alike_and_are_one_set_element) {
  // Three distinct endpoints, each spelled twice.
  const std::vector<endpoint> spelled = {
    endpoint::parse("[::1]:80"), endpoint::loopback_v6(80),  endpoint::parse("127.0.0.1:80"),
    endpoint::loopback_v4(80),   endpoint::parse("unix:@n"), endpoint::unix_socket("@n"),
  };
  for (std::size_t i = 0; i < spelled.size(); i += 2) {
    EXPECT_EQ(spelled[i], spelled[i + 1]);
    EXPECT_EQ(spelled[i].hash(), spelled[i + 1].hash());
    EXPECT_EQ(std::hash<endpoint>{}(spelled[i]), spelled[i].hash());
  }
  const std::unordered_set<endpoint> unique(spelled.begin(), spelled.end());
  EXPECT_EQ(unique.size(), 3U);
  EXPECT_EQ(unique.count(endpoint::parse("[0::1]:80")), 1U);
  EXPECT_EQ(unique.count(endpoint::parse("[::1]:81")), 0U);
  EXPECT_EQ(std::set<endpoint>(spelled.begin(), spelled.end()).size(), 3U);
}

TEST(endpoint, writes_to_string_to_a_stream) {
  std::ostringstream out;
  out << endpoint::parse("[::1]:8080") << ' ' << endpoint::parse("unix:@x");
  EXPECT_EQ(out.str(), "[::1]:8080 unix:@x");
}

}  // namespace
