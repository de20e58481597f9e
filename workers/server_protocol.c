/* workers/server_protocol.c: the data server protocol's names: sampling modes and selectors
 * (workers/server_protocol.h); in the client library, which the server links. */
#include "workers/server_protocol.h"

#include <string.h>

static const char *const mode_names[GB_SERVE_MODES] = {"item", "window", "transition", "episode",
                                                       "epoch"};

int gb_serve_mode_parse(const char *name)
{
    if (!name || !name[0])
        return GB_SERVE_MODE_ITEM;
    for (int k = 0; k < GB_SERVE_MODES; k++)
        if (strcmp(name, mode_names[k]) == 0)
            return k;
    return -1;
}

const char *gb_serve_mode_name(int mode)
{
    return mode >= 0 && mode < GB_SERVE_MODES ? mode_names[mode] : "?";
}

/* As the config spells them (server.replay.selector), indexed by gb_selector_kind; kept here so
 * that the client needs no config code. */
static const char *const selector_names[GB_SERVE_SELECTOR_KINDS] = {"uniform", "weighted",
                                                                    "fifo", "lifo", "topk"};

const char *gb_serve_selector_name(int kind)
{
    return kind >= 0 && kind < GB_SERVE_SELECTOR_KINDS ? selector_names[kind] : NULL;
}

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
