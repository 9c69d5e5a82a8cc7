/*
 * The dispatcher's counters, one row each. The core counts them in struct dispatcher_stats, the shell copies them
 * into the gateway's shared metrics region and /metrics renders them: all three are derived from this table, so a
 * new counter is one row here and the line in the core that counts it.
 *
 * X(field, type, metric, labels, help):
 *   field   the member of struct dispatcher_stats (DC_<field> its index)
 *   type    counter (counts since the dispatcher started) or gauge (the value of the moment, set by core_stats)
 *   metric  its Prometheus name, or NULL for one the core keeps for its logs and tests only
 *   labels  the sample's labels, "" for none; the rows of one labelled family stand next to each other
 *   help    what it counts (the HELP text of the family's first row)
 */
#ifndef VTS_DISPATCH_COUNTERS_H
#define VTS_DISPATCH_COUNTERS_H

/* The help of vts_dispatch_shed_total, whose four rows are one family. */
#define DC_SHED_HELP_                                                                                        \
  "Requests answered 503 service_unavailable with Retry-After instead of waiting for a fetcher, by cause: "  \
  "arrival (the queue could not serve it before its deadline), queued (that became clear while it waited), " \
  "deadline (it waited to its deadline), batch (a batch item that yielded, put back for later)."

#define DISPATCHER_COUNTERS(X)                                                                                      \
  X(requests, counter, NULL, "", "Worker requests received.")                                                       \
  X(cache_hits, counter, "vts_cache_hits_total", "", "Transcript cache hits (dispatcher cache).")                   \
  X(cache_misses, counter, "vts_cache_misses_total", "", "Transcript cache misses.")                                \
  X(cache_bytes, gauge, "vts_cache_bytes", "", "Bytes held by the dispatcher cache.")                               \
  X(cache_entries, gauge, "vts_cache_entries", "", "Entries in the dispatcher cache.")                              \
  X(cache_evictions, counter, NULL, "", "Entries the dispatcher cache evicted.")                                    \
  X(not_modified, counter, "vts_dispatch_not_modified_total", "",                                                   \
    "Revalidations answered 304 from the dispatcher's cache: If-None-Match named the cached answer's ETag.")        \
  X(coalesced, counter, "vts_coalesced_requests_total", "", "Requests that joined a job already running.")          \
  X(jobs_created, counter, "vts_jobs_total", "kind=\"captions\"", "Jobs started, by kind.")                         \
  X(speech_jobs, counter, "vts_jobs_total", "kind=\"speech\"", "Jobs started, by kind.")                            \
  X(jobs_queued, gauge, "vts_jobs_queued", "", "Jobs waiting for an idle fetcher.")                                 \
  X(jobs_in_flight, gauge, "vts_jobs_in_flight", "", "Jobs held by fetchers.")                                      \
  X(speech_in_flight, gauge, "vts_speech_jobs_in_flight", "",                                                       \
    "Speech jobs held by fetchers (part of vts_jobs_in_flight).")                                                   \
  X(fetchers_connected, gauge, "vts_fetchers_connected", "", "Fetcher processes connected to the dispatcher.")      \
  X(fetchers_idle, gauge, "vts_fetchers_idle", "", "Connected fetchers waiting for a job.")                         \
  X(outcome_ok, counter, NULL, "", "Jobs finished with a transcript.")                                              \
  X(outcome_not_available, counter, NULL, "", "Jobs finished: not available.")                                      \
  X(outcome_upstream_failed, counter, NULL, "", "Jobs finished: the platform failed.")                              \
  X(outcome_internal, counter, NULL, "", "Jobs finished: an internal failure.")                                     \
  X(queue_timeouts, counter, NULL, "", "Jobs no fetcher took before their deadline.")                               \
  X(run_timeouts, counter, NULL, "", "Jobs a fetcher held past their deadline.")                                    \
  X(deadline_expired, counter, "vts_job_deadline_expired_total", "",                                                \
    "Jobs failed at their deadline.") /* queue_timeouts + run_timeouts, summed by core_stats */                     \
  X(fetcher_lost, counter, "vts_fetchers_lost_total", "", "Fetcher connections that dropped while holding a job.")  \
  X(protocol_errors, counter, "vts_dispatch_protocol_errors_total", "",                                             \
    "Malformed or out-of-order messages on the jobs link.")                                                         \
  X(late_results, counter, NULL, "", "Results for jobs that had already failed.")                                   \
  X(jobs_declined, counter, "vts_dispatch_jobs_declined_total", "",                                                 \
    "Jobs a busy fetcher gave back unrun; each went first in line for another fetcher.")                            \
  X(results_refused, counter, "vts_dispatch_results_refused_total", "",                                             \
    "Fetcher results refused because their body was not what the job asked for (the job failed, nothing "           \
    "cached).")                                                                                                     \
  X(fetchers_refused, counter, "vts_dispatch_fetchers_refused_total", "",                                           \
    "Fetcher connections closed at once because VTS_JOBS_MAX_FETCHERS were connected.")                             \
  X(rejected_full, counter, "vts_dispatch_rejected_full_total", "",                                                 \
    "Requests refused because the dispatcher's job table was full.")                                                \
  X(shed_arrival, counter, "vts_dispatch_shed_total", "cause=\"arrival\"", DC_SHED_HELP_)                           \
  X(shed_queued, counter, "vts_dispatch_shed_total", "cause=\"queued\"", DC_SHED_HELP_)                             \
  X(shed_deadline, counter, "vts_dispatch_shed_total", "cause=\"deadline\"", DC_SHED_HELP_)                         \
  X(shed_batch, counter, "vts_dispatch_shed_total", "cause=\"batch\"", DC_SHED_HELP_)                               \
  X(redis_hits, counter, "vts_dispatch_redis_hits_total", "", "Jobs answered from the transcript cache in Redis.")  \
  X(claims_won, counter, "vts_dispatch_claims_won_total", "",                                                       \
    "Jobs this gateway fetched for every gateway (claim won in Redis).")                                            \
  X(claims_waited, counter, "vts_dispatch_claims_waited_total", "", "Jobs that waited on another gateway's claim.") \
  X(claim_takeovers, counter, "vts_dispatch_claim_takeovers_total", "",                                             \
    "Jobs fetched here because the gateway holding the claim went away without a result.")                          \
  X(jobs_waiting, gauge, "vts_jobs_waiting", "", "Jobs asking Redis or waiting on another gateway's claim.")        \
  X(store_calls, gauge, "vts_jobs_store_calls", "",                                                                 \
    "Batch job store calls handed to the dispatcher's store thread and not yet answered on its loop.")              \
  X(webhooks_delivered, counter, "vts_webhook_deliveries_total", "outcome=\"delivered\"",                           \
    "Webhook tries of batch jobs, by outcome: delivered (a 2xx), failed (tried again later), given_up (the last).") \
  X(webhooks_failed, counter, "vts_webhook_deliveries_total", "outcome=\"failed\"",                                 \
    "Webhook tries of batch jobs, by outcome: delivered (a 2xx), failed (tried again later), given_up (the last).") \
  X(webhooks_given_up, counter, "vts_webhook_deliveries_total", "outcome=\"given_up\"",                             \
    "Webhook tries of batch jobs, by outcome: delivered (a 2xx), failed (tried again later), given_up (the last).") \
  X(link_handshake_failures, counter, "vts_link_handshake_failures_total", "",                                      \
    "Jobs link TLS handshakes that failed here: a fetcher certificate refused (another CA, the wrong role, none), " \
    "a refusal of ours a fetcher told, or another TLS error. Counted by the shell from nng's listener statistics.")

#define DISPATCHER_COUNTER_ENUM_(field, type, metric, labels, help) DC_##field,
/* A counter's index; DC__COUNT is how many there are. */
enum dispatcher_counter { DISPATCHER_COUNTERS(DISPATCHER_COUNTER_ENUM_) DC__COUNT };
#undef DISPATCHER_COUNTER_ENUM_

/* Registers the rows as the dispatcher's family of the shared metrics (master, before fork). */
void counters_metrics_register(void);

#endif
