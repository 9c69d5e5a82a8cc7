/*
 * The gateway's supervisor (the process started as vts-gateway). It creates the shared-memory rate-limit table,
 * forks VTS_WORKERS HTTP workers and one dispatcher, replaces any child that dies (at once after a healthy run, with
 * a growing delay in a crash loop) and turns signals into orderly actions: SIGTERM/SIGINT drain the workers, then
 * stop the dispatcher; SIGHUP makes every worker reload the key file. It initialises no libuv loop, nng socket or
 * curl handle: those are not fork-safe and live only in the children.
 */
#ifndef VTS_MASTER_H
#define VTS_MASTER_H

#include "common/config.h"
#include "gateway/keys/keys.h"

/* Runs until stopped by a signal. keys is the validated key store (the master keeps it). Returns the exit status. */
int master_run(const struct vts_config *cfg, struct keystore *keys);

#endif
