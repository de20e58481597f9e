/* runtime/base/team.h: a fork-join team of threads for a learner's arithmetic: a job of several
 * parts, which the caller and the team's helpers take one at a time until none is left; the
 * caller returns when every part is done. The caller takes parts too, so a job never waits for
 * a helper that the machine's other processes keep off a core: at worst the caller does every
 * part itself. Helpers wait for the next job spinning a few microseconds, then asleep on a
 * condition variable (a learner forks and joins a few times a millisecond; where other processes
 * need the cores a long spin would take their time).
 * defines: gb_team, gb_team_fn, gb_team_open, gb_team_threads, gb_team_run, gb_team_close */
#ifndef GB_RUNTIME_BASE_TEAM_H
#define GB_RUNTIME_BASE_TEAM_H

#include "runtime/base/error.h"

typedef struct gb_team gb_team;

/* One part of a job: part in [0, parts), on whichever thread took it. */
typedef void (*gb_team_fn)(void *arg, int part, int parts);

/* A team of n threads: the caller and n - 1 helpers (n >= 1). */
int gb_team_open(int n, gb_team **out, gb_error *err);

/* The team's threads (n of gb_team_open); 1 for NULL. */
int gb_team_threads(const gb_team *t);

/* fn(arg, p, parts) for every p in [0, parts), each once, on the caller's thread and the
 * helpers' (all on the caller's for a NULL team); returns when every part has returned. One job
 * at a time, from one thread. */
void gb_team_run(gb_team *t, int parts, gb_team_fn fn, void *arg);

/* Stops and joins the helpers (NULL: nothing). */
void gb_team_close(gb_team *t);

#endif
