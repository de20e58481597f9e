/* runtime/streams/endpoint.c: the addresses workers bind and publish: ipc:// paths in the run's
 * socket folder, tcp:// on a configured interface (see endpoint.h). */
#include "runtime/streams/endpoint.h"
#include "runtime/base/file.h"
#include "runtime/base/shm.h"

#include <arpa/inet.h>
#include <dirent.h>
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

/* The sun_path of a Unix socket holds 108 bytes with the NUL; a socket folder is short enough
 * when this much is left for the longest name a run binds ("relay-1000-params-fetch", 23). */
#define IPC_PATH_MAX 107
#define IPC_NAME_ROOM 40

/* The folder of short socket folders, /tmp/gearbox-sockets-<uid>: created 0700 and checked to be
 * this user's own folder (not a link another user planted). */
static int short_root(char *out, size_t cap, gb_error *err)
{
    int n = snprintf(out, cap, "/tmp/gearbox-sockets-%u", (unsigned)getuid());
    if (n < 0 || (size_t)n >= cap)
        return gb_error_set(err, GB_EINVAL, "endpoint buffer too small");
    return gb_user_dir(out, 1, err);
}

int gb_endpoint_ipc_dir(const char *run_dir, char *out, size_t cap, gb_error *err)
{
    char in_run[GB_ENDPOINT_IPC_DIR_MAX], id[GB_SHM_RUN_ID_LEN + 1], root[64];
    int n = snprintf(in_run, sizeof in_run, "%s/sockets", run_dir);
    if (n < 0 || (size_t)n >= sizeof in_run)
        return gb_error_set(err, GB_EINVAL, "run directory path too long");
    if (n + 1 + IPC_NAME_ROOM <= IPC_PATH_MAX) {
        if ((size_t)n >= cap)
            return gb_error_set(err, GB_EINVAL, "endpoint buffer too small");
        memcpy(out, in_run, (size_t)n + 1);
        if (mkdir(out, 0700) != 0 && errno != EEXIST)
            return gb_error_errno(err, "mkdir %s", out);
        return 0;
    }
    int rc = gb_shm_run_id(run_dir, id, err);
    if (rc == 0)
        rc = short_root(root, sizeof root, err);
    if (rc)
        return rc;
    n = snprintf(out, cap, "%s/%s", root, id);
    if (n < 0 || (size_t)n >= cap)
        return gb_error_set(err, GB_EINVAL, "endpoint buffer too small");
    if (mkdir(out, 0700) != 0 && errno != EEXIST)
        return gb_error_errno(err, "mkdir %s", out);
    /* for people looking in the run's folder; the workers do not need it */
    if (symlink(out, in_run) != 0 && errno != EEXIST)
        return gb_error_errno(err, "symlink %s", in_run);
    return 0;
}

/* Unlinks the socket files in dir (nothing else), then the folder once empty; returns how many. */
static int remove_socket_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int removed = 0;
    struct dirent *e;
    char p[GB_ENDPOINT_IPC_DIR_MAX + 300];
    while ((e = readdir(d))) {
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (lstat(p, &st) == 0 && S_ISSOCK(st.st_mode) && unlink(p) == 0)
            removed++;
    }
    closedir(d);
    rmdir(dir); /* fails, harmlessly, when something else is in it */
    return removed;
}

int gb_endpoint_ipc_remove(const char *run_dir, const char *run_id)
{
    char dir[GB_ENDPOINT_IPC_DIR_MAX], root[64];
    struct stat st;
    int removed = 0;
    if (run_dir && snprintf(dir, sizeof dir, "%s/sockets", run_dir) < (int)sizeof dir &&
        lstat(dir, &st) == 0) {
        if (S_ISLNK(st.st_mode))
            unlink(dir); /* its target is found by the id, not by following what the link says */
        else if (S_ISDIR(st.st_mode))
            removed += remove_socket_files(dir);
    }
    gb_error err;
    if (run_id && strlen(run_id) == GB_SHM_RUN_ID_LEN &&
        strspn(run_id, "0123456789abcdef") == GB_SHM_RUN_ID_LEN &&
        short_root(root, sizeof root, &err) == 0) {
        snprintf(dir, sizeof dir, "%s/%s", root, run_id);
        removed += remove_socket_files(dir);
    }
    return removed;
}

int gb_endpoint_make(char *out, size_t cap, int transport, const char *run_dir,
                     const char *interface, const char *name, gb_error *err)
{
    int n;
    if (transport == 0) {
        char dir[GB_ENDPOINT_IPC_DIR_MAX];
        int rc = gb_endpoint_ipc_dir(run_dir, dir, sizeof dir, err);
        if (rc)
            return rc;
        n = snprintf(out, cap, "ipc://%s/", dir);
        if (n < 0 || (size_t)n >= cap)
            return gb_error_set(err, GB_EINVAL, "endpoint buffer too small");
        size_t k = (size_t)n;
        for (const char *p = name; *p && k + 1 < cap; p++)
            out[k++] = *p == '/' ? '-' : *p;
        out[k] = '\0';
        if (k - 6 > IPC_PATH_MAX)
            return gb_error_set(err, GB_EINVAL, "ipc socket path '%s' exceeds the 107-byte limit "
                                "of Unix sockets", out + 6);
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
