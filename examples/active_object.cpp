// An active object: a bank account whose balance lives on its own handler_thread. Other
// threads never touch the balance; they send it messages (deposit, withdraw, apply interest
// later) or post closures, and ask for the balance through a future. No locks anywhere.
//
// Run it: it prints what happens and exits with 0 when the final balance is the expected one.

#include <any>
#include <chrono>
#include <cstdio>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cyan/dispatch/handler.h"
#include "cyan/dispatch/handler_thread.h"

namespace {

using namespace std::chrono_literals;

// The messages the account understands.
struct deposit {
  long cents;
};
struct withdraw {
  long cents;
};
struct apply_interest {
  long basis_points;  // 1/100 of a percent
};

class insufficient_funds : public std::runtime_error {
 public:
  explicit insufficient_funds(long wanted, long balance)
      : std::runtime_error("insufficient funds: wanted " + std::to_string(wanted) +
                           " cents, balance " + std::to_string(balance)) {}
};

class account final : public cyan::dispatch::handler {
 public:
  explicit account(std::string name) : name_(std::move(name)), thread_{ *this, options(name_) } {}
  ~account() override { thread_.stop(); }  // drains: every message sent so far is handled

  // The interface other threads use: each call only queues work for the account's thread.
  void deposit_cents(long cents) { thread_.send(deposit{ cents }); }
  void withdraw_cents(long cents) { thread_.send(withdraw{ cents }); }
  void apply_interest_later(long basis_points, std::chrono::milliseconds delay) {
    thread_.send_delayed(apply_interest{ basis_points }, delay);
  }
  std::future<long> balance() {
    return thread_.post_awaitable([this] { return balance_; });
  }
  // Asked after `delay`, so it sees what was scheduled before it.
  std::future<long> balance_after(std::chrono::milliseconds delay) {
    return thread_.post_awaitable([this] { return balance_; }, delay);
  }
  std::future<long> rejected() {
    return thread_.post_awaitable([this] { return rejected_; });
  }

 protected:
  void on_initialize() override { std::printf("[%s] opened on its own thread\n", name_.c_str()); }

  void on_message(std::any&& message) override {
    if (const auto* d = std::any_cast<deposit>(&message)) {
      balance_ += d->cents;
    } else if (const auto* w = std::any_cast<withdraw>(&message)) {
      if (w->cents > balance_) {
        throw insufficient_funds(w->cents, balance_);  // goes to on_error
      }
      balance_ -= w->cents;
    } else if (const auto* i = std::any_cast<apply_interest>(&message)) {
      const long interest = balance_ * i->basis_points / 10'000;
      std::printf("[%s] interest: %ld cents\n", name_.c_str(), interest);
      balance_ += interest;
    } else {
      throw std::invalid_argument("unknown message");
    }
  }

  void on_finalize() override {
    std::printf("[%s] closed with %ld cents\n", name_.c_str(), balance_);
  }

  void on_error(std::exception& error) noexcept override {
    ++rejected_;
    std::printf("[%s] rejected: %s\n", name_.c_str(), error.what());
  }

 private:
  static cyan::dispatch::handler_thread::options options(const std::string& name) {
    cyan::dispatch::handler_thread::options opts;
    opts.name = "account-" + name;
    return opts;
  }

  const std::string name_;
  long balance_ = 0;                       // touched only on thread_
  long rejected_ = 0;                      // touched only on thread_
  cyan::dispatch::handler_thread thread_;  // last: starts after the members it uses
};

}  // namespace

int main() {
  account savings("savings");

  // Four tellers deposit concurrently: 4 x 1,000 deposits of 25 cents.
  std::vector<std::thread> tellers;
  for (int t = 0; t < 4; ++t) {
    tellers.emplace_back([&savings] {
      for (int i = 0; i < 1000; ++i) {
        savings.deposit_cents(25);
      }
      // Order is FIFO per posting thread only: a teller waits for its own deposits (this
      // question queues behind them) before it reports done, so the withdrawals below, posted
      // by another thread, cannot overtake them.
      savings.balance().get();
    });
  }
  for (auto& teller : tellers) {
    teller.join();
  }

  savings.withdraw_cents(50'000);  // 500.00 of 1,000.00: accepted
  savings.withdraw_cents(60'000);  // more than what is left: rejected through on_error
  std::future<long> now = savings.balance();
  std::printf("balance after the withdrawals: %ld cents\n", now.get());

  savings.apply_interest_later(200, 20ms);  // 2% in 20 ms
  const long final_balance = savings.balance_after(40ms).get();
  const long rejected = savings.rejected().get();
  std::printf("balance after interest: %ld cents, %ld operation(s) rejected\n", final_balance,
              rejected);

  const long expected = (100'000 - 50'000) * 102 / 100;
  if (final_balance != expected || rejected != 1) {
    std::printf("unexpected: wanted %ld cents and 1 rejection\n", expected);
    return 1;
  }
  return 0;
}
