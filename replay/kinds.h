/* replay/kinds.h: the replay's built-in kinds and their names, one home for both: removers,
 * selectors and dataset formats (replay/formats/). A leaf: no gearbox includes, nothing to link
 * (the name tables are static here), so the application config can read it to parse
 * trainer.replay.selector and friends (runtime/config/config_schema.c says why) and a client can
 * name kinds without the replay's code.
 * defines: gb_remover_kind, gb_selector_kind, gb_dataset_format, GB_REPLAY_REMOVERS,
 *          GB_REPLAY_SELECTORS, GB_DATASET_FORMATS, gb_remover_kind_names,
 *          gb_selector_kind_names, gb_dataset_format_names */
#ifndef GB_REPLAY_KINDS_H
#define GB_REPLAY_KINDS_H

#include <stddef.h>

/* Who leaves a full replay. */
typedef enum {
    GB_REMOVER_FIFO = 0,
    GB_REMOVER_LIFO = 1,
    GB_REMOVER_LOWEST_PRIORITY = 2,
    GB_REMOVER_MAX_TIMES_SAMPLED = 3,
    GB_REMOVER_NONE = 4, /* nothing is evicted: inserts wait for room (a queue) */
} gb_remover_kind;
#define GB_REPLAY_REMOVERS 5

/* Which items a sample draws (0..GB_REPLAY_SELECTORS-1; bit k of a selector mask is kind k). */
typedef enum {
    GB_SELECTOR_UNIFORM = 0,
    GB_SELECTOR_WEIGHTED = 1,
    GB_SELECTOR_FIFO = 2,
    GB_SELECTOR_LIFO = 3,
    GB_SELECTOR_TOPK = 4,
} gb_selector_kind;
#define GB_REPLAY_SELECTORS 5

/* The files a data server loads (server.dataset_format). */
typedef enum {
    GB_DATASET_GEARBOX = 0,
    GB_DATASET_D4RL = 1,
    GB_DATASET_MINARI = 2,
} gb_dataset_format;
#define GB_DATASET_FORMATS 3

/* The names, indexed by kind and NULL-terminated: the config's spelling, the wire's and the logs'.
 * Static so that a reader links nothing; unused copies are dropped by the compiler. */
static const char *const gb_remover_kind_names[GB_REPLAY_REMOVERS + 1] = {
    "fifo", "lifo", "lowest_priority", "max_times_sampled", "none", NULL};
static const char *const gb_selector_kind_names[GB_REPLAY_SELECTORS + 1] = {
    "uniform", "weighted", "fifo", "lifo", "topk", NULL};
static const char *const gb_dataset_format_names[GB_DATASET_FORMATS + 1] = {
    "gearbox", "d4rl", "minari", NULL};

#endif
