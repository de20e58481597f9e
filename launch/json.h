/* launch/json.h: reading back the JSON a run wrote (summary.json, an evaluation's report) with
 * Jansson: typed values found by their exact key path, with errors that say which key and why.
 * Used by the commands and the benchmarks alike.
 * defines: gb_json_load, gb_json_number, gb_json_string */
#ifndef GB_LAUNCH_JSON_H
#define GB_LAUNCH_JSON_H

#include "runtime/base/error.h"

#include <jansson.h>
#include <stddef.h>

/* Parses the JSON file at path into *doc, which the caller frees with json_decref. Returns 0,
 * GB_ENOTFOUND (no such file), GB_EIO (unreadable) or GB_ECORRUPT (not JSON: the message has
 * path:line:column); *doc is NULL on error. Reads the whole file (blocks on the disk). */
int gb_json_load(const char *path, json_t **doc, gb_error *err);

/* The value at a key path in doc: object members by exact name, nested ones joined with dots
 * ("workers.actors"). Returns 0, GB_ENOTFOUND when a member on the path is absent, or GB_EINVAL
 * when the value, or a member on the way, has another type; err names the path.
 * number: into *out, true/false as 1/0 and null as NAN (NAN too on error).
 * string: into out (cap bytes, NUL-terminated; "" on error); GB_EFULL when it was cut. */
int gb_json_number(const json_t *doc, const char *path, double *out, gb_error *err);
int gb_json_string(const json_t *doc, const char *path, char *out, size_t cap, gb_error *err);

#endif
