// The benchmark harness's schedule: which arm runs when, and which runs it keeps.

#include "bench/harness.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <time.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "bench/process.h"

namespace {

using cyan::bench::sample;
using cyan::bench::suite;

// Two arms, "a" and "b", that log each call; a run's sample is its call number (from 1), so the
// kept samples say which calls were kept.
struct logged_arms {
  std::vector<std::string> calls;

  void add_to(suite& s) {
    for (const char* name : { "a", "b" }) {
      s.add(name, [this, name] {
        calls.emplace_back(name);
        return sample{ static_cast<double>(calls.size()), 7 };
      });
    }
  }
};

class bench_harness : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(setenv("CYAN_BENCH_REPS", "3", 1), 0);
    ASSERT_EQ(unsetenv("CYAN_BENCH_CSV"), 0);
  }
  void TearDown() override {
    unsetenv("CYAN_BENCH_REPS");
    unsetenv("CYAN_BENCH_ARMS");
    unsetenv("CYAN_BENCH_BUSY");
    unsetenv("CYAN_BENCH_CSV");
  }
};

TEST_F(bench_harness, arms_alternate_and_each_repetition_starts_one_arm_later) {
  suite s{ "test", "plain" };
  logged_arms arms;
  arms.add_to(s);
  ASSERT_TRUE(s.run());
  EXPECT_EQ(arms.calls, (std::vector<std::string>{ "a", "b", "b", "a", "a", "b" }));
  EXPECT_DOUBLE_EQ(s.median("a"), 4);  // calls 1, 4, 5
  EXPECT_DOUBLE_EQ(s.median("b"), 3);  // calls 2, 3, 6
}

TEST_F(bench_harness, each_kept_sample_comes_right_after_an_untimed_run_of_the_same_arm) {
  suite s{ "test", "rerun" };
  s.warm_up_each_arm();
  s.rerun_before_each_sample();
  logged_arms arms;
  arms.add_to(s);
  ASSERT_TRUE(s.run());
  EXPECT_EQ(arms.calls, (std::vector<std::string>{ "a", "b",                // warm-up
                                                   "a", "a", "b", "b",      // repetition 1
                                                   "b", "b", "a", "a",      // repetition 2
                                                   "a", "a", "b", "b" }));  // repetition 3
  // Kept: the second call of each pair. a: calls 4, 10, 12; b: calls 6, 8, 14.
  EXPECT_DOUBLE_EQ(s.median("a"), 10);
  EXPECT_DOUBLE_EQ(s.spread("a"), 12.0 / 4.0);
  EXPECT_DOUBLE_EQ(s.median("b"), 8);
  EXPECT_DOUBLE_EQ(s.spread("b"), 14.0 / 6.0);
}

TEST_F(bench_harness, only_the_arms_the_regex_matches_run_and_their_goals_are_skipped) {
  ASSERT_EQ(setenv("CYAN_BENCH_ARMS", "^b$", 1), 0);
  suite s{ "test", "arms" };
  logged_arms arms;
  arms.add_to(s);
  ASSERT_TRUE(s.run());
  EXPECT_EQ(arms.calls, (std::vector<std::string>{ "b", "b", "b" }));
  EXPECT_DOUBLE_EQ(s.median("b"), 2);
  EXPECT_TRUE(std::isnan(s.median("a")));
  EXPECT_TRUE(std::isnan(s.spread("a")));
  // A goal against an arm that did not run is skipped (true), not failed or thrown.
  EXPECT_TRUE(s.goal("a", "b", 1000.0));
  EXPECT_TRUE(s.goal_at_most("b", "a", 0.001));
  EXPECT_TRUE(s.goal_spread("a", 0.5));
  // One that ran is still judged.
  EXPECT_FALSE(s.goal_spread("b", 1.0));  // samples 1, 2, 3: spread 3
}

TEST_F(bench_harness, a_regex_that_matches_no_arm_runs_nothing) {
  ASSERT_EQ(setenv("CYAN_BENCH_ARMS", "nothing", 1), 0);
  suite s{ "test", "none" };
  logged_arms arms;
  arms.add_to(s);
  EXPECT_TRUE(s.run());
  EXPECT_TRUE(arms.calls.empty());
}

// /proc/<pid>/status's Cpus_allowed_list, e.g. "1".
std::string allowed_cpus(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Cpus_allowed_list:", 0) == 0) {
      return line.substr(line.find_first_not_of(" \t", 18));
    }
  }
  return "?";
}

// The CPU seconds process `pid` has used (its CPU-time clock).
double cpu_seconds_of(int pid) {
  clockid_t clock{};
  timespec now{};
  if (clock_getcpuclockid(pid, &clock) != 0 || clock_gettime(clock, &now) != 0) {
    return -1;
  }
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

TEST_F(bench_harness, busy_mode_runs_a_new_pinned_busy_child_beside_each_arm_run_and_reaps_it) {
  ASSERT_EQ(setenv("CYAN_BENCH_BUSY", "1", 1), 0);
  ASSERT_EQ(setenv("CYAN_BENCH_REPS", "2", 1), 0);
  const std::string csv_path = ::testing::TempDir() + "bench_harness_busy.csv";
  std::remove(csv_path.c_str());
  ASSERT_EQ(setenv("CYAN_BENCH_CSV", csv_path.c_str(), 1), 0);
  EXPECT_EQ(cyan::bench::busy_child_pid(), -1);
  suite s{ "test", "busy" };
  EXPECT_EQ(s.workload(), "busy [busy]");
  s.warm_up_each_arm();
  std::vector<int> pids;
  std::vector<std::string> cpus;
  std::vector<double> burnt;  // CPU seconds each child had used when its arm ended
  for (const char* name : { "a", "b" }) {
    s.add(name, [&] {
      const int pid = cyan::bench::busy_child_pid();
      pids.push_back(pid);
      cpus.push_back(allowed_cpus(pid));
      // The child burns CPU: wait (bounded, 5 s) until it has used 20 ms.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (cpu_seconds_of(pid) < 0.02 && std::chrono::steady_clock::now() < deadline) {
      }
      burnt.push_back(cpu_seconds_of(pid));
      return sample{ 1.0, 7 };
    });
  }
  ASSERT_TRUE(s.run());
  ASSERT_EQ(pids.size(), 6u);  // 2 warm-up runs + 2 repetitions × 2 arms
  for (std::size_t i = 0; i < pids.size(); ++i) {
    EXPECT_GT(pids[i], 0) << "run " << i;
    EXPECT_EQ(cpus[i], std::to_string(cyan::bench::last_allowed_cpu())) << "run " << i;
    EXPECT_GE(burnt[i], 0.02) << "run " << i;
    for (std::size_t j = 0; j < i; ++j) {
      EXPECT_NE(pids[i], pids[j]) << "runs " << j << " and " << i << " shared a child";
    }
    // Reaped: the pid names no process (nor zombie) of ours any more.
    errno = 0;
    EXPECT_EQ(::kill(pids[i], 0), -1) << "run " << i;
    EXPECT_EQ(errno, ESRCH) << "run " << i;
  }
  EXPECT_EQ(cyan::bench::busy_child_pid(), -1);
  std::ifstream csv(csv_path);
  const std::string rows((std::istreambuf_iterator<char>(csv)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rows,
            "test,busy [busy],a,1.000000,1.000000,1.000000,2,7\n"
            "test,busy [busy],b,1.000000,1.000000,1.000000,2,7\n");
}

TEST_F(bench_harness, quiet_mode_runs_no_child_and_keeps_the_workload_name) {
  ASSERT_EQ(setenv("CYAN_BENCH_BUSY", "0", 1), 0);
  suite s{ "test", "quiet" };
  EXPECT_EQ(s.workload(), "quiet");
  std::vector<int> pids;
  s.add("a", [&] {
    pids.push_back(cyan::bench::busy_child_pid());
    return sample{ 1.0, 7 };
  });
  ASSERT_TRUE(s.run());
  EXPECT_EQ(pids, (std::vector<int>{ -1, -1, -1 }));
}

}  // namespace
