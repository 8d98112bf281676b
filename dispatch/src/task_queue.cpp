#include "cyan/dispatch/detail/task_queue.h"

// The pool's queue, compiled here once (see the extern template in task_queue.h).
template class cyan::lockfree::segmented_queue<cyan::unique_function<void()>>;
