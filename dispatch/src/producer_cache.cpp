#include "cyan/dispatch/detail/producer_cache.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cyan/dispatch/detail/inbox.h"
#include "cyan/dispatch/detail/inbox_lane.h"

namespace cyan::dispatch::detail {

constinit thread_local hot_lane tls_hot_lanes[kHotLanes] = {};

namespace {

// One inbox this thread posts to: its lane once it has one, else how many posts went through
// the inbox's shared queue so far.
struct table_entry {
  std::uint64_t target = 0;
  inbox_lane* lane = nullptr;
  std::uint32_t shared_posts = 0;
};

// The thread's full table. Purged when it doubles: lanes of destroyed inboxes are released and
// entries without a lane are forgotten (they only lose their count).
struct producer_table {
  static constexpr std::size_t kFirstPurge = 32;
  std::vector<table_entry> entries;
  std::size_t purge_at = kFirstPurge;
};

// Both trivially destructible, so they stay readable during thread exit.
constinit thread_local producer_table* tls_table = nullptr;
constinit thread_local bool tls_exiting = false;

void clear_hot_lanes() noexcept {
  std::fill(std::begin(tls_hot_lanes), std::end(tls_hot_lanes), hot_lane{});
}

// Runs at thread exit, after every C++ thread_local destructor (glibc runs pthread key
// destructors last), so posts made from those destructors still use their lanes. Later posts
// (from other key destructors) go through the shared queue.
void close_lanes_at_exit(void* table_pointer) noexcept {
  auto* table = static_cast<producer_table*>(table_pointer);
  tls_exiting = true;
  clear_hot_lanes();
  for (table_entry& entry : table->entries) {
    if (entry.lane != nullptr) {
      entry.lane->close();
      inbox_lane::release(entry.lane);
    }
  }
  delete table;
  tls_table = nullptr;
}

pthread_key_t exit_key() {
  static const pthread_key_t key = [] {
    pthread_key_t made;
    if (pthread_key_create(&made, &close_lanes_at_exit) != 0) {
      std::fputs("cyan::dispatch: pthread_key_create failed\n", stderr);
      std::abort();
    }
    return made;
  }();
  return key;
}

producer_table& local_table() {
  if (tls_table == nullptr) {
    auto table = std::make_unique<producer_table>();
    if (pthread_setspecific(exit_key(), table.get()) != 0) {
      throw std::bad_alloc();
    }
    tls_table = table.release();
  }
  return *tls_table;
}

void purge(producer_table& table) noexcept {
  clear_hot_lanes();
  std::erase_if(table.entries, [](table_entry& entry) {
    if (entry.lane == nullptr) {
      return true;
    }
    if (entry.lane->target_dead()) {
      inbox_lane::release(entry.lane);
      return true;
    }
    return false;
  });
  table.purge_at = std::max(producer_table::kFirstPurge, table.entries.size() * 2);
}

// Puts the lane of `entry` into the hot cache.
inbox_lane* make_hot(const table_entry& entry) noexcept {
  tls_hot_lanes[entry.target % kHotLanes] = hot_lane{ entry.target, entry.lane };
  return entry.lane;
}

table_entry& find_or_add(producer_table& table, std::uint64_t target) {
  for (table_entry& entry : table.entries) {
    if (entry.target == target) {
      return entry;
    }
  }
  if (table.entries.size() >= table.purge_at) {
    purge(table);
  }
  return table.entries.emplace_back(table_entry{ target, nullptr, 0 });
}

}  // namespace

inbox_lane* find_lane(inbox& target) {
  if (tls_exiting) {
    return nullptr;
  }
  table_entry& entry = find_or_add(local_table(), target.id());
  if (entry.lane == nullptr) {
    if (++entry.shared_posts <= inbox::kPromoteAfter) {
      return nullptr;
    }
    entry.lane = target.open_lane();
  }
  return make_hot(entry);
}

void open_lane_now(inbox& target) {
  table_entry& entry = find_or_add(local_table(), target.id());
  if (entry.lane == nullptr) {
    entry.lane = target.open_lane();
  }
  make_hot(entry);
}

}  // namespace cyan::dispatch::detail
