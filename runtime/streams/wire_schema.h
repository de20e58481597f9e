/* runtime/streams/wire_schema.h: wire messages declared as tables of named, typed attributes, and
 * the one validator that checks a received header against its table (as
 * runtime/config/config_schema.c does for configs; docs/design.md, "Wire messages").
 * defines: gb_wire_attr_spec, gb_wire_tensor_spec, gb_wire_schema, gb_wire_strs,
 *          GB_WIRE_INT, GB_WIRE_STR, GB_WIRE_STRS, GB_WIRE_TENSOR, GB_WIRE_N,
 *          gb_wire_schema_read, gb_wire_schema_write, gb_wire_schema_markdown
 *
 * A message kind declares, in one table: its type (wire.h), the attributes of its header ("a":
 * name, kind, required or optional with a default, inclusive bounds) and the tensors it carries
 * (name, dtype, rank, required). Each attribute maps to a member of a plain C struct the reader
 * fills and the writer reads:
 *   GB_WIRE_ATTR_INT   int64_t       value in [min, max]
 *   GB_WIRE_ATTR_STR   const char *  points into the header's words; NULL when absent
 *   GB_WIRE_ATTR_STRS  gb_wire_strs  count in [min, max], pointers into the header's words
 * Receivers call gb_wire_schema_read and trust nothing else of the header's attributes; senders
 * fill the struct and call gb_wire_schema_write. Example (runtime/streams/wire_messages.c):
 *
 *   typedef struct { int64_t known, confirmed; } gb_msg_run_watch;
 *   static const gb_wire_attr_spec run_watch_attrs[] = {
 *       GB_WIRE_INT(gb_msg_run_watch, known, 1, 0, GB_RUN_STATE_END - 1, 0, "state it knows"),
 *       ...};
 *   const gb_wire_schema gb_schema_run_watch = {
 *       .name = "run_watch", .type = GB_MSG_RUN_WATCH, .doc = "...",
 *       .attrs = run_watch_attrs, .nattrs = GB_WIRE_N(run_watch_attrs)};
 *
 * docs/protocol.md holds every runtime table as gb_wire_schema_markdown prints it; a test
 * (tests/runtime/streams/test_wire_doc.c) fails when the page and the tables disagree. */
#ifndef GB_RUNTIME_WIRE_SCHEMA_H
#define GB_RUNTIME_WIRE_SCHEMA_H

#include "runtime/base/error.h"
#include "runtime/streams/wire.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A string-list attribute as read: n strings, each a pointer into the header's words. */
typedef struct gb_wire_strs {
    int n;
    const char *v[GB_WIRE_WORDS_MAX];
} gb_wire_strs;

typedef struct gb_wire_attr_spec {
    const char *name; /* the attribute's key: 1..GB_WIRE_ATTR_KEY_MAX-1 bytes */
    int kind;         /* gb_wire_attr_kind */
    int required;     /* 1: a header without it is rejected; 0: optional, def when absent */
    int64_t min, max; /* inclusive bounds: INT of the value, STRS of the count (STR: unused) */
    int64_t def;      /* INT, optional: the value read when absent (may lie outside the bounds,
                         as a mark of absence); the writer leaves an attribute at def out */
    size_t offset;    /* of its member in the message's struct */
    const char *doc;  /* one line: what it means (docs/protocol.md) */
} gb_wire_attr_spec;

typedef struct gb_wire_tensor_spec {
    const char *name; /* the tensor's name */
    int dtype;        /* gb_dtype, or -1: any */
    int rank;         /* 0..GB_WIRE_MAX_RANK, or -1: any */
    int required;     /* 1: a message without it is rejected */
    const char *doc;
} gb_wire_tensor_spec;

typedef struct gb_wire_schema {
    const char *name; /* the message kind, unique: "run_watch" (one type may have several kinds,
                         e.g. a reply whose attributes depend on the request) */
    int type;         /* gb_msg_type */
    const gb_wire_attr_spec *attrs;
    int nattrs;
    const gb_wire_tensor_spec *tensors;
    int ntensors;
    int open_tensors; /* 1: tensors not declared are allowed (a sample chunk's columns) */
    const char *doc;  /* one line: who sends it to whom, when */
} gb_wire_schema;

#define GB_WIRE_MEMBER_(T, m) offsetof(T, m)
/* An int attribute: member m (int64_t) of struct T. */
#define GB_WIRE_INT(T, m, req, lo, hi, dflt, doc)                                               \
    {#m, GB_WIRE_ATTR_INT, (req), (lo), (hi), (dflt), GB_WIRE_MEMBER_(T, m), (doc)}
/* A string attribute: member m (const char *) of struct T. */
#define GB_WIRE_STR(T, m, req, doc)                                                             \
    {#m, GB_WIRE_ATTR_STR, (req), 0, 0, 0, GB_WIRE_MEMBER_(T, m), (doc)}
/* A string-list attribute of lo..hi strings: member m (gb_wire_strs) of struct T. */
#define GB_WIRE_STRS(T, m, req, lo, hi, doc)                                                    \
    {#m, GB_WIRE_ATTR_STRS, (req), (lo), (hi), 0, GB_WIRE_MEMBER_(T, m), (doc)}
#define GB_WIRE_TENSOR(name, dtype, rank, req, doc) {(name), (dtype), (rank), (req), (doc)}
/* Entries of a static array of specs, for nattrs and ntensors. */
#define GB_WIRE_N(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Checks h against s and fills out (a struct of s's attributes; may be NULL to check only): h's
 * type is s's, every attribute of h is declared, of its declared kind and within its bounds,
 * every required attribute and tensor is present, a declared tensor has its dtype and rank,
 * and, unless s->open_tensors, no other tensor is there. Fills every declared member of out
 * (absent optional ones with def, or NULL / n = 0); leaves other members alone. Pointers in out
 * point into h: valid while h is. Never allocates. Returns 0, or GB_EPROTO with err naming the
 * message, its sender (role and index) and the attribute or tensor. */
int gb_wire_schema_read(const gb_wire_schema *s, const gb_wire_header *h, void *out,
                        gb_error *err);

/* Adds s's attributes from in to h (its type must be s's; attributes already in h stay): every
 * required one, and every optional one that is not at its default (a STR: not NULL; a STRS: n >
 * 0), each checked against its bounds. Returns 0, or GB_EINVAL naming the attribute (a value
 * out of bounds, a string too long, or the header's attribute limits exceeded; h may then hold
 * some of the attributes). Does not touch h's tensors. */
int gb_wire_schema_write(const gb_wire_schema *s, const void *in, gb_wire_header *h,
                         gb_error *err);

/* Prints s as the markdown docs/protocol.md holds: a heading, its doc line, a table of its
 * attributes and one of its tensors. Returns 0 or GB_ESYS (a write to f failed). */
int gb_wire_schema_markdown(const gb_wire_schema *s, FILE *f);

#endif
