#pragma once

#include "cyan/common/unique_function.h"
#include "cyan/lockfree/segmented_queue.h"

namespace cyan::dispatch::detail {

/// A thread_pool's shared queue of tasks: lockfree::segmented_queue (see there for the design,
/// the thread rules and the seal/close policies). Why not lockfree::queue: that Michael–Scott
/// queue pays hazard pointers and a node per element; a pool moves millions of tiny tasks, and
/// here a task costs one uncontended CAS to post, with no allocation in steady state.
using task_queue = lockfree::segmented_queue<unique_function<void()>>;

}  // namespace cyan::dispatch::detail

// Compiled once, in task_queue.cpp: the pool's callers reach its members through calls, not
// copies inlined into every caller.
extern template class cyan::lockfree::segmented_queue<cyan::unique_function<void()>>;
