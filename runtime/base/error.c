/* runtime/base/error.c: error codes and messages (see error.h). */
#include "runtime/base/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int gb_error_set(gb_error *err, int code, const char *fmt, ...)
{
    if (!err)
        return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->code = code;
    return code;
}

int gb_error_errno(gb_error *err, const char *fmt, ...)
{
    int saved = errno;
    if (!err)
        return GB_ESYS;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if ((size_t)n < sizeof err->msg)
        snprintf(err->msg + n, sizeof err->msg - (size_t)n, ": %s", strerror(saved));
    err->code = GB_ESYS;
    return GB_ESYS;
}

int gb_error_prefix(gb_error *err, const char *fmt, ...)
{
    if (!err)
        return GB_EINVAL;
    char prefix[GB_ERROR_MSG_MAX];
    char old[GB_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    /* Truncation is intended: the message is cut at the buffer's end. */
    size_t n = strnlen(prefix, sizeof prefix - 1);
    memcpy(err->msg, prefix, n);
    if (n + 2 < sizeof err->msg) {
        err->msg[n++] = ':';
        err->msg[n++] = ' ';
    }
    size_t rest = sizeof err->msg - 1 - n;
    size_t m = strnlen(old, rest);
    memcpy(err->msg + n, old, m);
    err->msg[n + m] = '\0';
    return err->code;
}

void gb_error_clear(gb_error *err)
{
    if (!err)
        return;
    err->code = 0;
    err->msg[0] = '\0';
}

const char *gb_strerror(int code)
{
    switch (code) {
    case GB_OK: return "ok";
    case GB_EINVAL: return "invalid argument";
    case GB_ENOMEM: return "out of memory";
    case GB_EIO: return "I/O error";
    case GB_ECONFIG: return "config error";
    case GB_ETIMEOUT: return "timeout";
    case GB_EPROTO: return "protocol error";
    case GB_ESYS: return "system error";
    case GB_ECUDA: return "CUDA error";
    case GB_ETORCH: return "libtorch error";
    case GB_ECLOSED: return "closed";
    case GB_EFULL: return "full";
    case GB_EAGAIN: return "try again";
    case GB_ENOTFOUND: return "not found";
    case GB_EUNSUPPORTED: return "unsupported";
    case GB_ECORRUPT: return "corrupt data";
    case GB_EZMQ: return "ZeroMQ error";
    case GB_EINTR: return "interrupted";
    default: return "unknown error";
    }
}
