#pragma once

/// Umbrella header for cyan::lockfree.
#include "cyan/lockfree/queue.h"
#include "cyan/lockfree/segmented_queue.h"
#include "cyan/lockfree/spsc_queue.h"
#include "cyan/lockfree/spsc_ring.h"
#include "cyan/lockfree/stack.h"
