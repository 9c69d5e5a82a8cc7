/*
 * One fetcher process: its resource limits, the runner of one job (deadline, watchdog, captions flow, result), and
 * the job loop that pulls work from every dispatcher of VTS_JOBS_URL (peers.h, proto.h):
 *
 *   READY to each dispatcher -> the first JOB -> run it -> RESULT to its dispatcher (also meaning idle) -> ...
 *
 * A process holds one job at a time: a job that reaches it while it is busy is given straight back (DECLINE).
 */
#ifndef VTS_JOB_H
#define VTS_JOB_H

#include <stddef.h>

#include "common/config.h"
#include "proto/proto.h"

/*
 * Sets the process limits of a fetcher: no core files, and the address space capped at
 * VTS_FETCHER_MAX_MEMORY_MB (skipped under AddressSanitizer, which reserves terabytes of shadow memory).
 * Call once at the start of the process that runs jobs. Returns 0, or -errno.
 */
int job_limits_init(const struct vts_config *cfg);

struct job_runner;

/* Creates what jobs need (upstream client, platform flow). Returns 0, -EINVAL (err names the variable) or -ENOMEM. */
int job_runner_new(const struct vts_config *cfg, struct job_runner **out, char *err, size_t errlen);
void job_runner_free(struct job_runner *r);

/*
 * Runs one job under its deadline (job->deadline_ms from now; 0 means VTS_JOB_TIMEOUT_MS) and fills res. A watchdog
 * kills the process when the job overruns its deadline by VTS_FETCHER_WATCHDOG_GRACE_MS. res->body borrows from the
 * runner and is valid until the next call.
 */
void job_runner_run(struct job_runner *r, const struct proto_job *job, struct proto_result *res);

/*
 * Whether job should go back to its dispatcher unrun: VTS_EGRESS_DECLINE is set, the job was given back fewer than
 * VTS_EGRESS_MAX_DECLINES times, and no egress of this process holds a unit before the job's deadline (another
 * fetcher may). Counts the decline for the metrics of the next result.
 */
int job_runner_declines(struct job_runner *r, const struct proto_job *job);

/*
 * Serves jobs from the dispatchers of cfg->jobs_url until SIGTERM or SIGINT: an idle process stops at once, a busy
 * one finishes its job and delivers the result first. Blocks both signals in the calling thread (call it before any
 * other thread exists). Returns 0 after a requested stop, or a negative error when the socket cannot be set up.
 */
int job_loop_run(const struct vts_config *cfg, struct job_runner *r);

#endif
