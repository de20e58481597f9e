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

/* ---- the registry ---------------------------------------------------------------------------- */

#define NAME_TENSOR(doc) GB_WIRE_TENSOR("name", GB_DTYPE_UINT8, 1, 1, doc)
#define TEXT_TENSOR(name, req, doc) GB_WIRE_TENSOR(name, GB_DTYPE_UINT8, 1, req, doc)

static const gb_wire_attr_spec reg_register_attrs[] = {
    GB_WIRE_INT(gb_msg_reg_register, ttl_ms, 1, 1, INT64_MAX, 0,
                "lifetime in ms (capped at the registry's maximum)"),
};
static const gb_wire_tensor_spec reg_register_tensors[] = {
    NAME_TENSOR("the name, e.g. `policy/0/inference`"),
    TEXT_TENSOR("endpoint", 1, "where to connect"),
};

const gb_wire_schema gb_schema_reg_register = {
    .name = "reg_register", .type = GB_MSG_REG_REGISTER,
    .doc = "A worker registers (or renews, every heartbeat) name -> endpoint; answered by "
           "`reg_reply`.",
    .attrs = reg_register_attrs, .nattrs = GB_WIRE_N(reg_register_attrs),
    .tensors = reg_register_tensors, .ntensors = GB_WIRE_N(reg_register_tensors)};

static const gb_wire_tensor_spec reg_name_tensor[] = {NAME_TENSOR("the name")};

const gb_wire_schema gb_schema_reg_unregister = {
    .name = "reg_unregister", .type = GB_MSG_REG_UNREGISTER,
    .doc = "A worker removes a name it registered; answered by `reg_reply` (GB_ENOTFOUND: no such "
           "name).",
    .tensors = reg_name_tensor, .ntensors = GB_WIRE_N(reg_name_tensor)};

static const gb_wire_attr_spec reg_lookup_attrs[] = {
    GB_WIRE_INT(gb_msg_reg_lookup, mode, 0, GB_REG_LOOKUP_NAME, GB_REG_LOOKUP_LAST,
                GB_REG_LOOKUP_NAME, "0: the name; 1: every name under the prefix `name` (may be "
                "empty); 2: the name, or its last endpoint when it is not registered now"),
};
static const gb_wire_tensor_spec reg_lookup_tensors[] = {
    TEXT_TENSOR("name", 1, "the name or prefix"),
};

const gb_wire_schema gb_schema_reg_lookup = {
    .name = "reg_lookup", .type = GB_MSG_REG_LOOKUP,
    .doc = "A worker looks a name up; answered by `reg_reply` (GB_ENOTFOUND: not registered).",
    .attrs = reg_lookup_attrs, .nattrs = GB_WIRE_N(reg_lookup_attrs),
    .tensors = reg_lookup_tensors, .ntensors = GB_WIRE_N(reg_lookup_tensors)};

static const gb_wire_tensor_spec reg_reply_tensors[] = {
    TEXT_TENSOR("names", 0, "a lookup's names, each followed by a NUL, sorted"),
    TEXT_TENSOR("endpoints", 0, "their endpoints, in the same order, each followed by a NUL"),
};

const gb_wire_schema gb_schema_reg_reply = {
    .name = "reg_reply", .type = GB_MSG_REG_REPLY,
    .doc = "The registry's answer to `reg_register`, `reg_unregister` and `reg_lookup`; status "
           "!= 0: refused, text says why.",
    .tensors = reg_reply_tensors, .ntensors = GB_WIRE_N(reg_reply_tensors)};

static const gb_wire_attr_spec reg_join_attrs[] = {
    GB_WIRE_INT(gb_msg_reg_join, role, 1, 0, GB_ROLE_END - 1, 0, "the role asked for (gb_role)"),
};

const gb_wire_schema gb_schema_reg_join = {
    .name = "reg_join", .type = GB_MSG_REG_JOIN,
    .doc = "`gearbox join` asks the run's launcher for a slot; answered by `reg_joined`.",
    .attrs = reg_join_attrs, .nattrs = GB_WIRE_N(reg_join_attrs)};

static const gb_wire_attr_spec reg_joined_attrs[] = {
    GB_WIRE_INT(gb_msg_reg_joined, index, 1, 0, INT32_MAX, 0, "the worker's index in its role"),
    GB_WIRE_INT(gb_msg_reg_joined, incarnation, 1, 0, INT32_MAX, 0,
                "its process's incarnation in that slot"),
};
static const gb_wire_tensor_spec reg_joined_tensors[] = {
    TEXT_TENSOR("config", 1, "the run's resolved config (YAML)"),
    TEXT_TENSOR("metrics", 1, "the launcher's metrics endpoint"),
    TEXT_TENSOR("run", 1, "the run's identity (its run directory)"),
};

const gb_wire_schema gb_schema_reg_joined = {
    .name = "reg_joined", .type = GB_MSG_REG_REPLY,
    .doc = "The launcher's answer to `reg_join` when it gives a slot (status 0); a refusal is a "
           "`reg_reply` with status != 0 and nothing else.",
    .attrs = reg_joined_attrs, .nattrs = GB_WIRE_N(reg_joined_attrs),
    .tensors = reg_joined_tensors, .ntensors = GB_WIRE_N(reg_joined_tensors)};

const gb_wire_schema *const gb_wire_runtime_schemas[] = {
    &gb_schema_reg_register, &gb_schema_reg_unregister, &gb_schema_reg_lookup,
    &gb_schema_reg_reply,    &gb_schema_reg_join,       &gb_schema_reg_joined,
    &gb_schema_run_watch,    &gb_schema_run_state,
};

const int gb_wire_runtime_nschemas = GB_WIRE_N(gb_wire_runtime_schemas);
