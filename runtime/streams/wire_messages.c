/* runtime/streams/wire_messages.c: the tables of the runtime's wire messages (see wire_messages.h).
 * */
#include "runtime/streams/wire_messages.h"

#include "runtime/streams/params.h"
#include "runtime/streams/runctl.h"

#define LAST_STATE (GB_RUN_STATE_END - 1)

/* ---- run control ----------------------------------------------------------------------------- */

static const gb_wire_attr_spec run_watch_attrs[] = {
    GB_WIRE_INT(gb_msg_run_watch, known, 1, 0, LAST_STATE, 0,
                "the run's state as the worker knows it"),
    GB_WIRE_INT(gb_msg_run_watch, confirmed, 1, 0, LAST_STATE, 0,
                "the state the worker confirms it reached"),
    GB_WIRE_INT(gb_msg_run_watch, known_ckpts, 0, 0, INT64_MAX, -1,
                "the checkpoint requests as the worker last heard them"),
    GB_WIRE_INT(gb_msg_run_watch, known_hold, 0, 0, INT64_MAX, -1,
                "the hold as the worker last heard it"),
    GB_WIRE_INT(gb_msg_run_watch, known_group, 0, 0, INT64_MAX, -1,
                "the trainers' group generation as the worker last heard it"),
};

const gb_wire_schema gb_schema_run_watch = {
    .name = "run_watch", .type = GB_MSG_RUN_WATCH,
    .doc = "A worker to the registry: answered at once when `known` or a `known_*` it sends is "
           "stale, else held until the state moves or 1 s passes (runtime/streams/runctl.h).",
    .attrs = run_watch_attrs, .nattrs = GB_WIRE_N(run_watch_attrs)};

static const gb_wire_attr_spec run_state_attrs[] = {
    GB_WIRE_INT(gb_msg_run_state, state, 1, 0, LAST_STATE, 0, "the run's state now"),
    GB_WIRE_INT(gb_msg_run_state, env_steps, 0, 0, INT64_MAX, -1,
                "the run's environment steps so far"),
    GB_WIRE_INT(gb_msg_run_state, checkpoints, 0, 0, INT64_MAX, -1,
                "checkpoints asked of trainer 0 so far: one more asks for one now"),
    GB_WIRE_INT(gb_msg_run_state, trainer_group, 0, 0, INT64_MAX, -1,
                "the trainers' group generation: one more when one of several trainers is "
                "restarted (the others form the group again with it)"),
    GB_WIRE_INT(gb_msg_run_state, hold, 0, 0, INT64_MAX, -1,
                "the checkpoint request at which trainer 0 holds the trainers' learning while "
                "an evaluation plays that checkpoint; 0: none"),
    GB_WIRE_INT(gb_msg_run_state, drained, 0, 0, 1, -1,
                "1 once the run was drained: the trainers had received every chunk the actors "
                "sent (a released run that was not drained answers 0)"),
};

const gb_wire_schema gb_schema_run_state = {
    .name = "run_state", .type = GB_MSG_RUN_STATE,
    .doc = "The registry's answer to a watch; status GB_EPROTO (text says why) for a malformed "
           "watch.",
    .attrs = run_state_attrs, .nattrs = GB_WIRE_N(run_state_attrs)};

/* ---- the inference stream -------------------------------------------------------------------- */

const gb_wire_schema gb_schema_infer_request = {
    .name = "infer_request", .type = GB_MSG_INFER_REQUEST,
    .doc = "An actor to a policy worker (DEALER to ROUTER): observations; its tensors are the "
           "model's inputs, each with the request's rows as first dimension.",
    .open_tensors = 1};

const gb_wire_schema gb_schema_infer_reply = {
    .name = "infer_reply", .type = GB_MSG_INFER_REPLY,
    .doc = "The policy worker's answer: the model's outputs for the request's rows (actions, "
           "log-probabilities, values), or status != 0 and text saying why.",
    .open_tensors = 1};

/* ---- metrics reports ------------------------------------------------------------------------- */

static const gb_wire_tensor_spec metrics_tensors[] = {
    GB_WIRE_TENSOR("names", GB_DTYPE_UINT8, 1, 1, "the values' names, each ended by a NUL"),
    GB_WIRE_TENSOR("values", GB_DTYPE_FLOAT64, 1, 1, "one value per name"),
    GB_WIRE_TENSOR("returns", GB_DTYPE_FLOAT32, 1, 1, "returns of episodes finished since the "
                   "last report"),
    GB_WIRE_TENSOR("lengths", GB_DTYPE_INT64, 1, 1, "their lengths, one per return"),
    GB_WIRE_TENSOR("table", GB_DTYPE_INT64, 2, 0, "rows of counts (a trainer's ledger rows)"),
};

const gb_wire_schema gb_schema_metrics = {
    .name = "metrics", .type = GB_MSG_METRICS,
    .doc = "A worker to the launcher's metrics socket (PUSH to PULL), every report interval: its "
           "counters, the episodes it finished, and a trainer's ledger rows.",
    .tensors = metrics_tensors, .ntensors = GB_WIRE_N(metrics_tensors)};

/* ---- the sample stream ----------------------------------------------------------------------- */

const gb_wire_schema gb_schema_sample = {
    .name = "sample", .type = GB_MSG_SAMPLE,
    .doc = "An actor to a trainer (PUSH to PULL): one trajectory chunk; its tensors are the "
           "chunk's columns, named and shaped as runtime/streams/chunk.h defines.",
    .open_tensors = 1};

/* ---- the parameter stream -------------------------------------------------------------------- */

#define P_VERSION GB_WIRE_INT(gb_msg_param, version, 1, 0, INT64_MAX, 0, "the parameters' version")
#define P_TOTAL GB_WIRE_INT(gb_msg_param, total, 1, 0, INT64_MAX, 0, "the version's bytes")
#define P_CHUNK GB_WIRE_INT(gb_msg_param, chunk, 1, 1, GB_PARAM_CHUNK_MAX, 0, \
                            "the publisher's chunk bytes")
#define P_OFFSET(doc) GB_WIRE_INT(gb_msg_param, offset, 1, 0, INT64_MAX, 0, doc)
#define P_SERIAL GB_WIRE_INT(gb_msg_param, serial, 0, 1, INT64_MAX, 0, \
                             "the service's order of the version: added by the service when it " \
                             "forwards the message on PUB, where subscribers require it")
#define P_BYTES(name, req, doc) GB_WIRE_TENSOR(name, GB_DTYPE_UINT8, 1, req, doc)
#define LAYOUT_DOC                                                                                 \
    "the layout: 208-byte records of name, dtype, rank, shape, offset (params_impl.h)"

static const gb_wire_attr_spec param_begin_attrs[] = {P_VERSION, P_TOTAL, P_CHUNK, P_SERIAL};
static const gb_wire_tensor_spec param_layout[] = {P_BYTES("layout", 1, LAYOUT_DOC)};

const gb_wire_schema gb_schema_param_begin = {
    .name = "param_begin", .type = GB_MSG_PARAM_BEGIN,
    .doc = "The publisher (trainer 0) to the service, which forwards it on PUB: a version "
           "begins (it replaces any unfinished one).",
    .attrs = param_begin_attrs, .nattrs = GB_WIRE_N(param_begin_attrs),
    .tensors = param_layout, .ntensors = GB_WIRE_N(param_layout)};

static const gb_wire_attr_spec param_chunk_attrs[] = {
    P_VERSION, P_OFFSET("where the chunk's bytes go in the version"), P_SERIAL};
static const gb_wire_tensor_spec param_data[] = {P_BYTES("data", 1, "the chunk's bytes")};

const gb_wire_schema gb_schema_param_chunk = {
    .name = "param_chunk", .type = GB_MSG_PARAM_CHUNK,
    .doc = "The publisher to the service, forwarded on PUB: the next chunk of the version, in "
           "order.",
    .attrs = param_chunk_attrs, .nattrs = GB_WIRE_N(param_chunk_attrs),
    .tensors = param_data, .ntensors = GB_WIRE_N(param_data)};

static const gb_wire_attr_spec param_end_attrs[] = {
    P_VERSION, P_TOTAL,
    GB_WIRE_INT(gb_msg_param, crc, 1, 0, UINT32_MAX, 0, "CRC-32C of the version's bytes"),
    P_SERIAL};

const gb_wire_schema gb_schema_param_end = {
    .name = "param_end", .type = GB_MSG_PARAM_END,
    .doc = "The publisher to the service, forwarded on PUB once the version verified: all bytes "
           "sent.",
    .attrs = param_end_attrs, .nattrs = GB_WIRE_N(param_end_attrs)};

const gb_wire_schema gb_schema_param_info_req = {
    .name = "param_info_req", .type = GB_MSG_PARAM_INFO_REQ,
    .doc = "A subscriber asks the service (DEALER to ROUTER) for its latest version; answered by "
           "`param_info`."};

static const gb_wire_attr_spec param_info_attrs[] = {
    GB_WIRE_INT(gb_msg_param, version, 1, -1, INT64_MAX, 0,
                "the latest version, -1 when the service has none (status GB_ENOTFOUND)"),
    GB_WIRE_INT(gb_msg_param, total, 0, 0, INT64_MAX, 0, "its bytes"),
    GB_WIRE_INT(gb_msg_param, chunk, 0, 1, GB_PARAM_CHUNK_MAX, 0,
                "its chunk bytes (required with status 0)"),
    GB_WIRE_INT(gb_msg_param, crc, 0, 0, UINT32_MAX, 0, "its CRC-32C"),
    GB_WIRE_INT(gb_msg_param, serial, 0, 0, INT64_MAX, 0, "its serial"),
    GB_WIRE_INT(gb_msg_param, incoming, 1, 0, INT64_MAX, 0,
                "the serial of the version the service is receiving, 0: none"),
};
static const gb_wire_tensor_spec param_info_tensors[] = {
    P_BYTES("layout", 0, "with status 0: " LAYOUT_DOC)};

const gb_wire_schema gb_schema_param_info = {
    .name = "param_info", .type = GB_MSG_PARAM_INFO,
    .doc = "The service's answer to `param_info_req`: its latest version's description.",
    .attrs = param_info_attrs, .nattrs = GB_WIRE_N(param_info_attrs),
    .tensors = param_info_tensors, .ntensors = GB_WIRE_N(param_info_tensors)};

static const gb_wire_attr_spec param_fetch_attrs[] = {
    GB_WIRE_INT(gb_msg_param, version, 1, INT64_MIN, INT64_MAX, 0, "the version wanted"),
    GB_WIRE_INT(gb_msg_param, offset, 1, INT64_MIN, INT64_MAX, 0,
                "where its bytes start (past the end: answered GB_ENOTFOUND)"),
    GB_WIRE_INT(gb_msg_param, length, 1, INT64_MIN, INT64_MAX, 0,
                "how many bytes (1..the service's chunk bound, else answered GB_ENOTFOUND)"),
};

const gb_wire_schema gb_schema_param_fetch = {
    .name = "param_fetch", .type = GB_MSG_PARAM_FETCH,
    .doc = "A subscriber fetches bytes of the latest version (missed chunks, a late join); "
           "answered by `param_data`.",
    .attrs = param_fetch_attrs, .nattrs = GB_WIRE_N(param_fetch_attrs)};

static const gb_wire_attr_spec param_data_attrs[] = {
    GB_WIRE_INT(gb_msg_param, version, 1, -1, INT64_MAX, 0,
                "the version (with status GB_ENOTFOUND: the service's latest, -1: none)"),
    P_OFFSET("where the bytes start (with GB_ENOTFOUND: as asked, 0 when that was negative)"),
};
static const gb_wire_tensor_spec param_data_tensors[] = {
    P_BYTES("data", 0, "the bytes (with status 0)")};

const gb_wire_schema gb_schema_param_data = {
    .name = "param_data", .type = GB_MSG_PARAM_DATA,
    .doc = "The service's answer to `param_fetch`; status GB_ENOTFOUND: that version is gone, "
           "start over from `param_info`.",
    .attrs = param_data_attrs, .nattrs = GB_WIRE_N(param_data_attrs),
    .tensors = param_data_tensors, .ntensors = GB_WIRE_N(param_data_tensors)};

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
    GB_WIRE_INT(gb_msg_reg_join, again, 0, -1, INT32_MAX, -1,
                "the index of a slot the joiner held and asks for again (its worker died and is "
                "started again: the next incarnation), asked as that slot's identity; -1 or "
                "absent: a new slot"),
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
    TEXT_TENSOR("key", 0, "the slot's own key pair, \"<public> <secret>\" (Z85), in a run with "
                "identities"),
    TEXT_TENSOR("identities", 0, "the run's identities and their public keys (keys/identities)"),
};

const gb_wire_schema gb_schema_reg_joined = {
    .name = "reg_joined", .type = GB_MSG_REG_REPLY,
    .doc = "The launcher's answer to `reg_join` when it gives a slot (status 0); a refusal is a "
           "`reg_reply` with status != 0 and nothing else.",
    .attrs = reg_joined_attrs, .nattrs = GB_WIRE_N(reg_joined_attrs),
    .tensors = reg_joined_tensors, .ntensors = GB_WIRE_N(reg_joined_tensors)};

const gb_wire_schema *const gb_wire_runtime_schemas[] = {
    &gb_schema_infer_request, &gb_schema_infer_reply,  &gb_schema_metrics,
    &gb_schema_sample,
    &gb_schema_param_begin,  &gb_schema_param_chunk,    &gb_schema_param_end,
    &gb_schema_param_info_req, &gb_schema_param_info,   &gb_schema_param_fetch,
    &gb_schema_param_data,
    &gb_schema_reg_register, &gb_schema_reg_unregister, &gb_schema_reg_lookup,
    &gb_schema_reg_reply,    &gb_schema_reg_join,       &gb_schema_reg_joined,
    &gb_schema_run_watch,    &gb_schema_run_state,
};

const int gb_wire_runtime_nschemas = GB_WIRE_N(gb_wire_runtime_schemas);
