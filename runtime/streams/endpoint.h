/* runtime/streams/endpoint.h: the address a worker binds for one of its sockets, and the address
 * peers connect to. On one machine endpoints are ipc:// sockets in the run directory; across
 * machines
 * tcp:// on the address or interface the config names (streams.interface). Nothing binds to all
 * interfaces unless that option is "*". Workers publish these through the registry
 * (runtime/streams/registry.h).
 * defines: gb_endpoint_make, gb_endpoint_connectable, gb_endpoint_tcp_split */
#ifndef GB_RUNTIME_ENDPOINT_H
#define GB_RUNTIME_ENDPOINT_H

#include "runtime/base/error.h"

#include <stddef.h>

/* Writes the address to bind for a named socket of this worker:
 *   transport 0 (ipc): "ipc://<run_dir>/sockets/<name with '/' as '-'>" (creates the folder;
 *                       GB_EINVAL when the path exceeds the 107-byte socket path limit);
 *   transport 1 (tcp): "tcp://<address>:*" where interface is an IPv4 address, an interface name
 *                       (its first IPv4 address), or "*" (all interfaces, only when asked).
 * Returns 0, GB_EINVAL, GB_ENOTFOUND (no such interface), GB_ESYS. */
int gb_endpoint_make(char *out, size_t cap, int transport, const char *run_dir,
                     const char *interface, const char *name, gb_error *err);

/* Turns a bound endpoint (ZMQ_LAST_ENDPOINT) into one peers can connect to: a wildcard address
 * "tcp://0.0.0.0:P" becomes "tcp://<hostname>:P"; others are copied. Returns 0 or GB_EINVAL. */
int gb_endpoint_connectable(const char *bound, char *out, size_t cap, gb_error *err);

/* "tcp://HOST:PORT" into host (cap bytes, NUL-terminated) and *port (0..65535); nothing is
 * written unless it parses. Returns 0 or -1. */
int gb_endpoint_tcp_split(const char *ep, char *host, size_t cap, int *port);

#endif
