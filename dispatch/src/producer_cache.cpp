#include "cyan/dispatch/detail/producer_cache.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cyan/dispatch/detail/inbox.h"
#include "cyan/dispatch/detail/inbox_channel.h"

namespace cyan::dispatch::detail {

constinit thread_local hot_channel tls_hot_channels[kHotChannels] = {};

namespace {

// One inbox this thread posts to: its lane once it has one, else how many posts went through
// the inbox's shared queue so far.
struct table_entry {
  std::uint64_t target = 0;
  inbox_channel* channel = nullptr;
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

void clear_hot_channels() noexcept {
  std::fill(std::begin(tls_hot_channels), std::end(tls_hot_channels), hot_channel{});
}

// Runs at thread exit, after every C++ thread_local destructor (glibc runs pthread key
// destructors last), so posts made from those destructors still use their lanes. Later posts
// (from other key destructors) go through the shared queue.
void close_lanes_at_exit(void* table_pointer) noexcept {
  auto* table = static_cast<producer_table*>(table_pointer);
  tls_exiting = true;
  clear_hot_channels();
  for (table_entry& entry : table->entries) {
    if (entry.channel != nullptr) {
      entry.channel->close();
      inbox_channel::release(entry.channel);
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
  clear_hot_channels();
  std::erase_if(table.entries, [](table_entry& entry) {
    if (entry.channel == nullptr) {
      return true;
    }
    if (entry.channel->target_dead()) {
      inbox_channel::release(entry.channel);
      return true;
    }
    return false;
  });
  table.purge_at = std::max(producer_table::kFirstPurge, table.entries.size() * 2);
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

inbox_channel* find_channel(inbox& target) {
  if (tls_exiting) {
    return nullptr;
  }
  const std::uint64_t id = target.id();
  table_entry& entry = find_or_add(local_table(), id);
  if (entry.channel == nullptr) {
    if (++entry.shared_posts <= inbox::kPromoteAfter) {
      return nullptr;
    }
    entry.channel = target.open_channel();
  }
  tls_hot_channels[id % kHotChannels] = hot_channel{ id, entry.channel };
  return entry.channel;
}

}  // namespace cyan::dispatch::detail
