#pragma once

/// Everything of cyan::fs: file (open, read_at, write_at, sync, size, close) and open_mode.

#include "cyan/fs/file.h"
