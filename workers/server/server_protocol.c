/* workers/server/server_protocol.c: the data server protocol's names (sampling modes, selectors)
 * and its message tables (workers/server/server_protocol.h); in the client library, which the
 * server links. */
#include "workers/server/server_protocol.h"

#include <stdint.h>
#include <string.h>

static const char *const mode_names[GB_SERVE_MODES] = {"item", "window", "transition", "episode",
                                                       "epoch"};

/* A mode by name (NULL or "": item); -1 for an unknown name. */
int gb_serve_mode_parse(const char *name)
{
    if (!name || !name[0])
        return GB_SERVE_MODE_ITEM;
    for (int k = 0; k < GB_SERVE_MODES; k++)
        if (strcmp(name, mode_names[k]) == 0)
            return k;
    return -1;
}

/* A static name, "?" out of range. */
const char *gb_serve_mode_name(int mode)
{
    return mode >= 0 && mode < GB_SERVE_MODES ? mode_names[mode] : "?";
}

/* As the config spells them (server.replay.selector), indexed by gb_selector_kind; kept here so
 * that the client needs no config code. */
static const char *const selector_names[GB_SERVE_SELECTOR_KINDS] = {"uniform", "weighted",
                                                                    "fifo", "lifo", "topk"};

/* A static name, or NULL out of range. */
const char *gb_serve_selector_name(int kind)
{
    return kind >= 0 && kind < GB_SERVE_SELECTOR_KINDS ? selector_names[kind] : NULL;
}

/* A selector's kind by name into *kind (-1: the default); GB_EINVAL for an unknown name. */
int gb_serve_selector_kind(const char *name, int64_t *kind, gb_error *err)
{
    *kind = -1;
    if (!name || !name[0] || strcmp(name, "default") == 0)
        return 0;
    for (int k = 0; k < GB_SERVE_SELECTOR_KINDS; k++)
        if (strcmp(name, selector_names[k]) == 0) {
            *kind = k;
            return 0;
        }
    return gb_error_set(err, GB_EINVAL, "client: unknown selector '%.32s' (expected default, "
                        "uniform, weighted, fifo, lifo or topk)", name);
}

/* ---- the tables ------------------------------------------------------------------------------ */

#define OP_ATTR(k)                                                                              \
    GB_WIRE_INT(gb_serve_request, op, 1, GB_SERVE_##k, GB_SERVE_##k, 0, "the operation")
#define TABLE_ATTR GB_WIRE_STR(gb_serve_request, table, 0, "the table (absent: the default one)")

static const gb_wire_attr_spec info_req_attrs[] = {OP_ATTR(INFO), TABLE_ATTR};
static const gb_wire_attr_spec insert_req_attrs[] = {OP_ATTR(INSERT), TABLE_ATTR};
static const gb_wire_attr_spec update_req_attrs[] = {OP_ATTR(UPDATE), TABLE_ATTR};
static const gb_wire_attr_spec checkpoint_req_attrs[] = {OP_ATTR(CHECKPOINT), TABLE_ATTR};

static const gb_wire_attr_spec sample_req_attrs[] = {
    OP_ATTR(SAMPLE),
    TABLE_ATTR,
    GB_WIRE_INT(gb_serve_request, batch, 1, 1, INT64_MAX, 0,
                "rows, at most INFO's max_batch_rows"),
    GB_WIRE_INT(gb_serve_request, t0, 0, 0, INT32_MAX, 0, "item: each row's first step"),
    GB_WIRE_INT(gb_serve_request, t1, 0, 0, INT32_MAX, 0,
                "item: one past each row's last step (0: T)"),
    GB_WIRE_INT(gb_serve_request, timeout_ms, 0, INT32_MIN, INT32_MAX, -1,
                "item: how long it may wait for the rate limiter (< 0: server.max_wait_s)"),
    GB_WIRE_INT(gb_serve_request, selector, 0, -1, GB_SERVE_SELECTOR_KINDS - 1, -1,
                "item: the selector (Codes; -1: the table's default)"),
    GB_WIRE_STR(gb_serve_request, mode, 0,
                "item (absent), window, transition, episode or epoch"),
    GB_WIRE_INT(gb_serve_request, len, 0, 1, 1 << 24, 0,
                "window, transition, epoch: steps per row (absent: T for window, else 1)"),
    GB_WIRE_STR(gb_serve_request, cursor, 0, "epoch: the reader's cursor, 1..31 bytes"),
    GB_WIRE_INT(gb_serve_request, reset, 0, 0, 1, 0, "epoch: 1 restarts the cursor"),
};

static const gb_wire_tensor_spec sample_req_tensors[] = {
    GB_WIRE_TENSOR("columns", GB_DTYPE_UINT8, 1, 0,
                   "the columns wanted, each name followed by a NUL (absent: every column)"),
};

static const gb_wire_tensor_spec insert_req_tensors[] = {
    GB_WIRE_TENSOR("priority", GB_DTYPE_FLOAT64, 1, 0,
                   "[n] each item's priority (NaN: the default)"),
    GB_WIRE_TENSOR("length", GB_DTYPE_INT32, 1, 0, "[n] each item's valid steps, 1..T"),
};

static const gb_wire_tensor_spec update_req_tensors[] = {
    GB_WIRE_TENSOR("index", GB_DTYPE_INT64, 1, 1, "[n] the items' slots (a sample's index)"),
    GB_WIRE_TENSOR("priority", GB_DTYPE_FLOAT64, 1, 1, "[n] their priorities, finite, >= 0"),
    GB_WIRE_TENSOR("key", GB_DTYPE_UINT64, 1, 0,
                   "[n] their keys (a sample's key): an item replaced since is skipped"),
};

static const gb_wire_schema info_req = {
    .name = "serve_info", .type = GB_MSG_SERVE_REQUEST,
    .doc = "A client asks for a table's schema, counters and limits.",
    .attrs = info_req_attrs, .nattrs = GB_WIRE_N(info_req_attrs)};

static const gb_wire_schema sample_req = {
    .name = "serve_sample", .type = GB_MSG_SERVE_REQUEST,
    .doc = "A client asks for a batch: items by a selector, or rows of an offline mode.",
    .attrs = sample_req_attrs, .nattrs = GB_WIRE_N(sample_req_attrs),
    .tensors = sample_req_tensors, .ntensors = GB_WIRE_N(sample_req_tensors)};

static const gb_wire_schema insert_req = {
    .name = "serve_insert", .type = GB_MSG_SERVE_REQUEST,
    .doc = "A client adds items: every column, [n, T, *shape] or [n, *shape], with the header's "
           "policy version.",
    .attrs = insert_req_attrs, .nattrs = GB_WIRE_N(insert_req_attrs),
    .tensors = insert_req_tensors, .ntensors = GB_WIRE_N(insert_req_tensors),
    .open_tensors = 1};

static const gb_wire_schema update_req = {
    .name = "serve_update", .type = GB_MSG_SERVE_REQUEST,
    .doc = "A client sets the priorities of sampled items.",
    .attrs = update_req_attrs, .nattrs = GB_WIRE_N(update_req_attrs),
    .tensors = update_req_tensors, .ntensors = GB_WIRE_N(update_req_tensors)};

static const gb_wire_schema checkpoint_req = {
    .name = "serve_checkpoint", .type = GB_MSG_SERVE_REQUEST,
    .doc = "A client asks the server to write the default table's checkpoint.",
    .attrs = checkpoint_req_attrs, .nattrs = GB_WIRE_N(checkpoint_req_attrs)};

/* ---- replies --------------------------------------------------------------------------------- */

static const gb_wire_attr_spec info_attrs[] = {
    GB_WIRE_INT(gb_serve_info, size, 1, 0, INT64_MAX, 0, "items that can be sampled"),
    GB_WIRE_INT(gb_serve_info, capacity, 1, 0, INT64_MAX, 0, "items the table holds at most"),
    GB_WIRE_INT(gb_serve_info, steps, 1, 1, INT32_MAX, 0, "T: steps per item"),
    GB_WIRE_INT(gb_serve_info, inserts, 1, 0, INT64_MAX, 0, "items inserted so far"),
    GB_WIRE_INT(gb_serve_info, samples, 1, 0, INT64_MAX, 0, "items sampled so far"),
    GB_WIRE_INT(gb_serve_info, max_batch_rows, 1, 1, INT64_MAX, 0, "rows per request at most"),
    GB_WIRE_INT(gb_serve_info, max_batch_bytes, 1, 1, INT64_MAX, 0,
                "data bytes of a sample reply at most"),
    GB_WIRE_STR(gb_serve_info, selector, 1, "the default selector"),
    GB_WIRE_STR(gb_serve_info, remover, 1, "the remover"),
    GB_WIRE_INT(gb_serve_info, per_item, 0, 0, INT64_MAX, 0,
                "bit c set: column c has one value per item, not per step"),
    GB_WIRE_STRS(gb_serve_info, selectors, 1, 1, GB_SERVE_SELECTOR_KINDS,
                 "every selector a sample may name"),
    GB_WIRE_STRS(gb_serve_info, tables, 1, 1, GB_SERVE_MAX_TABLES,
                 "every table of the server, the default first"),
    GB_WIRE_INT(gb_serve_info, episodes, 0, 0, INT64_MAX, 0,
                "episodes of the table's episode index (0: none; the offline modes are refused)"),
    GB_WIRE_INT(gb_serve_info, transitions, 0, 0, INT64_MAX, 0, "their steps in all"),
    GB_WIRE_INT(gb_serve_info, max_len, 0, 0, INT64_MAX, 0, "the longest episode's steps"),
    GB_WIRE_STRS(gb_serve_info, weighted, 0, 2, 2,
                 "when weighted is offered: the sum of priority^alpha and beta, exact decimals"),
};

static const gb_wire_attr_spec sampled_attrs[] = {
    GB_WIRE_INT(gb_serve_sampled, n, 1, 0, INT64_MAX, 0, "rows returned (<= batch)"),
    GB_WIRE_INT(gb_serve_sampled, size, 1, 0, INT64_MAX, 0,
                "what was drawn from: items, window starts, transitions or episodes"),
    GB_WIRE_INT(gb_serve_sampled, selector, 0, -1, GB_SERVE_SELECTOR_KINDS - 1, -1,
                "the selector that drew (absent: an offline mode)"),
    GB_WIRE_STR(gb_serve_sampled, mode, 0, "offline modes: the mode"),
    GB_WIRE_STR(gb_serve_sampled, table, 0, "offline modes: the table"),
    GB_WIRE_INT(gb_serve_sampled, epoch, 0, 0, INT64_MAX, -1, "epoch: the rows' epoch, from 0"),
    GB_WIRE_INT(gb_serve_sampled, pos, 0, 0, INT64_MAX, 0, "epoch: the first row's position in it"),
    GB_WIRE_INT(gb_serve_sampled, end, 0, 0, 1, 0, "epoch: 1 when these rows finish it"),
};

static const gb_wire_tensor_spec sampled_tensors[] = {
    GB_WIRE_TENSOR("index", GB_DTYPE_INT64, 1, 1, "[n] each row's slot (for updates)"),
    GB_WIRE_TENSOR("key", GB_DTYPE_UINT64, 1, 1, "[n] its item's identity"),
    GB_WIRE_TENSOR("prob", GB_DTYPE_FLOAT64, 1, 1, "[n] the probability it was drawn with"),
    GB_WIRE_TENSOR("weight", GB_DTYPE_FLOAT32, 1, 1, "[n] its importance weight"),
    GB_WIRE_TENSOR("length", GB_DTYPE_INT32, 1, 1, "[n] its valid steps"),
    GB_WIRE_TENSOR("episode", GB_DTYPE_INT64, 1, 0, "offline modes: [n] each row's episode"),
    GB_WIRE_TENSOR("timestep", GB_DTYPE_INT32, 2, 0,
                   "offline modes: [n, S] each step's index in its episode"),
};

static const gb_wire_attr_spec inserted_attrs[] = {
    GB_WIRE_INT(gb_serve_inserted, n, 1, 0, INT64_MAX, 0, "items inserted"),
    GB_WIRE_INT(gb_serve_inserted, size, 1, 0, INT64_MAX, 0, "the table's size after"),
};

static const gb_wire_attr_spec updated_attrs[] = {
    GB_WIRE_INT(gb_serve_updated, n, 1, 0, INT64_MAX, 0, "entries"),
    GB_WIRE_INT(gb_serve_updated, skipped, 1, 0, INT64_MAX, 0,
                "those skipped: their item changed since it was sampled"),
};

static const gb_wire_schema info_reply = {
    .name = "serve_info_reply", .type = GB_MSG_SERVE_REPLY,
    .doc = "The server's answer to info; one tensor per column with 0 rows: [0, T, *shape] or "
           "[0, *shape] (per item).",
    .attrs = info_attrs, .nattrs = GB_WIRE_N(info_attrs), .open_tensors = 1};

static const gb_wire_schema sample_reply = {
    .name = "serve_sample_reply", .type = GB_MSG_SERVE_REPLY,
    .doc = "The server's answer to sample: the tensors below, then each asked column, [n, S, "
           "*shape] or [n, *shape], then (offline modes) episode and timestep.",
    .attrs = sampled_attrs, .nattrs = GB_WIRE_N(sampled_attrs), .tensors = sampled_tensors,
    .ntensors = GB_WIRE_N(sampled_tensors), .open_tensors = 1};

static const gb_wire_schema insert_reply = {
    .name = "serve_insert_reply", .type = GB_MSG_SERVE_REPLY,
    .doc = "The server's answer to insert.",
    .attrs = inserted_attrs, .nattrs = GB_WIRE_N(inserted_attrs)};

static const gb_wire_schema update_reply = {
    .name = "serve_update_reply", .type = GB_MSG_SERVE_REPLY,
    .doc = "The server's answer to update.",
    .attrs = updated_attrs, .nattrs = GB_WIRE_N(updated_attrs)};

static const gb_wire_schema checkpoint_reply = {
    .name = "serve_checkpoint_reply", .type = GB_MSG_SERVE_REPLY,
    .doc = "The server's answer to checkpoint: no attributes; text is the path written."};

const gb_wire_schema *const gb_serve_request_schemas[GB_SERVE_OP_END] = {
    [GB_SERVE_INFO] = &info_req,     [GB_SERVE_SAMPLE] = &sample_req,
    [GB_SERVE_INSERT] = &insert_req, [GB_SERVE_UPDATE] = &update_req,
    [GB_SERVE_CHECKPOINT] = &checkpoint_req};

const gb_wire_schema *const gb_serve_reply_schemas[GB_SERVE_OP_END] = {
    [GB_SERVE_INFO] = &info_reply,     [GB_SERVE_SAMPLE] = &sample_reply,
    [GB_SERVE_INSERT] = &insert_reply, [GB_SERVE_UPDATE] = &update_reply,
    [GB_SERVE_CHECKPOINT] = &checkpoint_reply};

const gb_wire_schema *const gb_serve_schemas[] = {
    &info_req,   &info_reply,   &sample_req,     &sample_reply,     &insert_req,
    &insert_reply, &update_req, &update_reply, &checkpoint_req, &checkpoint_reply};

const int gb_serve_nschemas = GB_WIRE_N(gb_serve_schemas);
