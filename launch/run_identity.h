/* launch/run_identity.h: each worker of a run speaks as itself (issue 35): the launcher mints
 * one key pair a worker slot, and every process of the run proves its own to the others
 * (runtime/streams/curve.h: CURVE on tcp, PLAIN on ipc, the ZAP User-Id on every message).
 * defines: gb_run_identities_on, gb_run_identities_open, gb_run_identity_attach */
#ifndef GB_LAUNCH_RUN_IDENTITY_H
#define GB_LAUNCH_RUN_IDENTITY_H

#include "runtime/base/error.h"
#include "runtime/config/config.h"
#include "runtime/streams/curve.h"

/* 1 when cfg's run gives its workers identities: tcp with CURVE, or ipc unless streams.curve is
 * off (and this libzmq has CURVE, whose key derivation the ipc tokens use). */
int gb_run_identities_on(const gb_config *cfg);

/* The launcher's side: creates run_dir/keys when absent (a fresh run, or a resume of a run made
 * before identities), mints a key pair for every worker slot cfg can start or admit (a resume
 * keeps the ones there) and attaches zctx as the launcher. *out stays NULL when
 * gb_run_identities_on(cfg) is 0. Returns 0 or the codes of curve.h. */
int gb_run_identities_open(const gb_config *cfg, const char *run_dir, void *zctx, gb_curve **out,
                           gb_error *err);

/* A worker's side: attaches zctx as role/index with its own key pair from keys_dir. Returns 0 or
 * the codes of gb_curve_identity_attach. */
int gb_run_identity_attach(gb_curve **out, void *zctx, const char *keys_dir, int role, int index,
                           gb_error *err);

#endif
