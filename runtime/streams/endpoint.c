/* runtime/streams/endpoint.c: the addresses workers bind and publish: ipc:// paths in the run
 * directory,
 * tcp:// on a configured interface (see endpoint.h). */
#include "runtime/streams/endpoint.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int ipv4_of_interface(const char *ifname, char *out, size_t cap, gb_error *err)
{
    struct ifaddrs *ifs;
    if (getifaddrs(&ifs) != 0)
        return gb_error_errno(err, "getifaddrs");
    int rc = gb_error_set(err, GB_ENOTFOUND, "streams.interface '%s': no such interface with an "
                          "IPv4 address", ifname);
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && strcmp(i->ifa_name, ifname) == 0) {
            const struct sockaddr_in *sa = (const struct sockaddr_in *)i->ifa_addr;
            if (inet_ntop(AF_INET, &sa->sin_addr, out, (socklen_t)cap))
                rc = 0;
            break;
        }
    freeifaddrs(ifs);
    return rc;
}

int gb_endpoint_make(char *out, size_t cap, int transport, const char *run_dir,
                     const char *interface, const char *name, gb_error *err)
{
    int n;
    if (transport == 0) {
        char dir[512];
        n = snprintf(dir, sizeof dir, "%s/sockets", run_dir);
        if (n < 0 || (size_t)n >= sizeof dir)
            return gb_error_set(err, GB_EINVAL, "run directory path too long");
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            return gb_error_errno(err, "mkdir %s", dir);
        n = snprintf(out, cap, "ipc://%s/", dir);
        if (n < 0 || (size_t)n >= cap)
            return gb_error_set(err, GB_EINVAL, "endpoint buffer too small");
        size_t k = (size_t)n;
        for (const char *p = name; *p && k + 1 < cap; p++)
            out[k++] = *p == '/' ? '-' : *p;
        out[k] = '\0';
        if (k - 6 > 107) /* sun_path holds 108 bytes with the NUL */
            return gb_error_set(err, GB_EINVAL, "ipc socket path '%s' exceeds the 107-byte limit "
                                "of Unix sockets; use a shorter run directory", out + 6);
        return 0;
    }
    if (transport != 1)
        return gb_error_set(err, GB_EINVAL, "unknown transport %d", transport);
    char addr[INET_ADDRSTRLEN];
    struct in_addr tmp;
    if (!interface || !*interface)
        return gb_error_set(err, GB_EINVAL, "streams.interface: empty");
    if (strcmp(interface, "*") == 0 || inet_pton(AF_INET, interface, &tmp) == 1) {
        snprintf(addr, sizeof addr, "%s", interface);
    } else {
        int rc = ipv4_of_interface(interface, addr, sizeof addr, err);
        if (rc)
            return rc;
    }
    n = snprintf(out, cap, "tcp://%s:*", addr);
    if (n < 0 || (size_t)n >= cap)
        return gb_error_set(err, GB_EINVAL, "endpoint buffer too small");
    return 0;
}

int gb_endpoint_connectable(const char *bound, char *out, size_t cap, gb_error *err)
{
    const char *wild = "tcp://0.0.0.0:";
    int n;
    if (strncmp(bound, wild, strlen(wild)) == 0) {
        char host[256];
        if (gethostname(host, sizeof host) != 0)
            return gb_error_errno(err, "gethostname");
        host[sizeof host - 1] = '\0';
        n = snprintf(out, cap, "tcp://%s:%s", host, bound + strlen(wild));
    } else {
        n = snprintf(out, cap, "%s", bound);
    }
    if (n < 0 || (size_t)n >= cap)
        return gb_error_set(err, GB_EINVAL, "endpoint '%s' too long", bound);
    return 0;
}

int gb_endpoint_tcp_split(const char *ep, char *host, size_t cap, int *port)
{
    const char *h = strncmp(ep, "tcp://", 6) == 0 ? ep + 6 : NULL;
    const char *colon = h ? strrchr(h, ':') : NULL;
    char *end = NULL;
    long p = colon && colon[1] ? strtol(colon + 1, &end, 10) : -1;
    if (p < 0 || p > 65535 || *end || colon == h || (size_t)(colon - h) >= cap)
        return -1; /* p < 0: no colon, or nothing after it */
    memcpy(host, h, (size_t)(colon - h));
    host[colon - h] = '\0';
    *port = (int)p;
    return 0;
}
