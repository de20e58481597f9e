/* launch/joins.c: slots for workers that join a running run from other hosts (see joins.h). */
#include "launch/joins.h"

#include "runtime/base/log.h"
#include "runtime/streams/curve.h"
#include "runtime/streams/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t gb_joins_local(const gb_config *cfg, int role)
{
    const int64_t count = role == GB_ROLE_ACTOR    ? cfg->actors.count
                          : role == GB_ROLE_POLICY ? cfg->policy.count
                                                   : cfg->trainer.count;
    const int64_t local = role == GB_ROLE_ACTOR    ? cfg->actors.local
                          : role == GB_ROLE_POLICY ? cfg->policy.local
                                                   : cfg->trainer.local;
    return local < 0 ? count : local;
}

int64_t gb_joins_relays(const gb_config *cfg)
{
    return cfg->parameters.relay == GB_RELAY_PER_HOST ? 1 + cfg->policy.count : 0;
}

int gb_joins_init(gb_joins *j, const gb_config *cfg, const char *metrics_ep, const char *run,
                  gb_error *err)
{
    memset(j, 0, sizeof *j);
    FILE *f = open_memstream(&j->config, &j->config_len);
    if (!f)
        return gb_error_errno(err, "open_memstream");
    int bad = gb_config_write(cfg, f);
    if (fclose(f) != 0 || bad) {
        free(j->config);
        j->config = NULL;
        return gb_error_set(err, GB_ENOMEM, "joins: the config could not be written out");
    }
    snprintf(j->metrics, sizeof j->metrics, "%s", metrics_ep);
    snprintf(j->run, sizeof j->run, "%s", run);
    char path[2048];
    snprintf(path, sizeof path, "%s/%s/identities", run, GB_CURVE_KEYS_DIR);
    FILE *ids = fopen(path, "re"); /* absent: a run without identities */
    if (ids) {
        f = open_memstream(&j->identities, &j->identities_len);
        int c, bad = !f;
        while (!bad && (c = fgetc(ids)) != EOF)
            bad = fputc(c, f) == EOF;
        fclose(ids);
        if ((f && fclose(f) != 0) || bad) {
            free(j->config);
            free(j->identities);
            j->config = j->identities = NULL;
            return gb_error_set(err, GB_ENOMEM, "joins: %s could not be read", path);
        }
    }
    j->actor_next = gb_joins_local(cfg, GB_ROLE_ACTOR);
    j->actor_end = cfg->actors.count + cfg->actors.join_max;
    j->policy_next = j->policy_first = gb_joins_local(cfg, GB_ROLE_POLICY);
    j->policy_end = cfg->policy.count;
    j->trainer_next = j->trainer_first = gb_joins_local(cfg, GB_ROLE_TRAINER);
    j->trainer_end = cfg->trainer.count;
    j->relay_next = 1; /* relay 0 is the launcher's */
    j->relay_end = gb_joins_relays(cfg);
    j->incarnation = calloc((size_t)(j->trainer_end + j->policy_end + j->relay_end),
                            sizeof *j->incarnation);
    if (!j->incarnation) {
        free(j->config);
        free(j->identities);
        j->config = j->identities = NULL;
        return gb_error_set(err, GB_ENOMEM, "joins: out of memory");
    }
    pthread_mutex_init(&j->lock, NULL);
    return 0;
}

void gb_joins_free(gb_joins *j)
{
    if (!j->config)
        return;
    free(j->config);
    free(j->identities);
    free(j->incarnation);
    j->config = j->identities = NULL;
    pthread_mutex_destroy(&j->lock);
}

/* The slot's own key pair, "<public> <secret>", and the run's identities into out: what a joined
 * host holds of the run's keys. Returns 0 or GB_ENOTFOUND with why. */
static int slot_key(const gb_joins *j, int role, gb_registry_join_reply *out, char *why,
                    size_t cap)
{
    char kd[2048], name[GB_CURVE_ID_MAX], path[2200], pub[GB_CURVE_KEY_Z85],
        sec[GB_CURVE_KEY_Z85];
    gb_error e = {0};
    snprintf(kd, sizeof kd, "%s/%s", j->run, GB_CURVE_KEYS_DIR);
    snprintf(name, sizeof name, "%s/%d", gb_role_name(role), out->index);
    int rc = gb_curve_identity_file(kd, name, path, sizeof path, &e);
    if (rc == 0)
        rc = gb_curve_keypair_read(path, pub, sec, &e);
    if (rc == 0) {
        snprintf(out->key, sizeof out->key, "%s %s", pub, sec);
        out->identities = j->identities;
        out->identities_len = j->identities_len;
    } else {
        snprintf(why, cap, "no key pair for %s: %s", name, e.msg);
        rc = GB_ENOTFOUND;
    }
    explicit_bzero(sec, sizeof sec);
    return rc;
}

/* A joined slot of role asked for again (its worker restarted by its gearbox join): the next
 * incarnation, issued to the metrics collector, and for a trainer the trainers' group's next
 * generation. Under j->lock. Returns 0 or GB_EINVAL with why. */
static int slot_again(gb_joins *j, int role, int again, int proven, gb_registry_join_reply *out,
                      char *why, size_t cap)
{
    gb_error e = {0};
    if (role != GB_ROLE_TRAINER && role != GB_ROLE_POLICY && role != GB_ROLE_RELAY) {
        snprintf(why, cap, "only a joined trainer's, policy worker's or relay's slot is asked "
                 "for again, not a %s's", gb_role_name(role));
        return GB_EINVAL;
    }
    int64_t first = role == GB_ROLE_TRAINER  ? j->trainer_first
                    : role == GB_ROLE_POLICY ? j->policy_first
                                             : 1; /* relays: relay 0 is the launcher's */
    int64_t next = role == GB_ROLE_TRAINER  ? j->trainer_next
                   : role == GB_ROLE_POLICY ? j->policy_next
                                            : j->relay_next;
    int *inc = role == GB_ROLE_TRAINER  ? j->incarnation
               : role == GB_ROLE_POLICY ? j->incarnation + j->trainer_end
                                        : j->incarnation + j->trainer_end + j->policy_end;
    if (again < first || again >= next) {
        snprintf(why, cap, "%s %d is no slot this run gave a joiner", gb_role_name(role), again);
        return GB_EINVAL;
    }
    if (!proven) {
        snprintf(why, cap, "%s %d's slot is asked for again only as that worker (its key pair)",
                 gb_role_name(role), again);
        return GB_EINVAL;
    }
    out->index = again;
    out->incarnation = ++inc[again];
    if (j->mc && gb_metrics_collector_issue(j->mc, role, again, out->incarnation, &e)) {
        snprintf(why, cap, "%s", e.msg);
        return GB_EINVAL;
    }
    j->restarts++;
    GB_INFO("%s %d (joined from another host) started again by its gearbox join: incarnation "
            "%d", gb_role_name(role), again, out->incarnation);
    if (role == GB_ROLE_TRAINER && j->runctl)
        GB_INFO("trainers: the group re-forms as generation %lld with the restarted joined "
                "trainer %d", (long long)gb_runctl_server_next_trainer_group(j->runctl), again);
    return 0;
}

/* A new slot of role, under j->lock. Returns 0, GB_EINVAL or GB_EFULL with why. */
static int new_slot(gb_joins *j, int role, gb_registry_join_reply *out, char *why, size_t cap)
{
    if (role != GB_ROLE_ACTOR && role != GB_ROLE_POLICY && role != GB_ROLE_TRAINER &&
        !(role == GB_ROLE_RELAY && j->relay_end > 0)) {
        snprintf(why, cap, "only actors, policy workers, trainers and (with parameters.relay "
                 "per_host) their hosts' relays join a run, not %s", gb_role_name(role));
        return GB_EINVAL;
    }
    int64_t *next = role == GB_ROLE_ACTOR     ? &j->actor_next
                    : role == GB_ROLE_POLICY  ? &j->policy_next
                    : role == GB_ROLE_TRAINER ? &j->trainer_next
                                              : &j->relay_next;
    int64_t end = role == GB_ROLE_ACTOR     ? j->actor_end
                  : role == GB_ROLE_POLICY  ? j->policy_end
                  : role == GB_ROLE_TRAINER ? j->trainer_end
                                            : j->relay_end;
    if (*next >= end) {
        snprintf(why, cap, "no %s slot left: all %lld are taken (%s)", gb_role_name(role),
                 (long long)end, role == GB_ROLE_ACTOR     ? "actors.count + actors.join_max"
                                 : role == GB_ROLE_POLICY  ? "policy.count"
                                 : role == GB_ROLE_TRAINER ? "trainer.count"
                                                           : "1 + policy.count relays");
        return GB_EFULL;
    }
    out->index = (int)(*next)++;
    out->incarnation = 0;
    j->joined++;
    return 0;
}

int gb_joins_answer(void *arg, int role, int again, int proven, gb_registry_join_reply *out,
                    char *why, size_t cap)
{
    gb_joins *j = arg;
    int rc;
    pthread_mutex_lock(&j->lock);
    if (again < 0)
        rc = new_slot(j, role, out, why, cap);
    else
        rc = slot_again(j, role, again, proven, out, why, cap);
    pthread_mutex_unlock(&j->lock);
    if (rc)
        return rc;
    snprintf(out->metrics, sizeof out->metrics, "%s", j->metrics);
    snprintf(out->run, sizeof out->run, "%s", j->run);
    out->config = j->config;
    out->config_len = j->config_len;
    return j->identities ? slot_key(j, role, out, why, cap) : 0;
}
