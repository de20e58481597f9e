/* workers/server/server_clients.c: the replies each client has not taken yet, so that a client
 * that sends requests without reading the replies is refused rather than allowed to fill the
 * server's memory (server.max_pending_replies). */
#include "workers/server/server_internal.h"

#include <stdlib.h>
#include <string.h>

/* A client with sample replies still held by ZeroMQ (queued for it, not yet written to its
 * connection). Only such clients have an entry: the last reply's release frees it, so the
 * list is never longer than the reply buffers out. */
struct srv_client {
    srv_client *next;
    int pending; /* reply buffers out for this client; guarded by the server's client_mu */
    size_t route_len;
    unsigned char route[GB_WIRE_ROUTE_MAX];
};

static srv_client *find(gb_server *s, const unsigned char *route, size_t len)
{
    for (srv_client *c = s->clients; c; c = c->next)
        if (c->route_len == len && memcmp(c->route, route, len) == 0)
            return c;
    return NULL;
}

/* Whether the client that sent m may be given one more sample reply: 1 while it holds fewer
 * than server.max_pending_replies, 0 when it is over (the caller refuses the request and
 * counts it). Never blocks for long (the client list's lock). */
int gb_server_client_may_send(gb_server *s, const gb_wire_msg *m)
{
    pthread_mutex_lock(&s->client_mu);
    const srv_client *c = find(s, m->route, m->route_len);
    int ok = !c || c->pending < s->o.max_pending_replies;
    pthread_mutex_unlock(&s->client_mu);
    return ok;
}

/* Counts one reply buffer out for the client that sent m. Returns its entry, to be handed to
 * gb_server_client_release when ZeroMQ gives the buffer back, or NULL when out of memory (the
 * reply then goes uncounted: the limit is lost for it, never the reply). */
srv_client *gb_server_client_hold(gb_server *s, const gb_wire_msg *m)
{
    pthread_mutex_lock(&s->client_mu);
    srv_client *c = find(s, m->route, m->route_len);
    if (!c && (c = calloc(1, sizeof *c))) {
        c->route_len = m->route_len;
        memcpy(c->route, m->route, m->route_len);
        c->next = s->clients;
        s->clients = c;
    }
    if (c)
        c->pending++;
    pthread_mutex_unlock(&s->client_mu);
    return c;
}

/* One of c's reply buffers is back from ZeroMQ (sent, or dropped with its connection); the
 * entry is freed with its last. Called from ZeroMQ's I/O thread; never blocks for long. */
void gb_server_client_release(gb_server *s, srv_client *c)
{
    pthread_mutex_lock(&s->client_mu);
    if (--c->pending == 0) {
        srv_client **pp = &s->clients;
        while (*pp != c)
            pp = &(*pp)->next;
        *pp = c->next;
        free(c);
    }
    pthread_mutex_unlock(&s->client_mu);
}

/* Clients with replies out now (for the statistics). */
int gb_server_clients_waiting(gb_server *s)
{
    int n = 0;
    pthread_mutex_lock(&s->client_mu);
    for (const srv_client *c = s->clients; c; c = c->next)
        n++;
    pthread_mutex_unlock(&s->client_mu);
    return n;
}
