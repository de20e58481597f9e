/* runtime/streams/curve_keys.c: CURVE key files, a run's keys and its workers' identities, and
 * the attach helpers that read them (see curve.h). */
#include "runtime/streams/curve.h"

#include "runtime/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

/* ---- key files ---- */

int gb_curve_keypair_save(const char *path, const char *public_key, const char *secret,
                          gb_error *err)
{
    if (!gb_curve_key_valid(public_key) || !gb_curve_key_valid(secret))
        return gb_error_set(err, GB_EINVAL, "key file %s: a malformed key", path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return gb_error_errno(err, "create key file %s", path);
    char text[256];
    int n = snprintf(text, sizeof text,
                     "# gearbox CURVE key pair (ZeroMQ Z85); the secret key stays in this file\n"
                     "public %s\nsecret %s\n", public_key, secret);
    ssize_t w = n > 0 && (size_t)n < sizeof text ? write(fd, text, (size_t)n) : -1;
    int rc = (w != n || fsync(fd) != 0) ? gb_error_errno(err, "write key file %s", path) : 0;
    explicit_bzero(text, sizeof text);
    if (close(fd) != 0 && rc == 0)
        rc = gb_error_errno(err, "close key file %s", path);
    if (rc)
        unlink(path);
    return rc;
}

int gb_curve_keypair_write(const char *path, char *public_out, gb_error *err)
{
    char pub[GB_CURVE_KEY_Z85], sec[GB_CURVE_KEY_Z85];
    if (!gb_curve_available())
        return gb_error_set(err, GB_EUNSUPPORTED, "this libzmq has no CURVE (built without "
                            "libsodium): authenticated tcp is not available");
    if (zmq_curve_keypair(pub, sec) != 0)
        return gb_error_set(err, GB_EUNSUPPORTED, "zmq_curve_keypair: %s",
                            zmq_strerror(zmq_errno()));
    int rc = gb_curve_keypair_save(path, pub, sec, err);
    explicit_bzero(sec, sizeof sec);
    if (rc == 0 && public_out)
        memcpy(public_out, pub, sizeof pub);
    return rc;
}

/* Copies the key of a "<word> <Z85>" line into out when the word matches; 1 when it did. */
static int key_line(const char *line, const char *word, char *out)
{
    size_t k = strlen(word);
    if (strncmp(line, word, k) != 0 || (line[k] != ' ' && line[k] != '\t'))
        return 0;
    line += k;
    while (*line == ' ' || *line == '\t')
        line++;
    size_t n = strcspn(line, " \t\r\n");
    if (n >= GB_CURVE_KEY_Z85)
        n = GB_CURVE_KEY_Z85 - 1;
    memcpy(out, line, n);
    out[n] = '\0';
    return 1;
}

int gb_curve_keypair_read(const char *path, char *public_key, char *secret, gb_error *err)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return errno == ENOENT ? gb_error_set(err, GB_ENOTFOUND, "key file %s: not found", path)
                               : gb_error_errno(err, "open key file %s", path);
    char line[256], pub[GB_CURVE_KEY_Z85] = "", sec[GB_CURVE_KEY_Z85] = "";
    int rc = 0, lineno = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n' || line[0] == '\0')
            continue;
        char *dst = key_line(line, "public", pub) ? pub : key_line(line, "secret", sec) ? sec : 0;
        if (!dst || !gb_curve_key_valid(dst))
            rc = gb_error_set(err, GB_EINVAL, "key file %s:%d: expected \"public <Z85 key>\" or "
                              "\"secret <Z85 key>\" (40 characters)", path, lineno);
    }
    struct stat st;
    if (rc == 0 && fstat(fileno(f), &st) != 0)
        rc = gb_error_errno(err, "stat %s", path);
    fclose(f);
    explicit_bzero(line, sizeof line);
    if (rc == 0 && !pub[0])
        rc = gb_error_set(err, GB_EINVAL, "key file %s: no public key", path);
    if (rc == 0 && secret && !sec[0])
        rc = gb_error_set(err, GB_EINVAL, "key file %s: no secret key", path);
    if (rc == 0 && secret && sec[0] && (st.st_mode & 077))
        rc = gb_error_set(err, GB_EINVAL, "key file %s holds a secret key but is readable by "
                          "others (mode %03o): chmod 600 it", path, (unsigned)(st.st_mode & 0777));
    if (rc == 0) {
        memcpy(public_key, pub, sizeof pub);
        if (secret)
            memcpy(secret, sec, sizeof sec);
    }
    explicit_bzero(sec, sizeof sec);
    return rc;
}

int gb_curve_run_keys_create(const char *run_dir, gb_error *err)
{
    char dir[1024], path[1100];
    int n = snprintf(dir, sizeof dir, "%s/%s", run_dir, GB_CURVE_KEYS_DIR);
    if (n < 0 || (size_t)n >= sizeof dir)
        return gb_error_set(err, GB_EINVAL, "run directory path too long");
    if (mkdir(dir, 0700) != 0)
        return gb_error_errno(err, "mkdir %s", dir);
    snprintf(path, sizeof path, "%s/server.key", dir);
    int rc = gb_curve_keypair_write(path, NULL, err);
    if (rc == 0) {
        snprintf(path, sizeof path, "%s/client.key", dir);
        rc = gb_curve_keypair_write(path, NULL, err);
    }
    return rc;
}

int gb_curve_run_keys_load(const char *keys_dir, gb_curve_keys *keys, gb_error *err)
{
    char path[1100];
    memset(keys, 0, sizeof *keys);
    snprintf(path, sizeof path, "%s/server.key", keys_dir);
    int rc = gb_curve_keypair_read(path, keys->server_public, keys->server_secret, err);
    if (rc == 0) {
        snprintf(path, sizeof path, "%s/client.key", keys_dir);
        rc = gb_curve_keypair_read(path, keys->client_public, keys->client_secret, err);
    }
    if (rc)
        explicit_bzero(keys, sizeof *keys);
    return rc;
}

int gb_curve_allow_list_read(const char *path, char (*keys)[GB_CURVE_KEY_Z85], int cap, int *n,
                             gb_error *err)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return errno == ENOENT ? gb_error_set(err, GB_ENOTFOUND, "allow-list %s: not found", path)
                               : gb_error_errno(err, "open allow-list %s", path);
    char line[256], key[GB_CURVE_KEY_Z85];
    int rc = 0, lineno = 0;
    *n = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '#' || *p == '\n' || *p == '\r' || *p == '\0' || key_line(p, "secret", key))
            continue;
        if (!key_line(p, "public", key)) {
            size_t k = strcspn(p, " \t\r\n");
            if (k >= GB_CURVE_KEY_Z85)
                k = GB_CURVE_KEY_Z85 - 1;
            memcpy(key, p, k);
            key[k] = '\0';
        }
        if (!gb_curve_key_valid(key))
            rc = gb_error_set(err, GB_EINVAL, "allow-list %s:%d: not a Z85 public key "
                              "(40 characters)", path, lineno);
        else if (*n >= cap)
            rc = gb_error_set(err, GB_EFULL, "allow-list %s: more than %d keys", path, cap);
        else
            memcpy(keys[(*n)++], key, sizeof key);
    }
    explicit_bzero(line, sizeof line);
    fclose(f);
    return rc;
}

int gb_curve_run_attach(gb_curve **out, void *zctx, const char *keys_dir, gb_error *err)
{
    gb_curve_keys keys;
    *out = NULL;
    int rc = gb_curve_run_keys_load(keys_dir, &keys, err);
    if (rc == 0) {
        const char *allowed[1] = {keys.client_public};
        gb_curve_opts o = {.keys = &keys, .allowed = allowed, .nallowed = 1};
        rc = gb_curve_attach(out, zctx, &o, err);
    }
    explicit_bzero(&keys, sizeof keys);
    return rc;
}

int gb_curve_server_attach(gb_curve **out, void *zctx, const char *key_file,
                           const char *allow_file, char *public_out, gb_error *err)
{
    gb_curve_keys keys = {0};
    char (*allowed)[GB_CURVE_KEY_Z85] = NULL;
    const char **ptrs = NULL;
    int n = 0;
    *out = NULL;
    int rc = gb_curve_keypair_read(key_file, keys.server_public, keys.server_secret, err);
    if (rc == GB_ENOTFOUND) {
        rc = gb_curve_keypair_write(key_file, NULL, err);
        if (rc == 0) {
            GB_INFO("created the server key pair %s (mode 0600)", key_file);
            rc = gb_curve_keypair_read(key_file, keys.server_public, keys.server_secret, err);
        }
    }
    if (rc == 0 && allow_file && allow_file[0]) {
        allowed = calloc(GB_CURVE_MAX_ALLOWED, sizeof *allowed);
        ptrs = calloc(GB_CURVE_MAX_ALLOWED, sizeof *ptrs);
        rc = allowed && ptrs ? gb_curve_allow_list_read(allow_file, allowed,
                                                        GB_CURVE_MAX_ALLOWED, &n, err)
                             : gb_error_set(err, GB_ENOMEM, "CURVE: out of memory");
        if (rc == 0 && n == 0)
            rc = gb_error_set(err, GB_EINVAL, "allow-list %s: no key", allow_file);
        for (int i = 0; rc == 0 && i < n; i++)
            ptrs[i] = allowed[i];
    }
    if (rc == 0) {
        gb_curve_opts o = {.keys = &keys, .allowed = ptrs, .nallowed = n, .allow_any = n == 0};
        rc = gb_curve_attach(out, zctx, &o, err);
    }
    if (rc == 0 && public_out)
        memcpy(public_out, keys.server_public, GB_CURVE_KEY_Z85);
    explicit_bzero(&keys, sizeof keys);
    free(allowed);
    free(ptrs);
    return rc;
}


/* ---- a run's identities ---- */

int gb_curve_identity_file(const char *keys_dir, const char *identity, char *out, size_t cap,
                           gb_error *err)
{
    char file[GB_CURVE_ID_MAX];
    size_t n = strlen(identity);
    if (n == 0 || n >= sizeof file)
        return gb_error_set(err, GB_EINVAL, "identity '%s': empty or too long", identity);
    if (strcmp(identity, GB_CURVE_LAUNCHER) == 0) {
        snprintf(file, sizeof file, "client");
    } else {
        for (size_t i = 0; i <= n; i++) {
            char ch = identity[i];
            if (ch && ch != '/' && ch != '_' && !(ch >= 'a' && ch <= 'z') &&
                !(ch >= 'A' && ch <= 'Z') && !(ch >= '0' && ch <= '9'))
                return gb_error_set(err, GB_EINVAL, "identity '%s': not a name", identity);
            file[i] = ch == '/' ? '-' : ch;
        }
    }
    int k = snprintf(out, cap, "%s/%s.key", keys_dir, file);
    return k < 0 || (size_t)k >= cap ? gb_error_set(err, GB_EINVAL, "keys path too long") : 0;
}

int gb_curve_identities_create(const char *run_dir, const char *const *names, int n,
                               gb_error *err)
{
    char dir[1024], path[1100], tmp[1100], pub[GB_CURVE_KEY_Z85];
    snprintf(dir, sizeof dir, "%s/%s", run_dir, GB_CURVE_KEYS_DIR);
    snprintf(tmp, sizeof tmp, "%s/identities.tmp", dir);
    FILE *f = fopen(tmp, "we");
    if (!f)
        return gb_error_errno(err, "create %s", tmp);
    int rc = gb_curve_identity_file(dir, GB_CURVE_LAUNCHER, path, sizeof path, err);
    if (rc == 0 && (rc = gb_curve_keypair_read(path, pub, NULL, err)) == 0)
        fprintf(f, "# a run's identities (the ZAP User-Id) and their public keys\n%s %s\n",
                GB_CURVE_LAUNCHER, pub);
    for (int i = 0; rc == 0 && i < n; i++) {
        rc = gb_curve_identity_file(dir, names[i], path, sizeof path, err);
        if (rc == 0 && access(path, F_OK) != 0)
            rc = gb_curve_keypair_write(path, NULL, err);
        if (rc == 0 && (rc = gb_curve_keypair_read(path, pub, NULL, err)) == 0)
            fprintf(f, "%s %s\n", names[i], pub);
    }
    if ((fflush(f) != 0 || fsync(fileno(f)) != 0) && rc == 0)
        rc = gb_error_errno(err, "write %s", tmp);
    if (fclose(f) != 0 && rc == 0)
        rc = gb_error_errno(err, "close %s", tmp);
    snprintf(path, sizeof path, "%s/identities", dir);
    if (rc == 0 && rename(tmp, path) != 0)
        rc = gb_error_errno(err, "rename %s", tmp);
    if (rc)
        unlink(tmp);
    return rc;
}

int gb_curve_identities_read(const char *keys_dir, gb_curve_ident **out, int *n, gb_error *err)
{
    char path[1100], line[256];
    snprintf(path, sizeof path, "%s/identities", keys_dir);
    *out = NULL;
    *n = 0;
    FILE *f = fopen(path, "re");
    if (!f)
        return errno == ENOENT ? gb_error_set(err, GB_ENOTFOUND, "%s: not found", path)
                               : gb_error_errno(err, "open %s", path);
    int rc = 0, lineno = 0, cap = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        if (*n == cap) {
            gb_curve_ident *grown = realloc(*out, (size_t)(cap ? 2 * cap : 64) * sizeof *grown);
            if (!grown) {
                rc = gb_error_set(err, GB_ENOMEM, "%s: out of memory", path);
                break;
            }
            *out = grown;
            cap = cap ? 2 * cap : 64;
        }
        gb_curve_ident *id = &(*out)[*n];
        char fmt[32];
        snprintf(fmt, sizeof fmt, "%%%ds %%%ds", GB_CURVE_ID_MAX - 1, GB_CURVE_KEY_Z85 - 1);
        if (sscanf(line, fmt, id->name, id->public_key) != 2 ||
            !gb_curve_key_valid(id->public_key))
            rc = gb_error_set(err, GB_EINVAL, "%s:%d: expected \"<identity> <Z85 public key>\"",
                              path, lineno);
        else
            (*n)++;
    }
    fclose(f);
    if (rc) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

int gb_curve_identity_attach(gb_curve **out, void *zctx, const char *keys_dir,
                             const char *identity, gb_error *err)
{
    gb_curve_keys keys = {0};
    gb_curve_ident *ids = NULL;
    char path[1100];
    int n = 0;
    *out = NULL;
    if (!identity)
        identity = GB_CURVE_LAUNCHER;
    snprintf(path, sizeof path, "%s/server.key", keys_dir);
    /* a joined host's folder holds the server's public key only */
    int rc = gb_curve_keypair_read(path, keys.server_public, keys.server_secret, err);
    if (rc == GB_EINVAL)
        rc = gb_curve_keypair_read(path, keys.server_public, NULL, err);
    if (rc == 0)
        rc = gb_curve_identity_file(keys_dir, identity, path, sizeof path, err);
    if (rc == 0)
        rc = gb_curve_keypair_read(path, keys.client_public, keys.client_secret, err);
    if (rc == 0)
        rc = gb_curve_identities_read(keys_dir, &ids, &n, err);
    if (rc == 0) {
        snprintf(keys.identity, sizeof keys.identity, "%s", identity);
        gb_curve_opts o = {.keys = &keys, .idents = ids, .nidents = n};
        rc = gb_curve_attach(out, zctx, &o, err);
    }
    explicit_bzero(&keys, sizeof keys);
    free(ids);
    return rc;
}
