/* tests/launch/test_joins.c: the launcher's slots for `gearbox join` (launch/joins.h): new slots
 * in order up to each role's count, and a slot asked for again when its worker died: a joined
 * trainer's, policy worker's or relay's, by that worker (proven), gets the next incarnation;
 * an actor's, a slot the launcher kept or never gave, or an unproven ask is refused and
 * changes nothing. */
#include "launch/joins.h"
#include "runtime/streams/wire.h"
#include "test.h"

#include <string.h>

static const char *text = "experiment: {name: joins}\n"
                          "env: {name: CartPole-v1}\n"
                          "actors: {count: 2, local: 1, join_max: 1}\n"
                          "policy: {count: 2, local: 0}\n"
                          "trainer: {count: 4, local: 1, algorithm: {name: ppo},\n"
                          "          rendezvous: {store: registry}}\n"
                          "parameters: {relay: per_host}\n"
                          "streams: {transport: tcp}\n";

static int ask(gb_joins *j, int role, int again, int proven, gb_registry_join_reply *out)
{
    char why[256] = "";
    memset(out, 0, sizeof *out);
    int rc = gb_joins_answer(j, role, again, proven, out, why, sizeof why);
    if (rc)
        CHECK(why[0] != '\0'); /* a refusal says why */
    return rc;
}

int main(void)
{
    gb_config cfg;
    gb_config_marks *marks = NULL;
    gb_error err = {0};
    CHECK_OK(gb_config_load_string(&cfg, &marks, "<t>", text, strlen(text), &err));
    CHECK_OK(gb_config_finish(&cfg, marks, &err));
    gb_config_marks_free(marks);
    gb_joins j;
    CHECK_OK(gb_joins_init(&j, &cfg, "tcp://10.0.0.1:1", "/nonexistent/run", &err));
    gb_registry_join_reply r;

    /* new slots: those the launcher left, in order, then none */
    CHECK(ask(&j, GB_ROLE_POLICY, -1, 1, &r) == 0 && r.index == 0 && r.incarnation == 0);
    CHECK(ask(&j, GB_ROLE_POLICY, -1, 1, &r) == 0 && r.index == 1);
    CHECK(ask(&j, GB_ROLE_POLICY, -1, 1, &r) == GB_EFULL);
    CHECK(ask(&j, GB_ROLE_TRAINER, -1, 1, &r) == 0 && r.index == 1);
    CHECK(ask(&j, GB_ROLE_RELAY, -1, 1, &r) == 0 && r.index == 1);
    CHECK(ask(&j, GB_ROLE_ACTOR, -1, 1, &r) == 0 && r.index == 1); /* actor 0 is the launcher's */
    CHECK(j.joined == 5);

    /* asked again by that worker: the next incarnation each time */
    CHECK(ask(&j, GB_ROLE_POLICY, 1, 1, &r) == 0 && r.index == 1 && r.incarnation == 1);
    CHECK(ask(&j, GB_ROLE_POLICY, 1, 1, &r) == 0 && r.incarnation == 2);
    CHECK(ask(&j, GB_ROLE_POLICY, 0, 1, &r) == 0 && r.index == 0 && r.incarnation == 1);
    CHECK(ask(&j, GB_ROLE_RELAY, 1, 1, &r) == 0 && r.index == 1 && r.incarnation == 1);
    CHECK(ask(&j, GB_ROLE_TRAINER, 1, 1, &r) == 0 && r.index == 1 && r.incarnation == 1);
    CHECK(r.config == j.config && strcmp(r.metrics, "tcp://10.0.0.1:1") == 0);
    CHECK(j.restarts == 5 && j.joined == 5); /* a restart takes no new slot */

    /* refused, and nothing counted: not proven, an actor, slots never given or the launcher's */
    CHECK(ask(&j, GB_ROLE_POLICY, 0, 0, &r) == GB_EINVAL);
    CHECK(ask(&j, GB_ROLE_ACTOR, 1, 1, &r) == GB_EINVAL);
    CHECK(ask(&j, GB_ROLE_TRAINER, 0, 1, &r) == GB_EINVAL); /* trainer 0: the launcher's */
    CHECK(ask(&j, GB_ROLE_TRAINER, 2, 1, &r) == GB_EINVAL); /* not given yet */
    CHECK(ask(&j, GB_ROLE_RELAY, 0, 1, &r) == GB_EINVAL);   /* relay 0: the launcher's */
    CHECK(ask(&j, GB_ROLE_RELAY, 2, 1, &r) == GB_EINVAL);
    CHECK(ask(&j, GB_ROLE_POLICY, 2, 1, &r) == GB_EINVAL);
    CHECK(ask(&j, GB_ROLE_PARAMS, 0, 1, &r) == GB_EINVAL);
    CHECK(j.restarts == 5);
    /* the incarnations went on from where they were */
    CHECK(ask(&j, GB_ROLE_POLICY, 0, 1, &r) == 0 && r.incarnation == 2);
    CHECK(ask(&j, GB_ROLE_TRAINER, 1, 1, &r) == 0 && r.incarnation == 2);

    gb_joins_free(&j);
    return test_main_result();
}
