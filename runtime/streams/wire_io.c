/* runtime/streams/wire_io.c: multipart send and receive of wire messages, with every frame checked
 * and tensor views realigned where ZeroMQ left them unaligned (see wire.h). */
#include "runtime/streams/wire.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h> /* malloc_trim */
#endif
#include <string.h>

int gb_wire_zmq_error(gb_error *err, const char *what)
{
    int e = zmq_errno();
    int code = GB_EZMQ;
    if (e == ETERM)
        code = GB_ECLOSED;
    else if (e == EINTR)
        code = GB_EINTR;
    else if (e == EAGAIN)
        code = GB_EAGAIN;
    else if (e == EHOSTUNREACH)
        code = GB_ENOTFOUND;
    return gb_error_set(err, code, "%s: %s", what, zmq_strerror(e));
}

/* ---- send and receive ------------------------------------------------------------------------ */

static int send_error(gb_error *err, int flags, const char *what)
{
    int rc = gb_wire_zmq_error(err, what);
    if (rc == GB_EAGAIN && !(flags & ZMQ_DONTWAIT))
        rc = gb_error_set(err, GB_ETIMEOUT, "%s: send timed out (peer not reading or absent)",
                          what);
    return rc;
}

static void free_payloads(const gb_wire_payload *p, int from, int n)
{
    for (int t = from; t < n; t++)
        if (!p[t].msg && p[t].free_fn)
            p[t].free_fn((void *)p[t].data, p[t].hint);
}

static int send_msg(void *sock, const void *route, size_t route_len, int delimited,
                    const gb_wire_header *h, const gb_wire_payload *payloads, int flags,
                    gb_error *err)
{
    unsigned char buf[GB_WIRE_HEADER_MAX];
    size_t len;
    int sent = 0; /* payloads handed to ZeroMQ */
    int rc = gb_wire_encode_header(h, buf, sizeof buf, &len, err);
    if (rc)
        goto fail;
    int more = h->ntensors > 0 ? ZMQ_SNDMORE : 0;
    if (route) {
        if (zmq_send(sock, route, route_len, flags | ZMQ_SNDMORE) < 0) {
            rc = send_error(err, flags, "wire send (route)");
            goto fail;
        }
        flags &= ~ZMQ_DONTWAIT; /* the rest of a multipart message is always accepted */
        if (delimited && zmq_send(sock, "", 0, flags | ZMQ_SNDMORE) < 0) {
            rc = send_error(err, flags, "wire send (delimiter)");
            goto fail;
        }
    }
    if (zmq_send(sock, buf, len, flags | more) < 0) {
        rc = send_error(err, flags, "wire send (header)");
        goto fail;
    }
    flags &= ~ZMQ_DONTWAIT;
    for (int t = 0; t < h->ntensors; t++) {
        int fl = flags | (t + 1 < h->ntensors ? ZMQ_SNDMORE : 0);
        const gb_wire_payload *p = &payloads[t];
        uint64_t bytes;
        if ((rc = gb_tensor_desc_bytes(&h->tensors[t], &bytes, err)))
            goto fail; /* cannot happen: the encoder checked the table */
        if (p->msg) {
            if (zmq_msg_size(p->msg) != bytes) {
                rc = gb_error_set(err, GB_EINVAL, "wire send: tensor '%s' message has %zu "
                                  "bytes, expected %llu", h->tensors[t].name,
                                  zmq_msg_size(p->msg), (unsigned long long)bytes);
                goto fail;
            }
            if (zmq_msg_send(p->msg, sock, fl) < 0) {
                rc = send_error(err, flags, "wire send (tensor)");
                goto fail;
            }
        } else if (p->free_fn) {
            zmq_msg_t m;
            sent = t + 1; /* from here on ZeroMQ calls free_fn, even on failure */
            if (zmq_msg_init_data(&m, (void *)p->data, (size_t)bytes, p->free_fn, p->hint)) {
                p->free_fn((void *)p->data, p->hint);
                rc = gb_wire_zmq_error(err, "wire send: zmq_msg_init_data");
                goto fail;
            }
            if (zmq_msg_send(&m, sock, fl) < 0) {
                rc = send_error(err, flags, "wire send (tensor)");
                zmq_msg_close(&m);
                goto fail;
            }
        } else if (zmq_send(sock, p->data, (size_t)bytes, fl) < 0) {
            rc = send_error(err, flags, "wire send (tensor)");
            goto fail;
        }
        sent = t + 1;
    }
    return 0;
fail:
    if (payloads)
        free_payloads(payloads, sent, h->ntensors);
    return rc;
}

int gb_wire_send(void *sock, const void *route, size_t route_len, const gb_wire_header *h,
                 const gb_wire_payload *payloads, int flags, gb_error *err)
{
    return send_msg(sock, route, route_len, 0, h, payloads, flags, err);
}

int gb_wire_reply(void *sock, const gb_wire_msg *req, const gb_wire_header *h,
                  const gb_wire_payload *payloads, int flags, gb_error *err)
{
    return send_msg(sock, req->route, req->route_len, req->delimited, h, payloads, flags, err);
}

void gb_wire_msg_init(gb_wire_msg *m)
{
    m->nframes = 0;
    m->route_len = 0;
    m->delimited = 0;
    gb_wire_msg_set_peer(m, NULL);
    m->hdr.type = 0;
    m->hdr.ntensors = 0;
}

void gb_wire_msg_release(gb_wire_msg *m)
{
    for (int i = 0; i < m->nframes; i++)
        zmq_msg_close(&m->frames[i]);
    m->nframes = 0;
}

/* Gives the memory of a refused message of `dropped` bytes back to the system. ZeroMQ holds a
 * whole multipart message before its first frame can be read (ZMQ_MAXMSGSIZE bounds a frame,
 * nothing bounds how many), so a peer decides what one message takes; once dropped, its frames
 * (most below the allocator's mmap threshold) stay in the heap as free memory still counted in
 * the process's RSS: 4 messages of 2000 frames of 60 KB kept 480 MB in the registry. Trimmed
 * only past GB_WIRE_TRIM_BYTES, so its cost stays in proportion to what the peer sent. */
static void give_back(size_t dropped)
{
#ifdef __GLIBC__
    if (dropped >= GB_WIRE_TRIM_BYTES)
        malloc_trim(0);
#else
    (void)dropped;
#endif
}

/* Releases m, refused by its receiver, giving its memory back to the system when it was large
 * (as gb_wire_recv does with what it refuses itself). m can be reused. */
void gb_wire_msg_refuse(gb_wire_msg *m)
{
    size_t bytes = 0;
    for (int i = 0; i < m->nframes; i++)
        bytes += zmq_msg_size(&m->frames[i]);
    gb_wire_msg_release(m);
    give_back(bytes);
}

static int more_parts(void *sock)
{
    int more = 0;
    size_t sz = sizeof more;
    if (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz) != 0)
        return 0;
    return more;
}

/* Reads and drops the rest of a multipart message. Returns the bytes dropped. */
static size_t drain(void *sock)
{
    zmq_msg_t m;
    size_t bytes = 0;
    zmq_msg_init(&m);
    while (more_parts(sock)) {
        if (zmq_msg_recv(&m, sock, 0) < 0)
            break;
        bytes += zmq_msg_size(&m);
    }
    zmq_msg_close(&m);
    return bytes;
}

static int recv_error(gb_error *err, int flags, const char *what)
{
    int rc = gb_wire_zmq_error(err, what);
    if (rc == GB_EAGAIN && !(flags & ZMQ_DONTWAIT))
        rc = gb_error_set(err, GB_ETIMEOUT, "%s: receive timed out", what);
    return rc;
}

static void free_block(void *data, void *hint)
{
    (void)hint;
    free(data);
}

/* Points m->data at each frame, copying the ones not aligned to their dtype (see wire.h). */
static int realign(gb_wire_msg *m, gb_error *err)
{
    size_t used = 0;
    m->realigned = 0;
    for (int t = 0; t < m->nframes; t++) {
        void *p = zmq_msg_data(&m->frames[t]);
        size_t n = zmq_msg_size(&m->frames[t]);
        size_t align = gb_dtype_size(m->hdr.tensors[t].dtype);
        m->data[t] = p;
        if (n == 0 || align <= 1 || (uintptr_t)p % align == 0)
            continue;
        m->realigned++;
        size_t at = (used + 15) & ~(size_t)15;
        if (at <= GB_WIRE_ARENA && n <= GB_WIRE_ARENA - at) {
            memcpy(m->arena + at, p, n);
            m->data[t] = m->arena + at;
            used = at + n;
            continue;
        }
        void *copy = malloc(n); /* malloc aligns for every scalar type */
        if (!copy)
            return gb_error_set(err, GB_ENOMEM, "wire receive: realigning %zu bytes", n);
        memcpy(copy, p, n);
        zmq_msg_t owned;
        if (zmq_msg_init_data(&owned, copy, n, free_block, NULL) != 0) {
            free(copy);
            return gb_wire_zmq_error(err, "wire receive: zmq_msg_init_data");
        }
        /* zmq_msg_move closes its destination itself; closing it first would leave a closed
         * message there (move then fails with EFAULT and the frame is unusable). */
        if (zmq_msg_move(&m->frames[t], &owned) != 0) {
            zmq_msg_close(&owned);
            return gb_wire_zmq_error(err, "wire receive: zmq_msg_move");
        }
        zmq_msg_close(&owned);
        m->data[t] = copy;
    }
    return 0;
}

int gb_wire_recv(void *sock, gb_wire_msg *m, int routed, int flags, gb_error *err)
{
    zmq_msg_t head;
    int rc;
    gb_wire_msg_release(m);
    m->route_len = 0;
    m->delimited = 0;
    gb_wire_msg_set_peer(m, NULL);
    m->hdr.type = 0;
    m->hdr.ntensors = 0;
    zmq_msg_init(&head);
    if (zmq_msg_recv(&head, sock, flags) < 0) {
        rc = recv_error(err, flags, "wire receive");
        zmq_msg_close(&head);
        return rc;
    }
    if (routed) {
        size_t n = zmq_msg_size(&head);
        if (n > GB_WIRE_ROUTE_MAX) /* ZeroMQ limits identities to 255 bytes; defensive */
            n = GB_WIRE_ROUTE_MAX;
        memcpy(m->route, zmq_msg_data(&head), n);
        m->route_len = n;
        if (!zmq_msg_more(&head)) {
            zmq_msg_close(&head);
            return gb_error_set(err, GB_EPROTO, "wire message: only a routing frame");
        }
        if (zmq_msg_recv(&head, sock, 0) < 0) {
            rc = recv_error(err, 0, "wire receive");
            zmq_msg_close(&head);
            return rc;
        }
        if (zmq_msg_size(&head) == 0 && zmq_msg_more(&head)) { /* a REQ peer's envelope */
            m->delimited = 1;
            if (zmq_msg_recv(&head, sock, 0) < 0) {
                rc = recv_error(err, 0, "wire receive");
                zmq_msg_close(&head);
                return rc;
            }
        }
    }
    int more = zmq_msg_more(&head);
    gb_wire_msg_set_peer(m, zmq_msg_gets(&head, "User-Id"));
    rc = gb_wire_decode_header(zmq_msg_data(&head), zmq_msg_size(&head), &m->hdr, err);
    zmq_msg_close(&head);
    if (rc) {
        if (more)
            give_back(drain(sock));
        return rc;
    }
    size_t lens[GB_WIRE_MAX_TENSORS], dropped = 0;
    while (more) {
        if (m->nframes == GB_WIRE_MAX_TENSORS) {
            dropped = drain(sock);
            rc = gb_error_set(err, GB_EPROTO, "wire message (%s from %s %d): more than %d "
                              "tensor frames", gb_msg_type_name(m->hdr.type),
                              gb_role_name(m->hdr.role), m->hdr.index, GB_WIRE_MAX_TENSORS);
            goto fail;
        }
        zmq_msg_t *f = &m->frames[m->nframes];
        zmq_msg_init(f);
        if (zmq_msg_recv(f, sock, 0) < 0) {
            rc = recv_error(err, 0, "wire receive (tensor frame)");
            zmq_msg_close(f);
            goto fail;
        }
        lens[m->nframes] = zmq_msg_size(f);
        more = zmq_msg_more(f);
        m->nframes++;
    }
    if ((rc = gb_wire_check_frames(&m->hdr, lens, m->nframes, err)))
        goto fail;
    if ((rc = realign(m, err)))
        goto fail;
    return 0;
fail:
    for (int i = 0; i < m->nframes; i++)
        dropped += zmq_msg_size(&m->frames[i]);
    gb_wire_msg_release(m);
    give_back(dropped);
    return rc;
}

gb_tensor_view gb_wire_msg_tensor(const gb_wire_msg *m, int i)
{
    gb_tensor_view v = {&m->hdr.tensors[i], m->data[i],
                        zmq_msg_size((zmq_msg_t *)&m->frames[i])};
    return v;
}

int gb_wire_msg_find(const gb_wire_msg *m, const char *name)
{
    for (int i = 0; i < m->hdr.ntensors; i++)
        if (strcmp(m->hdr.tensors[i].name, name) == 0)
            return i;
    return -1;
}

int gb_wire_msg_text(const gb_wire_msg *m, const char *name, char *out, size_t cap,
                     int allow_empty, gb_error *err)
{
    int t = gb_wire_msg_find(m, name);
    if (t < 0)
        return gb_error_set(err, GB_EPROTO, "tensor '%s': missing", name);
    gb_tensor_view v = gb_wire_msg_tensor(m, t);
    if (v.desc->dtype != GB_DTYPE_UINT8 || v.desc->rank != 1 || v.bytes >= cap ||
        (!allow_empty && v.bytes == 0))
        return gb_error_set(err, GB_EPROTO, "tensor '%s': not a uint8 string of %s..%zu bytes",
                            name, allow_empty ? "0" : "1", cap - 1);
    const unsigned char *p = v.data;
    for (size_t i = 0; i < v.bytes; i++)
        if (p[i] < 0x20 || p[i] == 0x7f)
            return gb_error_set(err, GB_EPROTO, "tensor '%s': a control character", name);
    memcpy(out, p, v.bytes);
    out[v.bytes] = '\0';
    return 0;
}

int gb_wire_set_max_frame(void *sock, uint64_t largest_frame, gb_error *err)
{
    int64_t max = largest_frame > (uint64_t)INT64_MAX - GB_WIRE_HEADER_SLACK
                      ? -1 /* no bound can be that large: none */
                      : (int64_t)(largest_frame + GB_WIRE_HEADER_SLACK);
    if (zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &max, sizeof max) != 0)
        return gb_wire_zmq_error(err, "ZMQ_MAXMSGSIZE");
    return 0;
}

/* The index of an identity as %d prints it: an optional '-', then digits with no leading 0
 * ("0" alone), within int. Returns 1 and sets *out, else 0 ("03", "-0", "+3", "3x", ""). */
static int read_index(const char *p, int *out)
{
    int neg = *p == '-';
    p += neg;
    if (*p < '0' || *p > '9' || (*p == '0' && (p[1] || neg)))
        return 0;
    long long v = 0;
    for (; *p >= '0' && *p <= '9'; p++)
        if ((v = v * 10 + (*p - '0')) > (long long)INT_MAX + 1)
            return 0;
    if (*p || (!neg && v > INT_MAX))
        return 0;
    *out = (int)(neg ? -v : v);
    return 1;
}

void gb_wire_msg_set_peer(gb_wire_msg *m, const char *user)
{
    size_t n = user ? strnlen(user, sizeof m->peer - 1) : 0;
    if (n)
        memcpy(m->peer, user, n);
    m->peer[n] = '\0';
    m->peer_role = -1;
    m->peer_index = 0;
    const char *slash = n ? memchr(m->peer, '/', n) : NULL;
    if (!slash)
        return;
    size_t len = (size_t)(slash - m->peer);
    for (int r = 0; r < GB_ROLE_END; r++) {
        const char *name = gb_role_name(r);
        if (strlen(name) == len && memcmp(name, m->peer, len) == 0) {
            if (read_index(slash + 1, &m->peer_index))
                m->peer_role = r;
            return;
        }
    }
}

int gb_wire_peer_is(const gb_wire_msg *m, int role, int index)
{
    return !m->peer[0] || (m->peer_role >= 0 && m->peer_role == role && m->peer_index == index);
}
