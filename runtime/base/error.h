/* runtime/base/error.h: gearbox's error codes and the message buffer every fallible call fills.
 * defines: gb_error, GB_E* codes, gb_error_set, gb_error_prefix, gb_strerror */
#ifndef GB_RUNTIME_ERROR_H
#define GB_RUNTIME_ERROR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Library functions return 0 on success or one of these (negative) codes, and fill a gb_error
 * with a message the caller can print. Only main() decides to exit. */
enum {
    GB_OK = 0,
    GB_EINVAL = -1,      /* invalid argument or value */
    GB_ENOMEM = -2,      /* allocation failed */
    GB_EIO = -3,         /* file or device I/O failed */
    GB_ECONFIG = -4,     /* configuration error (file:line:column: key: ...) */
    GB_ETIMEOUT = -5,    /* a blocking call ran out of time */
    GB_EPROTO = -6,      /* malformed or unexpected message from a peer */
    GB_ESYS = -7,        /* a system call failed (errno in the message) */
    GB_ECUDA = -8,       /* a CUDA call or launch failed */
    GB_ETORCH = -9,      /* libtorch raised an exception */
    GB_ECLOSED = -10,    /* the other side or the object is closed */
    GB_EFULL = -11,      /* no room (replay full, queue full) */
    GB_EAGAIN = -12,     /* nothing available now; try again */
    GB_ENOTFOUND = -13,  /* no such name, key, file or symbol */
    GB_EUNSUPPORTED = -14, /* feature not built or not available here */
    GB_ECORRUPT = -15,   /* stored data failed its checks (CRC, magic, sizes) */
    GB_EZMQ = -16,       /* a ZeroMQ call failed */
    GB_EINTR = -17,      /* interrupted by a stop request or signal */
};

#define GB_ERROR_MSG_MAX 1024

typedef struct gb_error {
    int code;                   /* last code set, 0 when none */
    char msg[GB_ERROR_MSG_MAX]; /* human-readable message, NUL-terminated */
} gb_error;

/* Records code and a printf-style message in err (which may be NULL) and returns code, so that
 * `return gb_error_set(err, GB_EINVAL, "...")` is the usual way to fail. */
int gb_error_set(gb_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Like gb_error_set, with ": strerror(errno)" appended; returns GB_ESYS. */
int gb_error_errno(gb_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prepends "prefix: " to the message already in err (context added on the way up); returns
 * err->code. */
int gb_error_prefix(gb_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clears err. */
void gb_error_clear(gb_error *err);

/* The short name of a code ("timeout", "config", ...); never NULL. */
const char *gb_strerror(int code);

#ifdef __cplusplus
}
#endif

#endif
