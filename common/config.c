#include "common/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/netaddr.h"
#include "common/util.h"

enum kind { K_STR, K_INT, K_BOOL, K_LISTEN };

/* One row per variable: the table is the single place that names a variable, its default and its bounds. */
struct var {
  const char *name;
  enum kind kind;
  size_t offset;
  size_t size; /* string capacity */
  const char *def;
  int64_t min, max;
  int secret; /* the value may hold credentials: a message never repeats it */
};

#define S(f, name, def) \
  { name, K_STR, offsetof(struct vts_config, f), sizeof(((struct vts_config *)0)->f), def, 0, 0, 0 }
/* A string that may hold credentials (a password in a URL, a key). */
#define SECRET_S(f, name, def) \
  { name, K_STR, offsetof(struct vts_config, f), sizeof(((struct vts_config *)0)->f), def, 0, 0, 1 }
#define I(f, name, def, lo, hi) \
  { name, K_INT, offsetof(struct vts_config, f), 0, def, lo, hi, 0 }
#define B(f, name, def) \
  { name, K_BOOL, offsetof(struct vts_config, f), 0, def, 0, 0, 0 }

/* The rows of this table are alike in shape: each is a variable of its own, as a table's rows are. */
static const struct var vars[] = {
    {"VTS_LISTEN", K_LISTEN, 0, 0, "0.0.0.0:8080", 0, 0, 0},
    S(jobs_url, "VTS_JOBS_URL", "tcp://127.0.0.1:7400"),
    S(jobs_tls_ca, "VTS_JOBS_TLS_CA", ""),
    S(jobs_tls_cert, "VTS_JOBS_TLS_CERT", ""),
    S(jobs_tls_key, "VTS_JOBS_TLS_KEY", ""),
    B(jobs_insecure, "VTS_JOBS_INSECURE", "false"),
    I(jobs_max_fetchers, "VTS_JOBS_MAX_FETCHERS", "1024", 1, 65536),
    I(jobs_resolve_s, "VTS_JOBS_RESOLVE_S", "10", 1, 3600),
    S(keys_file, "VTS_KEYS_FILE", "keys.db"),
    S(state_dir, "VTS_STATE_DIR", "state"),
    SECRET_S(redis_url, "VTS_REDIS_URL", ""),
    SECRET_S(redis_cache_url, "VTS_REDIS_CACHE_URL", ""),
    B(rate_limit_fail_closed, "VTS_RATE_LIMIT_FAIL_CLOSED", "false"),
    I(rate_limit, "VTS_RATE_LIMIT", "60", 1, 1000000000),
    I(rate_window_s, "VTS_RATE_WINDOW_S", "60", 1, 86400),
    I(monthly_quota, "VTS_MONTHLY_QUOTA", "10000", 1, 1000000000000),
    I(cache_ttl_s, "VTS_CACHE_TTL_S", "86400", 0, 31536000),
    I(negative_ttl_s, "VTS_NEGATIVE_TTL_S", "600", 0, 31536000),
    I(cache_max_mb, "VTS_CACHE_MAX_MB", "256", 0, 1048576),
    I(job_timeout_ms, "VTS_JOB_TIMEOUT_MS", "30000", 100, 3600000),
    I(speech_timeout_ms, "VTS_SPEECH_TIMEOUT_MS", "600000", 1000, 86400000),
    I(speech_max_concurrent, "VTS_SPEECH_MAX_CONCURRENT", "1", 1, 1024),
    I(speech_max_seconds, "VTS_SPEECH_MAX_SECONDS", "3600", 1, 86400),
    S(upstream_url, "VTS_UPSTREAM_URL", "https://www.youtube.com"),
    SECRET_S(upstream_proxy, "VTS_UPSTREAM_PROXY", ""),
    S(innertube_clients, "VTS_INNERTUBE_CLIENTS", "VISIONOS,ANDROID"),
    S(client_profiles, "VTS_CLIENT_PROFILES", ""),
    SECRET_S(pot_provider_url, "VTS_POT_PROVIDER_URL", ""),
    I(pot_timeout_ms, "VTS_POT_TIMEOUT_MS", "5000", 50, 60000),
    I(upstream_attempts, "VTS_UPSTREAM_ATTEMPTS", "3", 1, 16),
    I(proxy_rest_ms, "VTS_PROXY_REST_MS", "30000", 100, 86400000),
    I(egress_rate, "VTS_EGRESS_RATE", "900", 0, 3600000),
    I(egress_burst, "VTS_EGRESS_BURST", "30", 1, 100000),
    B(egress_decline, "VTS_EGRESS_DECLINE", "false"),
    B(speech_fallback, "VTS_SPEECH_FALLBACK", "false"),
    S(speech_engine, "VTS_SPEECH_ENGINE", "pocketsphinx"),
    SECRET_S(speech_url, "VTS_SPEECH_URL", ""),
    SECRET_S(speech_api_key, "VTS_SPEECH_API_KEY", ""),
    S(speech_model, "VTS_SPEECH_MODEL", "whisper-1"),
    S(pocketsphinx_model_dir, "VTS_POCKETSPHINX_MODEL_DIR", "/usr/share/pocketsphinx/model/en-us/en-us"),
    S(env, "VTS_ENV", "development"),
    S(metrics_listen, "VTS_METRICS_LISTEN", "127.0.0.1:9464"),
    I(header_timeout_ms, "VTS_HEADER_TIMEOUT_MS", "10000", 100, 600000),
    I(idle_timeout_ms, "VTS_IDLE_TIMEOUT_MS", "60000", 100, 3600000),
    I(write_timeout_ms, "VTS_WRITE_TIMEOUT_MS", "30000", 100, 3600000),
    I(max_conns, "VTS_MAX_CONNS", "16384", 1, 1000000),
    I(drain_timeout_ms, "VTS_DRAIN_TIMEOUT_MS", "35000", 0, 600000),
    S(log_level, "VTS_LOG_LEVEL", "info"),
    I(workers, "VTS_WORKERS", "0", 0, 256),
    I(job_max_items, "VTS_JOB_MAX_ITEMS", "5000", 1, 100000),
    I(job_max_pages, "VTS_JOB_MAX_PAGES", "100", 1, 100000),
    I(jobs_max_open, "VTS_JOBS_MAX_OPEN", "10", 1, 100000),
    I(jobs_max_stored_items, "VTS_JOBS_MAX_STORED_ITEMS", "10000", 1, 10000000),
    I(job_max_age_s, "VTS_JOB_MAX_AGE_S", "86400", 1, 31536000),
    I(job_ttl_s, "VTS_JOB_TTL_S", "604800", 1, 31536000),
    I(jobs_fetcher_share, "VTS_JOBS_FETCHER_SHARE", "50", 0, 100),
    S(webhook_allow, "VTS_WEBHOOK_ALLOW", ""),
    S(mcp_allowed_origins, "VTS_MCP_ALLOWED_ORIGINS", ""),
    I(webhook_retry_ms, "VTS_WEBHOOK_RETRY_MS", "10000", 10, 3600000),
    S(sandbox, "VTS_SANDBOX", "on"),
    S(fetcher_user, "VTS_FETCHER_USER", "nobody"),
    I(fetcher_max_memory_mb, "VTS_FETCHER_MAX_MEMORY_MB", "1024", 64, 1048576),
    S(fetcher_webhook_ports, "VTS_FETCHER_WEBHOOK_PORTS", "443"),
};

/*
 * VTS_* variables read by the scripts around the programs (deploy/run-local.sh, supervisord.conf, the tests), not by
 * the programs: they reach the programs' environment and are no mistake there.
 */
static const char *const other_vars[] = {
    "VTS_BIN",
    "VTS_BUILD_DIR",
    "VTS_FETCHERS",
    "VTS_RUN_DIR",
    "VTS_SKIP_LOG",
    "VTS_FAULT_SEED",
    "VTS_FUZZ_SECONDS",
    "VTS_STYLE_ROOT",
    "VTS_TEST_DATA",
    "VTS_SHARED_FIXTURES",
    "VTS_TEST_DISPATCHER_LOG",
    "VTS_REQUIRE",
};

const char *config_default(const char *name) {
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
    if (strcmp(vars[i].name, name) == 0) return vars[i].def;
  }
  return NULL;
}

/* Edit distance between a and b (the number of characters to insert, delete or change), up to 64 characters. */
static size_t edit_distance(const char *a, const char *b) {
  size_t la = strnlen(a, 64), lb = strnlen(b, 64);
  size_t row[65];
  for (size_t j = 0; j <= lb; j++) row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j];
      size_t best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[lb];
}

static int known_var(const char *name) {
  if (config_default(name) != NULL || strcmp(name, "VTS_KEYS_FILE") == 0) return 1;
  for (size_t i = 0; i < sizeof(other_vars) / sizeof(other_vars[0]); i++)
    if (strcmp(other_vars[i], name) == 0) return 1;
  return 0;
}

const char *config_nearest(const char *name) {
  const char *best = vars[0].name;
  size_t best_d = (size_t)-1;
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
    size_t d = edit_distance(name, vars[i].name);
    if (d < best_d) {
      best_d = d;
      best = vars[i].name;
    }
  }
  return best;
}

size_t config_unknown_vars(char *const *env, void (*found)(const char *name, const char *nearest, void *arg),
                           void *arg) {
  size_t n = 0;
  for (char *const *e = env; e != NULL && *e != NULL; e++) {
    if (strncmp(*e, "VTS_", 4) != 0) continue;
    size_t len = strcspn(*e, "=");
    char name[72];
    if (len >= sizeof(name)) len = sizeof(name) - 1;
    memcpy(name, *e, len);
    name[len] = '\0';
    if (known_var(name)) continue;
    n++;
    if (found != NULL) found(name, config_nearest(name), arg);
  }
  return n;
}

static void warn_unknown(const char *name, const char *nearest, void *arg) {
  (void)arg;
  log_msg(LOG_WARN, "unknown variable ignored", "variable", name, "nearest", nearest, NULL);
}

void config_warn_unknown(char *const *env) { config_unknown_vars(env, warn_unknown, NULL); }

int config_parse_listen(const char *v, char *host, size_t hostlen, int *port) {
  const char *colon = strrchr(v, ':');
  if (colon == NULL || colon == v || (size_t)(colon - v) >= hostlen) return -EINVAL;
  int64_t p;
  if (util_parse_i64(colon + 1, 0, 65535, &p) != 0) return -EINVAL;
  memcpy(host, v, (size_t)(colon - v));
  host[colon - v] = '\0';
  *port = (int)p;
  return 0;
}

static int parse_listen(struct vts_config *cfg, const char *v) {
  return config_parse_listen(v, cfg->listen_host, sizeof(cfg->listen_host), &cfg->listen_port);
}

/*
 * VTS_JOBS_URL: one URL, or (for a fetcher) a comma-separated list of up to VTS_JOBS_MAX_URLS, each tcp:// or
 * tls+tcp:// with a host and a port. A tls+tcp URL needs the three TLS settings: without them the link would be as
 * open as plain tcp while looking protected. Plain tcp:// authenticates nobody, so off loopback it is refused unless
 * VTS_JOBS_INSECURE=true says the network is private by other means.
 */
static int check_jobs_url(const struct vts_config *cfg, char *err, size_t errlen) {
  bool tls = false;
  const char *p = cfg->jobs_url;
  for (int n = 1;; n++) {
    size_t len = strcspn(p, ",");
    char url[CONFIG_STR_MAX];
    memcpy(url, p, len);
    url[len] = '\0';
    bool this_tls = strncmp(url, "tls+tcp://", 10) == 0;
    const char *hostport = this_tls ? url + 10 : strncmp(url, "tcp://", 6) == 0 ? url + 6 : NULL;
    char host[256];
    int port;
    if (hostport == NULL || config_parse_listen(hostport, host, sizeof(host), &port) != 0 || port == 0) {
      snprintf(
          err, errlen,
          "VTS_JOBS_URL: invalid value \"%.64s\": expected tcp://HOST:PORT or tls+tcp://HOST:PORT, comma-separated",
          url);
      return -EINVAL;
    }
    if (n > VTS_JOBS_MAX_URLS) {
      snprintf(err, errlen, "VTS_JOBS_URL: more than %d URLs", VTS_JOBS_MAX_URLS);
      return -EINVAL;
    }
    if (!this_tls && !cfg->jobs_insecure && !netaddr_is_loopback(host)) {
      snprintf(err, errlen,
               "VTS_JOBS_URL: plain \"%.64s\" is off loopback, where any process that reaches it can take jobs and "
               "answer them: use tls+tcp:// with VTS_JOBS_TLS_CA, VTS_JOBS_TLS_CERT and VTS_JOBS_TLS_KEY, or set "
               "VTS_JOBS_INSECURE=true",
               url);
      return -EINVAL;
    }
    tls = tls || this_tls;
    if (p[len] == '\0') break;
    p += len + 1;
  }
  if (tls && (cfg->jobs_tls_ca[0] == '\0' || cfg->jobs_tls_cert[0] == '\0' || cfg->jobs_tls_key[0] == '\0')) {
    snprintf(err, errlen,
             "VTS_JOBS_URL: a tls+tcp:// URL needs VTS_JOBS_TLS_CA, VTS_JOBS_TLS_CERT and VTS_JOBS_TLS_KEY");
    return -EINVAL;
  }
  return 0;
}

int config_load(struct vts_config *cfg, char *err, size_t errlen) {
  memset(cfg, 0, sizeof(*cfg));
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
    const struct var *v = &vars[i];
    const char *val = getenv(v->name);
    if (val == NULL) val = v->def;
    char *field = (char *)cfg + v->offset;
    int rv = 0;
    switch (v->kind) {
      case K_STR:
        if (strlen(val) >= v->size)
          rv = -EINVAL;
        else
          memcpy(field, val, strlen(val) + 1);
        break;
      case K_INT:
        rv = util_parse_i64(val, v->min, v->max, (int64_t *)(void *)field);
        break;
      case K_BOOL:
        if (strcmp(val, "true") == 0 || strcmp(val, "1") == 0)
          *(bool *)field = true;
        else if (strcmp(val, "false") == 0 || strcmp(val, "0") == 0)
          *(bool *)field = false;
        else
          rv = -EINVAL;
        break;
      case K_LISTEN:
        rv = parse_listen(cfg, val);
        break;
    }
    if (rv != 0) {
      const char *what = v->kind == K_BOOL     ? "true or false"
                         : v->kind == K_LISTEN ? "HOST:PORT"
                         : v->kind == K_STR    ? "a shorter string"
                                               : "an integer in range";
      if (v->secret)
        snprintf(err, errlen, "%s: invalid value: expected %s (the value is not repeated: it may hold credentials)",
                 v->name, what);
      else if (v->kind == K_INT)
        snprintf(err, errlen, "%s: invalid value \"%.64s\": expected an integer from %lld to %lld", v->name, val,
                 (long long)v->min, (long long)v->max);
      else
        snprintf(err, errlen, "%s: invalid value \"%.64s\": expected %s", v->name, val, what);
      return -EINVAL;
    }
  }
  if (strcmp(cfg->speech_engine, "pocketsphinx") != 0 && strcmp(cfg->speech_engine, "openai") != 0) {
    snprintf(err, errlen, "VTS_SPEECH_ENGINE: invalid value \"%.64s\": expected pocketsphinx or openai",
             cfg->speech_engine);
    return -EINVAL;
  }
  if (strcmp(cfg->log_level, "debug") != 0 && strcmp(cfg->log_level, "info") != 0 &&
      strcmp(cfg->log_level, "warn") != 0 && strcmp(cfg->log_level, "error") != 0) {
    snprintf(err, errlen, "VTS_LOG_LEVEL: invalid value \"%.64s\": expected debug, info, warn or error",
             cfg->log_level);
    return -EINVAL;
  }
  if (strcmp(cfg->speech_engine, "openai") == 0 && strncmp(cfg->speech_url, "http://", 7) != 0 &&
      strncmp(cfg->speech_url, "https://", 8) != 0) {
    snprintf(err, errlen, "VTS_SPEECH_URL: required with VTS_SPEECH_ENGINE=openai: expected an http(s) URL");
    return -EINVAL;
  }
  char mhost[64];
  int mport;
  if (cfg->metrics_listen[0] != '\0' && config_parse_listen(cfg->metrics_listen, mhost, sizeof(mhost), &mport) != 0) {
    snprintf(err, errlen, "VTS_METRICS_LISTEN: invalid value \"%.64s\": expected HOST:PORT or empty",
             cfg->metrics_listen);
    return -EINVAL;
  }
  if (check_jobs_url(cfg, err, errlen) != 0) return -EINVAL;
  struct netaddr_allow allow;
  char why[128];
  if (netaddr_allow_parse(cfg->webhook_allow, &allow, why, sizeof(why)) != 0) {
    snprintf(err, errlen, "VTS_WEBHOOK_ALLOW: %s: expected comma-separated addresses or CIDR ranges", why);
    return -EINVAL;
  }
  if (strncmp(cfg->upstream_url, "https://", 8) != 0 && strncmp(cfg->upstream_url, "http://", 7) != 0) {
    snprintf(err, errlen, "VTS_UPSTREAM_URL: invalid value: expected an http(s) URL");
    return -EINVAL;
  }
  return 0;
}
