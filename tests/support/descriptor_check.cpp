#include "support/descriptor_check.h"

#include <string>
#include <system_error>
#include <vector>

namespace cyan::test {

void expect_descriptors_back_to_baseline(pid_t pid, const descriptor_table& baseline,
                                         std::chrono::milliseconds settle,
                                         const std::string& what) {
  try {
    const std::vector<open_descriptor> left = wait_for_baseline(pid, baseline, settle);
    if (!left.empty()) {
      ADD_FAILURE() << what << " left these descriptors open:\n" << describe(left);
    }
  } catch (const std::system_error& e) {
    ADD_FAILURE() << what << ": its descriptors cannot be read: " << e.what();
  }
}

void descriptor_check::OnTestStart(const ::testing::TestInfo& test) {
  before_.reset();
  try {
    before_ = read_descriptor_table();
  } catch (const std::system_error& e) {
    ADD_FAILURE() << test.test_suite_name() << "." << test.name()
                  << ": the descriptors before it cannot be read: " << e.what();
  }
}

void descriptor_check::OnTestEnd(const ::testing::TestInfo& test) {
  if (before_) {
    expect_descriptors_back_to_baseline(0, *before_, settle_,
                                        std::string(test.test_suite_name()) + "." + test.name());
  }
}

}  // namespace cyan::test
