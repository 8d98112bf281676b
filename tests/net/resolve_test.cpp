#include "cyan/net/resolve.h"

#include <gtest/gtest.h>
#include <netdb.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <system_error>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cyan/dispatch/co_spawn.h"
#include "cyan/dispatch/handler_thread.h"
#include "cyan/net/error.h"
#include "support/ipv6.h"
#include "support/sync_wait.h"

namespace {

using cyan::dispatch::co_spawn;
using cyan::dispatch::handler_thread;
using cyan::dispatch::task;
using cyan::net::endpoint;
using cyan::net::resolve;
using cyan::net::resolve_category;
using cyan::net::resolve_flags;
using cyan::test::kernel_has_ipv6;
using cyan::test::sync_wait;

// The error resolve(host, service) fails with; a test failure if it succeeds.
std::system_error failure_of(const std::string& host, const std::string& service) {
  try {
    const std::vector<endpoint> found = sync_wait(resolve(host, service));
    ADD_FAILURE() << "resolve(\"" << host << "\", \"" << service << "\") found " << found.size()
                  << " addresses";
  } catch (const std::system_error& e) {
    return e;
  }
  return std::system_error(std::error_code());
}

// The message of the std::invalid_argument resolve(host, service) throws; a test failure if it
// throws nothing or something else.
std::string invalid_argument_of(const std::string& host, const std::string& service) {
  try {
    const std::vector<endpoint> found = sync_wait(resolve(host, service));
    ADD_FAILURE() << "resolve() found " << found.size() << " addresses";
  } catch (const std::invalid_argument& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "resolve() threw another exception: " << e.what();
  }
  return {};
}

bool all_unique(const std::vector<endpoint>& found) {
  return std::unordered_set<endpoint>(found.begin(), found.end()).size() == found.size();
}

TEST(resolve, a_numeric_ipv4_address_gives_exactly_itself) {
  EXPECT_EQ(sync_wait(resolve("127.0.0.1", "8080")),
            std::vector<endpoint>{ endpoint::parse("127.0.0.1:8080") });
}

TEST(resolve, a_numeric_ipv6_address_gives_exactly_itself) {
  if (!kernel_has_ipv6()) {
    GTEST_SKIP() << "no IPv6 in this kernel: socket(AF_INET6) failed";
  }
  EXPECT_EQ(sync_wait(resolve("::1", "7")), std::vector<endpoint>{ endpoint::parse("[::1]:7") });
}

TEST(resolve, localhost_includes_127_0_0_1_and_every_address_has_the_port) {
  const std::vector<endpoint> found = sync_wait(resolve("localhost", "80"));
  EXPECT_NE(std::find(found.begin(), found.end(), endpoint::loopback_v4(80)), found.end());
  for (const endpoint& e : found) {
    EXPECT_EQ(e.port(), 80) << e;
    EXPECT_TRUE(e == endpoint::loopback_v4(80) || e == endpoint::loopback_v6(80)) << e;
  }
  EXPECT_TRUE(all_unique(found));
}

TEST(resolve, a_service_name_gives_its_port) {
  if (::getservbyname("http", "tcp") == nullptr) {
    GTEST_SKIP() << "no \"http\" in /etc/services here";
  }
  EXPECT_EQ(sync_wait(resolve("127.0.0.1", "http")),
            std::vector<endpoint>{ endpoint::loopback_v4(80) });
}

TEST(resolve, an_empty_host_is_loopback_and_passive_makes_it_the_wildcard) {
  const std::vector<endpoint> loopback = sync_wait(resolve("", "8080"));
  ASSERT_FALSE(loopback.empty());
  for (const endpoint& e : loopback) {
    EXPECT_TRUE(e == endpoint::loopback_v4(8080) || e == endpoint::loopback_v6(8080)) << e;
  }
  EXPECT_TRUE(all_unique(loopback));

  const std::vector<endpoint> wildcard = sync_wait(resolve("", "8080", resolve_flags::passive));
  ASSERT_FALSE(wildcard.empty());
  for (const endpoint& e : wildcard) {
    EXPECT_TRUE(e == endpoint::any_v4(8080) || e == endpoint::any_v6(8080)) << e;
  }
  EXPECT_TRUE(all_unique(wildcard));
}

TEST(resolve, passive_does_not_change_a_named_host) {
  EXPECT_EQ(sync_wait(resolve("127.0.0.1", "9", resolve_flags::passive)),
            std::vector<endpoint>{ endpoint::loopback_v4(9) });
}

TEST(resolve, an_unknown_service_throws_eai_service_naming_the_lookup) {
  // glibc reports a service missing from /etc/services for SOCK_STREAM as EAI_SERVICE.
  const std::system_error error = failure_of("127.0.0.1", "no-such-service-xyz");
  EXPECT_EQ(&error.code().category(), &resolve_category());
  EXPECT_EQ(error.code().value(), EAI_SERVICE);
  EXPECT_EQ(error.code().message(), ::gai_strerror(EAI_SERVICE));
  EXPECT_NE(
      std::string(error.what()).find(R"(cyan::net::resolve("127.0.0.1", "no-such-service-xyz"))"),
      std::string::npos)
      << error.what();
}

TEST(resolve, a_name_in_the_invalid_tld_throws_a_lookup_failure) {
  // RFC 6761 reserves .invalid: no resolver finds it. Without a network the lookup may also
  // fail outright (EAI_AGAIN, EAI_FAIL); any other code would be a different error.
  const std::system_error error = failure_of("host.invalid", "80");
  EXPECT_EQ(&error.code().category(), &resolve_category());
  const int code = error.code().value();
  EXPECT_TRUE(code == EAI_NONAME || code == EAI_AGAIN || code == EAI_FAIL)
      << code << ": " << error.code().message();
  EXPECT_NE(std::string(error.what()).find(R"(cyan::net::resolve("host.invalid", "80"))"),
            std::string::npos)
      << error.what();
}

// getaddrinfo() reads host and service as C strings: "localhost\0evil.example" would be looked
// up as "localhost". The message shows the NUL as \0.
TEST(resolve, a_nul_in_the_host_or_service_throws_invalid_argument_naming_both) {
  EXPECT_EQ(invalid_argument_of(std::string("localhost\0evil.example", 22), "80"),
            R"(cyan::net::resolve("localhost\0evil.example", "80"): a NUL in the host or service)");
  EXPECT_EQ(invalid_argument_of("127.0.0.1", std::string("80\0junk", 7)),
            R"(cyan::net::resolve("127.0.0.1", "80\0junk"): a NUL in the host or service)");
}

// glibc's getaddrinfo() takes any service strtoul() reads whole as a port and keeps its low 16
// bits: "99999" would be port 34463 and "65536" port 0.
TEST(resolve, a_numeric_service_outside_0_to_65535_throws_invalid_argument_naming_it) {
  EXPECT_EQ(invalid_argument_of("127.0.0.1", "99999"),
            R"(cyan::net::resolve("127.0.0.1", "99999"): the port is not a decimal number )"
            R"(from 0 to 65535)");
  for (const std::string service :
       { "65536", "4294967376", "18446744073709551696", " 80", "+80", "-1" }) {
    EXPECT_NE(invalid_argument_of("127.0.0.1", service).find("\"" + service + "\""),
              std::string::npos)
        << service;
  }
  EXPECT_NE(invalid_argument_of("127.0.0.1", "\t65616").find(R"("\t65616")"), std::string::npos);
}

TEST(resolve, a_numeric_service_from_0_to_65535_gives_exactly_that_port) {
  for (const auto& [service, port] : std::vector<std::pair<std::string, std::uint16_t>>{
           { "0", 0 }, { "1", 1 }, { "080", 80 }, { "65535", 65535 } }) {
    EXPECT_EQ(sync_wait(resolve("127.0.0.1", service)),
              std::vector<endpoint>{ endpoint::loopback_v4(port) })
        << service;
  }
}

TEST(resolve, a_task_on_a_handler_thread_resumes_there_with_the_result) {
  handler_thread thread;
  struct outcome {
    bool started_here = false;
    bool resumed_here = false;
    std::vector<endpoint> found;
  };
  outcome seen = co_spawn(thread, [&thread]() -> task<outcome> {
                   outcome result;
                   result.started_here = thread.is_current();
                   result.found = co_await resolve("127.0.0.1", "8080");
                   result.resumed_here = thread.is_current();
                   co_return result;
                 }).get();
  EXPECT_TRUE(seen.started_here);
  EXPECT_TRUE(seen.resumed_here);
  EXPECT_EQ(seen.found, std::vector<endpoint>{ endpoint::parse("127.0.0.1:8080") });
  thread.stop();
  thread.join();
  EXPECT_FALSE(thread.is_running());
}

TEST(resolve, a_failure_reaches_a_task_on_a_handler_thread_there) {
  handler_thread thread;
  const int code = co_spawn(thread, [&thread]() -> task<int> {
                     try {
                       (void)co_await resolve("127.0.0.1", "no-such-service-xyz");
                     } catch (const std::system_error& e) {
                       co_return thread.is_current() ? e.code().value() : 0;
                     }
                     co_return 0;
                   }).get();
  EXPECT_EQ(code, EAI_SERVICE);
  thread.stop();
  thread.join();
  EXPECT_FALSE(thread.is_running());
}

}  // namespace
