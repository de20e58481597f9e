/* runtime/streams/endpoint.h: the address a worker binds for one of its sockets, and the address
 * peers connect to. On one machine endpoints are ipc:// sockets in the run's socket folder;
 * across machines tcp:// on the address or interface the config names (streams.interface).
 * Nothing binds to all interfaces unless that option is "*". Workers publish these through the
 * registry (runtime/streams/registry.h).
 * defines: gb_endpoint_make, gb_endpoint_ipc_dir, gb_endpoint_ipc_remove,
 *          gb_endpoint_connectable, gb_endpoint_tcp_split */
#ifndef GB_RUNTIME_ENDPOINT_H
#define GB_RUNTIME_ENDPOINT_H

#include "runtime/base/error.h"

#include <stddef.h>

#define GB_ENDPOINT_IPC_DIR_MAX 1100

/* The folder of a run's ipc sockets, created: <run_dir>/sockets where a socket path in it fits
 * the 107 bytes of a Unix socket's address; else (a deep run folder) a short one named after the
 * run's id (gb_shm_run_id), /tmp/gearbox-sockets-<uid>/<id> (the parent 0700, checked to be
 * this user's), and <run_dir>/sockets a symbolic link to it. Every process of the run gets the
 * same folder. Returns 0, GB_EINVAL (a path too long, a parent that is not this user's private
 * folder), GB_ENOTFOUND (no run_dir) or GB_ESYS. */
int gb_endpoint_ipc_dir(const char *run_dir, char *out, size_t cap, gb_error *err);

/* Removes a run's socket files (nothing else) and its socket folder: <run_dir>/sockets (a link
 * to the short folder is unlinked, not followed) and the short folder of run_id. Either may be
 * NULL (a dead run whose folder is gone: run_dir NULL). Returns how many socket files went. */
int gb_endpoint_ipc_remove(const char *run_dir, const char *run_id);

/* Writes the address to bind for a named socket of this worker:
 *   transport 0 (ipc): "ipc://<socket folder>/<name with '/' as '-'>" (gb_endpoint_ipc_dir;
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
