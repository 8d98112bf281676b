#pragma once

/// Umbrella header for cyan::common.
#include "cyan/common/cache_line.h"
#include "cyan/common/noncopyable.h"
#include "cyan/common/thread.h"
#include "cyan/common/unique_function.h"
#include "cyan/common/version.h"
