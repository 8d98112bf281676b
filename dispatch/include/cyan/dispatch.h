#pragma once

/// Everything of cyan::dispatch: handler threads, the thread pool and the global pool's async()
/// functions, serial tokens, futures and their errors, and coroutines: task<T>, co_spawn,
/// schedule/yield, sleep_for/sleep_until, when_all/when_any, this_task::stop_token and
/// async_scope.

#include "cyan/dispatch/async.h"
#include "cyan/dispatch/async_scope.h"
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
