/* replay/from_config.c: the replay options of an application config's replay section. */
#include "replay/from_config.h"

/* See from_config.h. */
void gb_replay_options_from_config(gb_replay_options *o, const gb_config_replay *c)
{
    o->capacity = c->capacity;
    o->max_size = c->max_size;
    o->remover = (gb_remover_kind)c->remover;
    o->max_times_sampled = c->max_times_sampled;
    o->selector = (gb_selector_kind)c->selector;
    o->extra_selectors = 0;
    for (int k = 0; k < c->extra_selectors.n; k++)
        if (c->extra_selectors.v[k] >= 0 && c->extra_selectors.v[k] < GB_REPLAY_SELECTORS)
            o->extra_selectors |= 1u << c->extra_selectors.v[k];
    o->alpha = c->alpha;
    o->beta = c->beta;
    o->default_priority = c->default_priority;
    o->min_size = c->min_size;
    o->samples_per_insert = c->samples_per_insert;
    o->error_buffer = c->error_buffer;
    o->timeout_s = c->timeout_s;
    o->huge_pages = c->huge_pages;
}
