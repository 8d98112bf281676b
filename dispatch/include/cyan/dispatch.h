#pragma once

/// Everything of cyan::dispatch: handler threads, the thread pool and the global pool's async()
/// functions, serial tokens, futures and their errors, and task<T> coroutines.

#include "cyan/dispatch/async.h"
#include "cyan/dispatch/errors.h"
#include "cyan/dispatch/future.h"
#include "cyan/dispatch/handler.h"
#include "cyan/dispatch/handler_thread.h"
#include "cyan/dispatch/serial_token.h"
#include "cyan/dispatch/stop_mode.h"
#include "cyan/dispatch/task.h"
#include "cyan/dispatch/thread_pool.h"
