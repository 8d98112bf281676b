#pragma once

/// Everything of cyan::dispatch: handler threads, the thread pool and the global pool's async()
/// functions, serial tokens, futures and their errors, and coroutines: task<T>, co_spawn,
/// schedule/yield, sleep_for/sleep_until, when_all/when_any, with_timeout, this_task::stop_token,
/// async_scope, async_generator; and their synchronisation: async_mutex, async_semaphore,
/// async_event, async_latch and channel.

#include "cyan/dispatch/async.h"
#include "cyan/dispatch/async_event.h"
#include "cyan/dispatch/async_generator.h"
#include "cyan/dispatch/async_latch.h"
#include "cyan/dispatch/async_mutex.h"
#include "cyan/dispatch/async_scope.h"
#include "cyan/dispatch/async_semaphore.h"
#include "cyan/dispatch/channel.h"
#include "cyan/dispatch/co_spawn.h"
#include "cyan/dispatch/errors.h"
#include "cyan/dispatch/future.h"
#include "cyan/dispatch/handler.h"
#include "cyan/dispatch/handler_thread.h"
#include "cyan/dispatch/schedule.h"
#include "cyan/dispatch/serial_token.h"
#include "cyan/dispatch/sleep.h"
#include "cyan/dispatch/stop_mode.h"
#include "cyan/dispatch/task.h"
#include "cyan/dispatch/this_task.h"
#include "cyan/dispatch/thread_pool.h"
#include "cyan/dispatch/when_all.h"
#include "cyan/dispatch/with_timeout.h"
