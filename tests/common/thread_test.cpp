#include "cyan/common/thread.h"

#include <gtest/gtest.h>

#include <sched.h>

#include <string>
#include <system_error>
#include <thread>

TEST(this_thread, name_is_set_and_truncated_to_15_bytes) {
  std::string short_name, long_name;
  std::thread worker([&] {
    EXPECT_TRUE(cyan::this_thread::set_name("cyan-worker"));
    short_name = cyan::this_thread::get_name();
    EXPECT_TRUE(cyan::this_thread::set_name("a-name-longer-than-fifteen-bytes"));
    long_name = cyan::this_thread::get_name();
  });
  worker.join();
  EXPECT_EQ(short_name, "cyan-worker");
  EXPECT_EQ(long_name, "a-name-longer-t");
}

TEST(this_thread, affinity_pins_to_the_chosen_cpu) {
  unsigned cpu_seen = 1000;
  std::thread worker([&] {
    cyan::this_thread::set_affinity(0);
    cpu_seen = static_cast<unsigned>(sched_getcpu());
  });
  worker.join();
  EXPECT_EQ(cpu_seen, 0u);
}

TEST(this_thread, affinity_to_a_missing_cpu_throws) {
  std::thread worker(
      [] { EXPECT_THROW(cyan::this_thread::set_affinity(1u << 20), std::system_error); });
  worker.join();
}
