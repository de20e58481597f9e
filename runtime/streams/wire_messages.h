/* runtime/streams/wire_messages.h: the runtime's wire messages, each declared once as a table
 * (wire_schema.h) with the struct its attributes are read into and written from.
 * defines: gb_msg_* (each kind's struct), gb_schema_* (each kind's table), gb_reg_lookup_mode,
 *          gb_wire_runtime_schemas, gb_wire_runtime_nschemas
 *
 * Who sends what is said by each table's doc line; docs/protocol.md prints every table. The data
 * server's messages (workers/server/) are declared beside it, with the same API. */
#ifndef GB_RUNTIME_WIRE_MESSAGES_H
#define GB_RUNTIME_WIRE_MESSAGES_H

#include "runtime/streams/wire_schema.h"

#include <stdint.h>

/* ---- run control (runtime/streams/runctl.h) -------------------------------------------------- */

typedef struct gb_msg_run_watch {
    int64_t known;     /* the run's state as the worker knows it (gb_run_state) */
    int64_t confirmed; /* the state the worker confirms it reached */
    int64_t known_ckpts, known_hold, known_group; /* as last heard; -1 when not sent */
} gb_msg_run_watch;

typedef struct gb_msg_run_state {
    int64_t state;     /* the run's state now */
    int64_t env_steps; /* the run's environment steps, -1 when not sent */
    int64_t checkpoints; /* checkpoints the launcher asked trainer 0 for, -1 when not sent */
    int64_t trainer_group; /* the trainers' group generation, -1 when not sent */
    int64_t hold; /* the checkpoint request trainer 0 holds its learning at (0: none), -1 when
                     not sent */
    int64_t drained; /* 1: the run was drained (every chunk sent was received), -1 when not sent */
} gb_msg_run_state;

extern const gb_wire_schema gb_schema_run_watch, gb_schema_run_state;

/* ---- the inference stream (runtime/streams/inference.h) -------------------------------------- */

/* No attributes: a request's tensors are the model's inputs, a reply's its outputs, each with
 * the request's rows as first dimension (checked against the model by the server). */
extern const gb_wire_schema gb_schema_infer_request, gb_schema_infer_reply;

/* ---- metrics reports (runtime/run/metrics.h) ------------------------------------------------- */

/* No attributes: a worker's report is its tensors (names, values, episodes, an optional table). */
extern const gb_wire_schema gb_schema_metrics;

/* ---- the sample stream (runtime/streams/sample_stream.h) ------------------------------------- */

/* No attributes: a chunk's columns are its tensors, checked by runtime/streams/chunk.h. */
extern const gb_wire_schema gb_schema_sample;

/* ---- the parameter stream (runtime/streams/params.h) ----------------------------------------- */

/* One struct for every parameter message: each table reads and writes its own members. */
typedef struct gb_msg_param {
    int64_t version;  /* the parameters' version (the trainer's number) */
    int64_t total;    /* the version's size in bytes */
    int64_t chunk;    /* the publisher's chunk size in bytes */
    int64_t crc;      /* CRC-32C of the version's bytes */
    int64_t offset;   /* of a chunk or fetch in the version's bytes */
    int64_t length;   /* bytes a fetch asks for */
    int64_t serial;   /* the service's order of the version (params.h, "Order"); 0: absent */
    int64_t incoming; /* the serial of the version the service is receiving, 0: none */
} gb_msg_param;

extern const gb_wire_schema gb_schema_param_begin, gb_schema_param_chunk, gb_schema_param_end,
    gb_schema_param_info_req, gb_schema_param_info, gb_schema_param_fetch, gb_schema_param_data;

/* ---- the registry (runtime/streams/registry.h) ----------------------------------------------- */

typedef struct gb_msg_reg_register {
    int64_t ttl_ms; /* the registration's lifetime (the registry caps it at its own maximum) */
} gb_msg_reg_register;

typedef enum gb_reg_lookup_mode {
    GB_REG_LOOKUP_NAME = 0,   /* the name, registered now */
    GB_REG_LOOKUP_PREFIX = 1, /* every name under a prefix */
    GB_REG_LOOKUP_LAST = 2,   /* the name or, when it is not registered now, its last endpoint */
} gb_reg_lookup_mode;

typedef struct gb_msg_reg_lookup {
    int64_t mode; /* gb_reg_lookup_mode */
} gb_msg_reg_lookup;

typedef struct gb_msg_reg_join {
    int64_t role;  /* the gb_role asked for */
    int64_t again; /* a slot of role the joiner held and asks for again, -1: a new one */
} gb_msg_reg_join;

typedef struct gb_msg_reg_joined {
    int64_t index, incarnation; /* the slot given (gb_registry_join_reply) */
} gb_msg_reg_joined;

extern const gb_wire_schema gb_schema_reg_register, gb_schema_reg_unregister,
    gb_schema_reg_lookup, gb_schema_reg_reply, gb_schema_reg_join, gb_schema_reg_joined;

/* Every table above, in protocol order (docs/protocol.md's order). */
extern const gb_wire_schema *const gb_wire_runtime_schemas[];
extern const int gb_wire_runtime_nschemas;

#endif
