#include "cyan/net/resolve.h"
