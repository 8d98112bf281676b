#include "cyan/net/endpoint.h"
