/*
 * The operator interface: every VTS_* environment variable, validated at start. A bad value stops the program with
 * one line naming the variable. Each program loads the whole table; each uses the part it needs.
 */
#ifndef VTS_CONFIG_H
#define VTS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONFIG_STR_MAX 1024

struct vts_config {
  char listen_host[64];                        /* VTS_LISTEN host part */
  int listen_port;                             /* VTS_LISTEN port part */
  int64_t workers;                             /* VTS_WORKERS, 0 means one per CPU */
  char jobs_url[CONFIG_STR_MAX];               /* VTS_JOBS_URL */
  char jobs_tls_ca[CONFIG_STR_MAX];            /* VTS_JOBS_TLS_CA: PEM file of the CA both link ends trust */
  char jobs_tls_cert[CONFIG_STR_MAX];          /* VTS_JOBS_TLS_CERT: PEM file of this end's certificate */
  char jobs_tls_key[CONFIG_STR_MAX];           /* VTS_JOBS_TLS_KEY: PEM file of this end's private key */
  bool jobs_insecure;                          /* VTS_JOBS_INSECURE: plain tcp:// allowed off loopback */
  int64_t jobs_max_fetchers;                   /* VTS_JOBS_MAX_FETCHERS: fetcher connections per dispatcher */
  int64_t jobs_resolve_s;                      /* VTS_JOBS_RESOLVE_S: a fetcher re-resolves VTS_JOBS_URL this often */
  char keys_file[CONFIG_STR_MAX];              /* VTS_KEYS_FILE */
  char state_dir[CONFIG_STR_MAX];              /* VTS_STATE_DIR */
  char redis_url[CONFIG_STR_MAX];              /* VTS_REDIS_URL, empty when unset */
  char redis_cache_url[CONFIG_STR_MAX];        /* VTS_REDIS_CACHE_URL: the transcript cache's Redis, "" for redis_url */
  bool rate_limit_fail_closed;                 /* VTS_RATE_LIMIT_FAIL_CLOSED */
  int64_t rate_limit;                          /* VTS_RATE_LIMIT */
  int64_t rate_window_s;                       /* VTS_RATE_WINDOW_S */
  int64_t monthly_quota;                       /* VTS_MONTHLY_QUOTA */
  int64_t cache_ttl_s;                         /* VTS_CACHE_TTL_S */
  int64_t negative_ttl_s;                      /* VTS_NEGATIVE_TTL_S */
  int64_t cache_max_mb;                        /* VTS_CACHE_MAX_MB */
  int64_t job_timeout_ms;                      /* VTS_JOB_TIMEOUT_MS */
  int64_t speech_timeout_ms;                   /* VTS_SPEECH_TIMEOUT_MS */
  int64_t speech_max_concurrent;               /* VTS_SPEECH_MAX_CONCURRENT */
  int64_t speech_max_seconds;                  /* VTS_SPEECH_MAX_SECONDS */
  char upstream_url[CONFIG_STR_MAX];           /* VTS_UPSTREAM_URL */
  char upstream_proxy[CONFIG_STR_MAX];         /* VTS_UPSTREAM_PROXY, comma-separated, empty when unset */
  char innertube_clients[CONFIG_STR_MAX];      /* VTS_INNERTUBE_CLIENTS */
  char client_profiles[CONFIG_STR_MAX];        /* VTS_CLIENT_PROFILES, a JSON file path, empty when unset */
  char pot_provider_url[CONFIG_STR_MAX];       /* VTS_POT_PROVIDER_URL: the PO-token provider, empty when none */
  int64_t pot_timeout_ms;                      /* VTS_POT_TIMEOUT_MS: one provider request's own deadline */
  int64_t upstream_attempts;                   /* VTS_UPSTREAM_ATTEMPTS: egress attempts of a blocked job */
  int64_t proxy_rest_ms;                       /* VTS_PROXY_REST_MS: first cool-down of a blocked proxy */
  int64_t egress_rate;                         /* VTS_EGRESS_RATE: platform requests an hour per egress, 0 unpaced */
  int64_t egress_burst;                        /* VTS_EGRESS_BURST: of those, how many at once */
  bool egress_decline;                         /* VTS_EGRESS_DECLINE: give a job back when every budget is spent */
  bool speech_fallback;                        /* VTS_SPEECH_FALLBACK */
  char speech_engine[32];                      /* VTS_SPEECH_ENGINE: pocketsphinx | openai */
  char speech_url[CONFIG_STR_MAX];             /* VTS_SPEECH_URL */
  char speech_api_key[CONFIG_STR_MAX];         /* VTS_SPEECH_API_KEY */
  char speech_model[128];                      /* VTS_SPEECH_MODEL: the openai engine's model */
  char pocketsphinx_model_dir[CONFIG_STR_MAX]; /* VTS_POCKETSPHINX_MODEL_DIR: the embedded engine's acoustic model */
  char env[64];                                /* VTS_ENV */
  char metrics_listen[128];                    /* VTS_METRICS_LISTEN, empty disables */
  int64_t header_timeout_ms;                   /* VTS_HEADER_TIMEOUT_MS */
  int64_t idle_timeout_ms;                     /* VTS_IDLE_TIMEOUT_MS */
  int64_t write_timeout_ms;                    /* VTS_WRITE_TIMEOUT_MS */
  int64_t max_conns;                           /* VTS_MAX_CONNS (per worker) */
  int64_t drain_timeout_ms;                    /* VTS_DRAIN_TIMEOUT_MS */
  char log_level[16];                          /* VTS_LOG_LEVEL */
  int64_t job_max_items;                       /* VTS_JOB_MAX_ITEMS: videos of one batch job */
  int64_t job_max_pages;                       /* VTS_JOB_MAX_PAGES: pages of a batch job's list read at most */
  int64_t jobs_max_open;                       /* VTS_JOBS_MAX_OPEN: open batch jobs of one key */
  int64_t jobs_max_stored_items;               /* VTS_JOBS_MAX_STORED_ITEMS: items one key's jobs keep, ended too */
  int64_t job_max_age_s;                       /* VTS_JOB_MAX_AGE_S: an item rationed this long fails */
  int64_t job_ttl_s;                           /* VTS_JOB_TTL_S: a finished job is kept this long */
  int64_t jobs_fetcher_share;                  /* VTS_JOBS_FETCHER_SHARE: % of the fetchers job items may use */
  char webhook_allow[CONFIG_STR_MAX];       /* VTS_WEBHOOK_ALLOW: addresses/ranges webhooks may reach beyond public */
  char mcp_allowed_origins[CONFIG_STR_MAX]; /* VTS_MCP_ALLOWED_ORIGINS: Origin values /mcp serves, comma-separated */
  int64_t webhook_retry_ms;                 /* VTS_WEBHOOK_RETRY_MS: the first delay between webhook tries */
  char sandbox[8];                          /* VTS_SANDBOX: on | warn | off, the fetcher's confinement */
  char fetcher_user[64];                    /* VTS_FETCHER_USER: the user a fetcher started as root becomes */
  int64_t fetcher_max_memory_mb;            /* VTS_FETCHER_MAX_MEMORY_MB: a fetcher's address space ceiling */
  char fetcher_webhook_ports[256];          /* VTS_FETCHER_WEBHOOK_PORTS: ports webhook receivers may use, or "any" */
};

/* The default of variable name as the table spells it (a string), or NULL for a name it does not hold. */
const char *config_default(const char *name);
/* The variable of the table whose name is nearest to name (fewest characters to insert, delete or change). */
const char *config_nearest(const char *name);
/*
 * Calls found(name, nearest, arg) for each VTS_* variable of env (an environ-style array) that no program of vts and
 * none of its scripts reads: a misspelt setting that would otherwise be ignored without a word. nearest is the known
 * variable nearest to it. Returns how many there were.
 */
size_t config_unknown_vars(char *const *env, void (*found)(const char *name, const char *nearest, void *arg),
                           void *arg);
/* Logs a warning ("unknown variable ignored", the variable and the nearest known one) for each of those. */
void config_warn_unknown(char *const *env);
/* Splits "HOST:PORT" into host (hostlen bytes with the NUL) and port. Returns 0, or -EINVAL. */
int config_parse_listen(const char *v, char *host, size_t hostlen, int *port);

/*
 * Fills cfg from the environment with defaults for unset variables. Returns 0, or -EINVAL with a one-line message
 * naming the variable in err.
 */
int config_load(struct vts_config *cfg, char *err, size_t errlen);

#endif
