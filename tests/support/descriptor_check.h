#pragma once

// The check every test executable runs after each test (test_main.cpp installs it): the test
// closed every descriptor it opened; and the example servers' tests' check that a server closed
// every connection it accepted. See descriptors.h for what counts.

#include <sys/types.h>

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>

#include "support/descriptors.h"

namespace cyan::test {

/// Fails the running test (ADD_FAILURE, listing them, `what` first) when process `pid` (0: this
/// one) still holds descriptors beyond `baseline` after waiting up to `settle` for them to go
/// (wait_for_baseline()), or when its table cannot be read (the process is gone, or this one
/// has no descriptor left to read it with).
void expect_descriptors_back_to_baseline(pid_t pid, const descriptor_table& baseline,
                                         std::chrono::milliseconds settle, const std::string& what);

/// A GoogleTest event listener that reads this process's descriptor table before each test and
/// fails the test (ADD_FAILURE, listing them) when the process holds descriptors beyond it
/// after the test, its fixture torn down (descriptors_beyond()). It waits up to `settle` for
/// them to go before it fails: a socket that a pool task closes just after the test's last
/// line is not a leak. [the thread that runs the tests]
class descriptor_check : public ::testing::EmptyTestEventListener {
 public:
  explicit descriptor_check(std::chrono::milliseconds settle = std::chrono::seconds(2))
      : settle_(settle) {}

  void OnTestStart(const ::testing::TestInfo& test) override;
  void OnTestEnd(const ::testing::TestInfo& test) override;

 private:
  std::chrono::milliseconds settle_;
  std::optional<descriptor_table> before_;  // empty when it could not be read
};

}  // namespace cyan::test
