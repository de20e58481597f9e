/* runtime/wire_messages.c: the tables of the runtime's wire messages (see wire_messages.h). */
#include "runtime/wire_messages.h"

#include "runtime/runctl.h"

#define LAST_STATE (GB_RUN_STATE_END - 1)

/* ---- run control ----------------------------------------------------------------------------- */

static const gb_wire_attr_spec run_watch_attrs[] = {
    GB_WIRE_INT(gb_msg_run_watch, known, 1, 0, LAST_STATE, 0,
                "the run's state as the worker knows it"),
    GB_WIRE_INT(gb_msg_run_watch, confirmed, 1, 0, LAST_STATE, 0,
                "the state the worker confirms it reached"),
};

const gb_wire_schema gb_schema_run_watch = {
    .name = "run_watch", .type = GB_MSG_RUN_WATCH,
    .doc = "A worker to the registry: answered at once when `known` is stale, else held until "
           "the state moves or 1 s passes (runtime/runctl.h).",
    .attrs = run_watch_attrs, .nattrs = GB_WIRE_N(run_watch_attrs)};

static const gb_wire_attr_spec run_state_attrs[] = {
    GB_WIRE_INT(gb_msg_run_state, state, 1, 0, LAST_STATE, 0, "the run's state now"),
    GB_WIRE_INT(gb_msg_run_state, env_steps, 0, 0, INT64_MAX, -1,
                "the run's environment steps so far"),
};

const gb_wire_schema gb_schema_run_state = {
    .name = "run_state", .type = GB_MSG_RUN_STATE,
    .doc = "The registry's answer to a watch; status GB_EPROTO (text says why) for a malformed "
           "watch.",
    .attrs = run_state_attrs, .nattrs = GB_WIRE_N(run_state_attrs)};

const gb_wire_schema *const gb_wire_runtime_schemas[] = {
    &gb_schema_run_watch,
    &gb_schema_run_state,
};

const int gb_wire_runtime_nschemas = GB_WIRE_N(gb_wire_runtime_schemas);
