#pragma once

/// Umbrella header for cyan::event.
#include "cyan/event/async.h"
#include "cyan/event/idle.h"
#include "cyan/event/io.h"
#include "cyan/event/loop.h"
#include "cyan/event/signal.h"
#include "cyan/event/signal_set.h"
#include "cyan/event/timer.h"
#include "cyan/event/timer_wheel.h"
