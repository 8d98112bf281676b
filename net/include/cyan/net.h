#pragma once

/// Everything of cyan::net: endpoint, resolve(), tcp_listener and tcp_socket (TCP and
/// Unix-domain stream sockets), udp_socket, their error codes and the backend choice.

#include "cyan/net/backend.h"
#include "cyan/net/endpoint.h"
#include "cyan/net/error.h"
#include "cyan/net/resolve.h"
#include "cyan/net/tcp.h"
#include "cyan/net/tcp_server.h"
#include "cyan/net/tls.h"
#include "cyan/net/udp.h"
