#include "gateway/http/worker.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <llhttp.h>
#include <uv.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "gateway/http/dispatch_client.h"
#include "gateway/http/handlers.h"
#include "gateway/http/http.h"
#include "gateway/http/l1cache.h"
#include "gateway/jobs/storeq.h"
#include "gateway/metrics/metrics.h"
#include "gateway/limits/ratelimit.h"

/* How often the key file is checked for changes (mtime, size, inode). */
#define WORKER_KEYS_POLL_MS 1000
/* After the drain, other modules get this long to close their handles before the loop is stopped. */
#define WORKER_EXIT_GRACE_MS 2000

struct worker {
  uv_loop_t loop;
  const struct vts_config *cfg;
  struct handlers_ctx ctx;
  struct http_server *srv;
  struct http_server *metrics_srv; /* VTS_METRICS_LISTEN, NULL when disabled or unavailable */
  struct vts_config metrics_cfg;   /* cfg with the metrics address as its listen address */
  uv_signal_t sigterm;
  uv_signal_t sighup;
  uv_timer_t keys_timer;
  uv_timer_t exit_timer;
  uv_prepare_t log_prepare; /* writes the turn's access lines, before the loop waits */
  struct metrics_turn turn; /* the previous turn's end (its prepare) */
  struct stat keys_st;
  int keys_st_ok;
  int stopping;
};

static void keys_stat(const struct worker *w, struct stat *st, int *ok) { *ok = stat(w->cfg->keys_file, st) == 0; }

static int keys_changed(const struct worker *w, const struct stat *st, int ok) {
  if (ok != w->keys_st_ok) return 1;
  if (!ok) return 0;
  return st->st_ino != w->keys_st.st_ino || st->st_dev != w->keys_st.st_dev || st->st_size != w->keys_st.st_size ||
         st->st_mtim.tv_sec != w->keys_st.st_mtim.tv_sec || st->st_mtim.tv_nsec != w->keys_st.st_mtim.tv_nsec;
}

/* Loads the key file anew; a file that does not load leaves the current store in place. */
static void keys_reload(struct worker *w, const char *why) {
  /* Stat before reading: a change that lands while we read is then seen by the next poll. */
  keys_stat(w, &w->keys_st, &w->keys_st_ok);
  char err[256] = "";
  struct keystore *ks = keystore_load(w->cfg->keys_file, err, sizeof(err));
  if (ks == NULL) {
    /* An error, every time: a revoked key keeps working until the file loads again. */
    log_msg(LOG_ERROR, "key file reload failed; keeping the current keys", "reason", why, "error", err, NULL);
    metrics_keys_reload_failed();
    return;
  }
  metrics_keys_loaded(util_wall_s());
  /* Requests in progress hold copies of their key entries, so the old store can go now. */
  keystore_free(w->ctx.keys);
  w->ctx.keys = ks;
  char n[32];
  snprintf(n, sizeof(n), "%zu", keystore_count(ks));
  log_msg(LOG_INFO, "keys loaded", "reason", why, "=keys", n, NULL);
}

static void on_keys_poll(uv_timer_t *t) {
  struct worker *w = t->data;
  struct stat st;
  int ok;
  keys_stat(w, &st, &ok);
  if (keys_changed(w, &st, ok)) keys_reload(w, "file changed");
}

static void on_sighup(uv_signal_t *s, int signum) {
  (void)signum;
  keys_reload(s->data, "SIGHUP");
}

/* Metrics are for operators: a metrics port that cannot be opened is logged, and the worker serves on. */
static void metrics_server_start(struct worker *w) {
  if (w->cfg->metrics_listen[0] == '\0') return;
  w->metrics_cfg = *w->cfg;
  if (config_parse_listen(w->cfg->metrics_listen, w->metrics_cfg.listen_host, sizeof(w->metrics_cfg.listen_host),
                          &w->metrics_cfg.listen_port) != 0)
    return;
  w->metrics_srv = http_server_new(&w->loop, &w->metrics_cfg, handlers_metrics_request, &w->ctx);
  if (w->metrics_srv == NULL) return;
  int rv = http_server_listen(w->metrics_srv);
  if (rv != 0) {
    log_msg(LOG_WARN, "cannot listen for metrics", "address", w->cfg->metrics_listen, "error", uv_strerror(rv), NULL);
    http_server_free(w->metrics_srv);
    w->metrics_srv = NULL;
  }
}

/*
 * The end of a loop turn, before the loop waits: the turn's length (metrics_turn_end) goes to the loop-turn histogram,
 * then the turn's access lines are written (their write is part of the next turn's length).
 */
static void on_log_prepare(uv_prepare_t *h) {
  struct worker *w = h->data;
  uint64_t busy_ns;
  if (metrics_turn_end(&w->turn, &w->loop, &busy_ns)) metrics_loop_turn(busy_ns / 1000);
  log_flush();
}

static void on_exit_grace(uv_timer_t *t) {
  struct worker *w = t->data;
  log_msg(LOG_WARN, "handles still open after drain; stopping the loop", NULL);
  uv_stop(&w->loop);
}

static void on_drained(void *arg) {
  struct worker *w = arg;
  /* The store's calls still queued run and answer (to connections now gone) before the limiter they refund goes. */
  storeq_close(w->ctx.jobsq);
  w->ctx.jobsq = NULL;
  dispatch_client_close();
  l1cache_free(w->ctx.l1);
  w->ctx.l1 = NULL;
  ratelimit_free(w->ctx.rl);
  w->ctx.rl = NULL;
  http_server_free(w->srv);
  w->srv = NULL;
  http_server_free(w->metrics_srv);
  w->metrics_srv = NULL;
  uv_close((uv_handle_t *)&w->sigterm, NULL);
  uv_close((uv_handle_t *)&w->sighup, NULL);
  uv_close((uv_handle_t *)&w->keys_timer, NULL);
  /* Unreferenced: it fires only if something else keeps the loop alive. */
  uv_timer_start(&w->exit_timer, on_exit_grace, WORKER_EXIT_GRACE_MS, 0);
  uv_unref((uv_handle_t *)&w->exit_timer);
}

static void on_sigterm(uv_signal_t *s, int signum) {
  (void)signum;
  struct worker *w = s->data;
  if (w->stopping) return;
  w->stopping = 1;
  char n[32];
  snprintf(n, sizeof(n), "%zu", http_server_conn_count(w->srv));
  log_msg(LOG_INFO, "draining", "=connections", n, NULL);
  uv_timer_stop(&w->keys_timer);
  http_server_drain(w->srv, on_drained, w);
}

static void close_any(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

/* Over 80 lines: the worker's steps from start to stop in order, every failure leaving by the one teardown. */
int worker_main(const struct vts_config *cfg, const char *worker_url, uint64_t started_ms, struct keystore *keys,
                const struct ratelimit_shared *limits, int jobs_made_fd) {
  static struct worker w;
  int status = 1;
  int dispatch_up = 0;
  memset(&w, 0, sizeof(w));
  w.cfg = cfg;
  w.ctx.cfg = cfg;
  w.ctx.keys = keys;
  w.ctx.started_ms = started_ms;
  w.ctx.loop = &w.loop;
  w.ctx.jobs_made_fd = jobs_made_fd;
  if (uv_loop_init(&w.loop) != 0) {
    log_msg(LOG_ERROR, "uv_loop_init failed", NULL);
    keystore_free(keys);
    return 1;
  }
  /* The time the loop waits for events, so that a turn's length leaves it out (on_log_prepare). */
  uv_loop_configure(&w.loop, UV_METRICS_IDLE_TIME);
  keys_reload(&w, "start");

  w.ctx.rl = ratelimit_new(&w.loop, cfg, limits);
  if (w.ctx.rl == NULL) {
    log_msg(LOG_ERROR, "rate limiter failed to start", NULL);
    goto fail;
  }
  w.ctx.l1 = l1cache_new();
  if (w.ctx.l1 == NULL) {
    log_msg(LOG_ERROR, "worker's L1 cache failed to start", NULL);
    goto fail;
  }
  int rv = dispatch_client_init(&w.loop, cfg, worker_url, w.ctx.l1);
  if (rv != 0) {
    log_msg(LOG_ERROR, "dispatcher link failed", "error", strerror(-rv), NULL);
    goto fail;
  }
  dispatch_up = 1;
  w.srv = http_server_new(&w.loop, cfg, handlers_request, &w.ctx);
  if (w.srv == NULL) goto fail;
  rv = http_server_listen(w.srv);
  if (rv != 0) {
    char port[16];
    snprintf(port, sizeof(port), "%d", cfg->listen_port);
    log_msg(LOG_ERROR, "cannot listen", "host", cfg->listen_host, "=port", port, "error", uv_strerror(rv), NULL);
    status = WORKER_EXIT_CONFIG;
    goto fail;
  }

  metrics_server_start(&w);

  uv_signal_init(&w.loop, &w.sigterm);
  uv_signal_init(&w.loop, &w.sighup);
  w.sigterm.data = &w;
  w.sighup.data = &w;
  uv_signal_start(&w.sigterm, on_sigterm, SIGTERM);
  uv_signal_start(&w.sighup, on_sighup, SIGHUP);
  /* A signal set is built as the dispatcher builds its own: alike in shape, other signals for another process. */
  /* The master forks with these blocked: what arrived meanwhile is delivered now, to the handlers above. */
  sigset_t held;
  sigemptyset(&held);
  sigaddset(&held, SIGTERM);
  sigaddset(&held, SIGHUP);
  sigaddset(&held, SIGCHLD);
  sigprocmask(SIG_UNBLOCK, &held, NULL);
  uv_timer_init(&w.loop, &w.keys_timer);
  w.keys_timer.data = &w;
  uv_timer_start(&w.keys_timer, on_keys_poll, WORKER_KEYS_POLL_MS, WORKER_KEYS_POLL_MS);
  uv_timer_init(&w.loop, &w.exit_timer);
  w.exit_timer.data = &w;

  log_msg(LOG_INFO, "worker ready", NULL);
  /* The access lines of one loop turn go out in one write (or a few), not one write each. */
  uv_prepare_init(&w.loop, &w.log_prepare);
  w.log_prepare.data = &w;
  uv_prepare_start(&w.log_prepare, on_log_prepare);
  uv_unref((uv_handle_t *)&w.log_prepare);
  log_batch(1);
  uv_run(&w.loop, UV_RUN_DEFAULT);
  /* on_drained closed the server, the limiter and the dispatcher link. */
  dispatch_up = 0;
  status = 0;

fail:
  /* A start that failed half way: nothing was accepted, so closing is the whole drain. */
  if (w.srv != NULL) http_server_free(w.srv);
  if (w.metrics_srv != NULL) http_server_free(w.metrics_srv);
  if (dispatch_up) dispatch_client_close();
  l1cache_free(w.ctx.l1);
  storeq_close(w.ctx.jobsq);
  if (w.ctx.rl != NULL) ratelimit_free(w.ctx.rl);
  uv_walk(&w.loop, close_any, NULL);
  uv_run(&w.loop, UV_RUN_DEFAULT);
  log_batch(0); /* what the last turns held */
  uv_loop_close(&w.loop);
  keystore_free(w.ctx.keys);
  return status;
}
