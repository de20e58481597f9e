/* launch/joins.h: the launcher's side of `gearbox join`: which slot a worker from another host
 * gets, and what it is told (the run's config, metrics endpoint and identity). Answered on the
 * registry's thread (runtime/streams/registry.h, gb_registry_join_fn).
 * defines: gb_joins, gb_joins_init, gb_joins_answer, gb_joins_free, gb_joins_local
 *
 * Slots: role R (actors, policy workers, trainers) has count workers; the launcher starts the
 * first `R.local` itself (all when -1) and the joiners fill the rest in order. Once those are
 * taken, actors (never policy workers, whose number the actors' load balancing fixes) get slots
 * beyond count, up to actors.join_max, each used once: a joiner's index is never reused, so the
 * trainers' ledger and the metrics per actor process stay exact. A joined worker that leaves
 * keeps its slot (its counts stay in the run's totals); it is not replaced.
 *
 * A joined trainer's, policy worker's or relay's slot can be asked for again, by that slot's
 * identity, when its worker died and `gearbox join` starts it again: the same index and the
 * next incarnation; for a trainer the trainers' group moves to its next generation (run
 * control) so the others form it again with it. (A joined actor is not started again: a new
 * `gearbox join` gives the run another one, while no policy worker or trainer can be added.)
 *
 * Relays: with parameters.relay per_host the launcher runs relay 0 for its own host; a host
 * whose policy workers join runs its own relay (gearbox join starts it), which takes a relay
 * slot here: 1 .. policy.count, one per joining host at most. */
#ifndef GB_LAUNCH_JOINS_H
#define GB_LAUNCH_JOINS_H

#include "runtime/config/config.h"
#include "runtime/base/error.h"
#include "runtime/run/metrics.h"
#include "runtime/streams/registry.h"
#include "runtime/streams/runctl.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gb_joins {
    pthread_mutex_t lock;
    char *config; /* the resolved config as YAML */
    size_t config_len;
    char metrics[GB_REGISTRY_ENDPOINT_MAX];
    char run[GB_REGISTRY_ENDPOINT_MAX];
    int64_t actor_next, actor_end;   /* next free actor slot; end: count + join_max */
    int64_t policy_first, policy_next, policy_end;    /* the first joined policy slot, the
                                                          next free one; end: count */
    int64_t trainer_first, trainer_next, trainer_end; /* likewise for trainers */
    int *incarnation; /* [trainer.count + policy.count + relay_end] the last incarnation given
                         each trainer, policy worker and relay slot (in that order) */
    int64_t restarts;          /* joined slots asked for again so far (workers.restarted_joined
                                  in summary.json) */
    gb_runctl_server *runctl;  /* set by the caller: a joined trainer's restart moves the
                                  trainers' group to its next generation */
    gb_metrics_collector *mc;  /* set by the caller: the restarted trainer's incarnation is
                                  issued there, so that its reports are taken */
    int64_t relay_next, relay_end;   /* per_host relays: 1 .. policy.count; none without */
    int64_t joined;                  /* workers that joined so far */
    char *identities; /* RUN_DIR/keys/identities' text (a run with identities), else NULL */
    size_t identities_len;
} gb_joins;

/* How many workers of role (GB_ROLE_ACTOR/POLICY/TRAINER) the launcher starts itself. */
int64_t gb_joins_local(const gb_config *cfg, int role);

/* Relay indexes a run may have (0 the launcher's, then one per joining host): the metrics
 * collector expects this many; 0 without per_host relays. */
int64_t gb_joins_relays(const gb_config *cfg);

/* Writes cfg as YAML for the joiners and sets the slots; in a run with identities (RUN_DIR/keys/
 * identities, launch/run_identity.h) each slot is answered with its own key pair and the run's
 * identities, and nothing else of the keys folder. Returns 0, GB_ENOMEM, GB_ESYS. */
int gb_joins_init(gb_joins *j, const gb_config *cfg, const char *metrics_ep, const char *run,
                  gb_error *err);
void gb_joins_free(gb_joins *j);

/* gb_registry_join_fn with arg a gb_joins: a slot, or GB_EFULL / GB_EINVAL with why. */
int gb_joins_answer(void *arg, int role, int again, int proven, gb_registry_join_reply *out,
                    char *why, size_t cap);

#endif
