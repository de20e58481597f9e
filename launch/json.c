/* launch/json.c: reading back the JSON a run wrote, with Jansson (launch/json.h). */
#include "launch/json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

int gb_json_load(const char *path, json_t **doc, gb_error *err)
{
    *doc = NULL;
    json_error_t je;
    json_t *d = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (d) {
        *doc = d;
        return 0;
    }
    if (json_error_code(&je) == json_error_cannot_open_file)
        return gb_error_set(err, errno == ENOENT ? GB_ENOTFOUND : GB_EIO, "%s", je.text);
    return gb_error_set(err, GB_ECORRUPT, "%s:%d:%d: %s", path, je.line, je.column, je.text);
}

/* The value at key path in doc (object members by exact name, split at dots) into *out.
 * Returns 0, GB_ENOTFOUND when a member is absent, GB_EINVAL when the way passes through
 * something other than an object; err says which. */
static int json_at(const json_t *doc, const char *path, json_t **out, gb_error *err)
{
    json_t *v = (json_t *)doc;
    for (const char *p = path;; p++) {
        size_t len = strcspn(p, ".");
        if (!json_is_object(v)) {
            if (p == path)
                return gb_error_set(err, GB_EINVAL, "'%s': the document is not an object", path);
            return gb_error_set(err, GB_EINVAL, "'%s': '%.*s' is not an object", path,
                                (int)(p - path - 1), path);
        }
        if (!(v = json_object_getn(v, p, len)))
            return gb_error_set(err, GB_ENOTFOUND, "no '%s'", path);
        p += len;
        if (!*p) {
            *out = v;
            return 0;
        }
    }
}

int gb_json_number(const json_t *doc, const char *path, double *out, gb_error *err)
{
    *out = NAN;
    json_t *v;
    int rc = json_at(doc, path, &v, err);
    if (rc)
        return rc;
    if (json_is_number(v))
        *out = json_number_value(v);
    else if (json_is_boolean(v))
        *out = json_is_true(v);
    else if (!json_is_null(v))
        return gb_error_set(err, GB_EINVAL, "'%s' is not a number", path);
    return 0;
}

int gb_json_string(const json_t *doc, const char *path, char *out, size_t cap,
                         gb_error *err)
{
    out[0] = '\0';
    json_t *v;
    int rc = json_at(doc, path, &v, err);
    if (rc)
        return rc;
    if (!json_is_string(v))
        return gb_error_set(err, GB_EINVAL, "'%s' is not a string", path);
    size_t len = json_string_length(v);
    snprintf(out, cap, "%s", json_string_value(v));
    if (len >= cap)
        return gb_error_set(err, GB_EFULL, "'%s' is %zu bytes, longer than %zu", path, len,
                            cap - 1);
    return 0;
}
