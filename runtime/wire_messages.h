/* runtime/wire_messages.h: the runtime's wire messages, each declared once as a table
 * (wire_schema.h) with the struct its attributes are read into and written from.
 * defines: gb_msg_run_watch, gb_msg_run_state, gb_schema_run_watch, gb_schema_run_state,
 *          gb_wire_runtime_schemas, gb_wire_runtime_nschemas
 *
 * Who sends what is said by each table's doc line; docs/protocol.md prints every table. The data
 * server's messages (workers/server*) are declared beside it, with the same API. */
#ifndef GB_RUNTIME_WIRE_MESSAGES_H
#define GB_RUNTIME_WIRE_MESSAGES_H

#include "runtime/wire_schema.h"

#include <stdint.h>

/* ---- run control (runtime/runctl.h) ---------------------------------------------------------- */

typedef struct gb_msg_run_watch {
    int64_t known;     /* the run's state as the worker knows it (gb_run_state) */
    int64_t confirmed; /* the state the worker confirms it reached */
} gb_msg_run_watch;

typedef struct gb_msg_run_state {
    int64_t state;     /* the run's state now */
    int64_t env_steps; /* the run's environment steps, -1 when not sent */
} gb_msg_run_state;

extern const gb_wire_schema gb_schema_run_watch, gb_schema_run_state;

/* Every table above, in protocol order (docs/protocol.md's order). */
extern const gb_wire_schema *const gb_wire_runtime_schemas[];
extern const int gb_wire_runtime_nschemas;

#endif
