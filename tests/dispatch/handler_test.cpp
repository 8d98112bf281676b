// cyan/dispatch/handler.h: the callbacks a handler_thread makes on its handler, in which order,
// on which thread, with which payloads, and where exceptions go.

#include "cyan/dispatch/handler.h"

#include <gtest/gtest.h>

#include <any>
#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cyan/dispatch/handler_thread.h"

namespace {

using namespace std::chrono_literals;
using cyan::dispatch::handler_thread;

// Records every callback. Its fields are written on the handler thread only and read by the
// test after join(), which orders the two.
class recorder final : public cyan::dispatch::handler {
 public:
  std::vector<std::string> calls;
  std::vector<int> ints;
  std::vector<std::string> strings;
  std::vector<std::string> errors;
  std::thread::id initialize_thread;
  std::thread::id finalize_thread;
  bool throw_in_initialize = false;

 protected:
  void on_initialize() override {
    calls.push_back("initialize");
    initialize_thread = std::this_thread::get_id();
    if (throw_in_initialize) {
      throw std::runtime_error("initialize failed");
    }
  }

  void on_message(std::any&& message) override {
    calls.push_back("message");
    if (auto* value = std::any_cast<int>(&message)) {
      ints.push_back(*value);
    } else if (auto* text = std::any_cast<std::string>(&message)) {
      strings.push_back(std::move(*text));
    } else if (std::any_cast<double>(&message) != nullptr) {
      throw std::invalid_argument("doubles are refused");
    } else {
      throw 42;  // not a std::exception
    }
  }

  void on_finalize() override {
    calls.push_back("finalize");
    finalize_thread = std::this_thread::get_id();
  }

  void on_error(std::exception& error) noexcept override {
    calls.push_back("error");
    errors.emplace_back(error.what());
  }
};

TEST(handler, initialize_first_finalize_last_both_on_the_handler_thread) {
  recorder handler;
  std::thread::id worker_id;
  {
    handler_thread thread(handler);
    worker_id = thread.get_id();
    thread.post([&] { handler.calls.push_back("task"); });
    thread.send(1);
  }  // the destructor drains and joins
  EXPECT_NE(worker_id, std::this_thread::get_id());
  EXPECT_EQ(handler.initialize_thread, worker_id);
  EXPECT_EQ(handler.finalize_thread, worker_id);
  EXPECT_EQ(handler.calls,
            (std::vector<std::string>{ "initialize", "task", "message", "finalize" }));
}

TEST(handler, send_delivers_payloads_in_send_order) {
  recorder handler;
  handler_thread thread(handler);
  for (int i = 0; i < 100; ++i) {
    thread.send(i);
    thread.send(std::to_string(i));
  }
  thread.stop();
  thread.join();
  ASSERT_EQ(handler.ints.size(), 100u);
  ASSERT_EQ(handler.strings.size(), 100u);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(handler.ints[i], i);
    EXPECT_EQ(handler.strings[i], std::to_string(i));
  }
  EXPECT_TRUE(handler.errors.empty());
}

TEST(handler, send_delayed_arrives_after_its_delay_in_deadline_order) {
  recorder handler;
  handler_thread thread(handler);
  const auto start = std::chrono::steady_clock::now();
  thread.send_delayed(std::string("late"), 60ms);
  thread.send(std::string("early"), 20ms);  // the two-argument form is the same thing
  thread.send(std::string("now"));
  // A delayed awaitable posted after both, due after both, tells when they have run.
  auto fence = thread.post_awaitable([] { return std::chrono::steady_clock::now(); }, 80ms);
  const auto fence_time = fence.get();
  thread.stop();
  thread.join();
  EXPECT_EQ(handler.strings, (std::vector<std::string>{ "now", "early", "late" }));
  EXPECT_GE(fence_time - start, 80ms);       // never early
  EXPECT_LE(fence_time - start, 80ms + 5s);  // generous: a lost timer fails, a slow machine not
}

TEST(handler, exceptions_from_on_message_go_to_on_error_and_the_thread_keeps_running) {
  recorder handler;
  handler_thread thread(handler);
  thread.send(1.5);      // std::invalid_argument
  thread.send(nullptr);  // throws an int
  thread.send(7);        // still delivered
  thread.post([] { throw std::out_of_range("from a task"); });
  thread.post([] { throw 3.0; });
  auto after = thread.post_awaitable([] { return 99; });
  EXPECT_EQ(after.get(), 99);
  thread.stop();
  thread.join();
  EXPECT_EQ(handler.errors, (std::vector<std::string>{ "doubles are refused", "unknown exception",
                                                       "from a task", "unknown exception" }));
  EXPECT_EQ(handler.ints, std::vector<int>{ 7 });
}

TEST(handler, exception_from_on_initialize_is_reported_and_work_still_runs) {
  recorder handler;
  handler.throw_in_initialize = true;
  {
    handler_thread thread(handler);
    thread.send(5);
  }
  EXPECT_EQ(handler.calls,
            (std::vector<std::string>{ "initialize", "error", "message", "finalize" }));
  EXPECT_EQ(handler.errors, std::vector<std::string>{ "initialize failed" });
  EXPECT_EQ(handler.ints, std::vector<int>{ 5 });
}

TEST(handler, without_a_handler_a_message_is_reported_not_lost) {
  handler_thread thread;
  testing::internal::CaptureStderr();
  thread.send(1);
  thread.stop();
  thread.join();
  const std::string printed = testing::internal::GetCapturedStderr();
  EXPECT_NE(printed.find("does not override on_message"), std::string::npos) << printed;
}

// The active object from the dispatch brief, with real members.
class counter_object final : public cyan::dispatch::handler {
 public:
  counter_object() : thread_{ *this } {}
  ~counter_object() override { thread_.stop(); }

  void add(int v) { thread_.send(v); }
  void add_later(int v) { thread_.send_delayed(v, 10ms); }
  std::future<int> total() {
    return thread_.post_awaitable([this] { return total_; });
  }
  cyan::dispatch::future<int> total_later(std::chrono::milliseconds delay) {
    return thread_.post_awaitable([this] { return total_; }, delay);
  }
  int errors() {
    return thread_.post_awaitable([this] { return errors_; }).get();
  }

 protected:
  void on_initialize() override { total_ = 1000; }
  void on_message(std::any&& message) override { total_ += std::any_cast<int>(message); }
  void on_finalize() override { total_ = -1; }
  void on_error(std::exception&) noexcept override { ++errors_; }

 private:
  int total_ = 0;
  int errors_ = 0;
  cyan::dispatch::handler_thread thread_;  // last: starts after, stops before, the rest
};

TEST(handler, active_object_runs_on_its_own_thread) {
  counter_object object;
  object.add(1);
  object.add(2);
  object.add_later(100);
  std::future<int> first = object.total();  // converts to std::future, as in the brief
  EXPECT_EQ(first.get(), 1003);
  // Due after the delayed message, so it sees it.
  EXPECT_EQ(object.total_later(20ms).get(), 1103);
  EXPECT_EQ(object.errors(), 0);
}

}  // namespace
