/*
 * The dispatcher process: shared cache, coalescing, job queues, deadlines and the fetcher pool.
 *
 * Worker link (ipc, worker_url): a worker's request is a PROTO_JOB with job_id 0; the dispatcher answers it with a
 * PROTO_RESULT whose cache_ms is the shared entry's lifetime left, so a worker keeps a hot answer in its own cache
 * no longer than the shared entry lives.
 *
 * Fetcher link (tcp, cfg->jobs_url): a fetcher's every message (PROTO_READY, or PROTO_RESULT which also means idle)
 * is a request the dispatcher answers later with that fetcher's next PROTO_JOB.
 */
#ifndef VTS_DISPATCHER_H
#define VTS_DISPATCHER_H

#include <stdint.h>

#include "common/config.h"

/* Counters for metrics; gauges are values of the moment, the rest count since the dispatcher started. */
struct dispatcher_stats {
  uint64_t requests;           /* worker requests received */
  uint64_t cache_hits;         /* answered from the shared cache */
  uint64_t cache_misses;       /* needed a job (new or coalesced) */
  uint64_t coalesced;          /* joined a job already queued or running */
  uint64_t jobs_created;       /* captions jobs started */
  uint64_t speech_jobs;        /* jobs re-queued for speech recognition */
  uint64_t jobs_queued;        /* gauge: waiting for an idle fetcher (both queues) */
  uint64_t jobs_in_flight;     /* gauge: held by a fetcher */
  uint64_t speech_in_flight;   /* gauge: speech jobs held by a fetcher */
  uint64_t fetchers_connected; /* gauge */
  uint64_t fetchers_idle;      /* gauge */
  uint64_t outcome_ok;         /* jobs finished, by outcome */
  uint64_t outcome_not_available;
  uint64_t outcome_upstream_failed;
  uint64_t outcome_internal;
  uint64_t queue_timeouts;   /* no fetcher took the job in time */
  uint64_t run_timeouts;     /* a fetcher held the job past its deadline */
  uint64_t fetcher_lost;     /* a fetcher's connection dropped while it held a job */
  uint64_t protocol_errors;  /* malformed or out-of-order messages */
  uint64_t late_results;     /* results for jobs that had already failed */
  uint64_t jobs_declined;    /* jobs a busy fetcher gave back unrun: queued again, first in line */
  uint64_t results_refused;  /* OK results whose body was not a transcript: their jobs failed */
  uint64_t fetchers_refused; /* connections closed at once: VTS_JOBS_MAX_FETCHERS were connected */
  uint64_t rejected_full;    /* refused because VTS_DISPATCH_MAX_JOBS were pending */
  uint64_t cache_entries;    /* gauge */
  uint64_t cache_bytes;      /* gauge */
  uint64_t cache_evictions;
};

/*
 * Copies the counters of the dispatcher running in this process, as of its last loop turn (all zero when none
 * runs). Safe from any thread.
 */
void dispatcher_stats(struct dispatcher_stats *out);

/* Runs the dispatcher in the current (freshly forked) process until SIGTERM. Returns the exit status. */
int dispatcher_main(const struct vts_config *cfg, const char *worker_url);

#endif
