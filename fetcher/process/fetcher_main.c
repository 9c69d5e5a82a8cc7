/*
 * vts-fetcher: fetches transcripts for the dispatcher, one job at a time.
 *
 *   vts-fetcher                         one process serving jobs from VTS_JOBS_URL
 *   vts-fetcher --workers N             a supervisor of N such processes
 *   vts-fetcher --once VIDEO_ID [LANG]  one job in this process, no dispatcher: prints
 *                                       "outcome=<n> lang=<l> detail=<d>" on stderr and the body on stdout
 *   vts-fetcher --once-speech VIDEO_ID  the same for a speech job (the fallback for videos without captions)
 *   vts-fetcher --probe [VIDEO_ID...]   every configured client through every proxy against canary videos: one
 *                                       table of outcomes; exit 0 when at least one pair returned captions
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/ident.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "fetcher/course/course.h"
#include "fetcher/process/job.h"
#include "fetcher/process/pool.h"
#include "fetcher/process/sandbox.h"
#include "fetcher/egress/upstream.h"
#include "fetcher/platform/potoken.h"
#include "proto/link.h"
#include "proto/proto.h"

static void usage(void) {
  fputs(
      "usage: vts-fetcher [--workers N]\n"
      "       vts-fetcher --once VIDEO_ID [LANG]\n"
      "       vts-fetcher --once-speech VIDEO_ID\n"
      "       vts-fetcher --probe [VIDEO_ID...]\n",
      stderr);
}

/* Everything a fetcher process sets up happens here, after any fork. */
static int serve(void *arg) {
  const struct vts_config *cfg = arg;
  char err[1024] = "";
  struct job_runner *r = NULL;
  int rv = job_limits_init(cfg);
  if (rv != 0) {
    log_msg(LOG_ERROR, "cannot set resource limits", "error", strerror(-rv), NULL);
    return 1;
  }
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    log_msg(LOG_ERROR, "cannot initialise libcurl", NULL);
    return 1;
  }
  rv = job_runner_new(cfg, &r, err, sizeof(err));
  /* Everything read from files is read by now; the jobs link's files are kept in memory for its later dialers. */
  if (rv == 0 && link_list_tls(cfg->jobs_url)) rv = link_tls_keep(cfg, err, sizeof(err));
  if (rv == 0) rv = sandbox_enter(cfg, err, sizeof(err));
  if (rv == 0)
    rv = job_loop_run(cfg, r);
  else
    log_msg(LOG_ERROR, "cannot start", "error", rv == -EINVAL || err[0] != '\0' ? err : strerror(-rv), NULL);
  job_runner_free(r);
  curl_global_cleanup();
  return rv == 0 ? 0 : 1;
}

static int run_once(const struct vts_config *cfg, const char *video_id, const char *lang, uint8_t kind) {
  struct proto_job job;
  memset(&job, 0, sizeof(job));
  if (!ident_video_id_valid(video_id, strlen(video_id))) {
    fputs("vts-fetcher: VIDEO_ID must be 11 characters of A-Z a-z 0-9 _ -\n", stderr);
    return 2;
  }
  if (lang[0] != '\0' && !ident_language_valid(lang, strlen(lang))) {
    fputs("vts-fetcher: LANG must be a language code such as en or pt-BR\n", stderr);
    return 2;
  }
  memcpy(job.video_id, video_id, VTS_VIDEO_ID_LEN + 1);
  snprintf(job.lang, sizeof(job.lang), "%s", lang);
  job.kind = kind;
  job.deadline_ms = (uint32_t)(kind == PROTO_KIND_SPEECH ? cfg->speech_timeout_ms : cfg->job_timeout_ms);
  char hex[17];
  if (util_random_hex(hex, 8) != 0) snprintf(hex, sizeof(hex), "0");
  snprintf(job.request_id, sizeof(job.request_id), "once-%s", hex);

  char err[1024];
  struct job_runner *r = NULL;
  int rv = job_limits_init(cfg);
  if (rv == 0 && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) rv = -ENOMEM;
  if (rv == 0) rv = job_runner_new(cfg, &r, err, sizeof(err));
  if (rv != 0) {
    fprintf(stderr, "vts-fetcher: %s\n", rv == -EINVAL ? err : strerror(-rv));
    return 1;
  }
  struct proto_result res;
  job_runner_run(r, &job, &res);
  if (res.body_len > 0) fwrite(res.body, 1, res.body_len, stdout);
  fflush(stdout);
  fprintf(stderr, "outcome=%d lang=%s detail=%s\n", res.outcome, res.lang, res.detail);
  job_runner_free(r);
  curl_global_cleanup();
  return 0;
}

/* Public videos with captions that have stayed up for years: what --probe asks for when given no video. */
static const char *const probe_canaries[] = {"jNQXAC9IVRw", "dQw4w9WgXcQ"};

static const char *outcome_name(uint8_t outcome) {
  switch (outcome) {
    case PROTO_OK:
      return "captions";
    case PROTO_NOT_AVAILABLE:
      return "not_available";
    case PROTO_NO_CAPTIONS:
      return "no_captions";
    case PROTO_UPSTREAM_FAILED:
      return "upstream_failed";
    default:
      return "internal";
  }
}

/*
 * --probe: one player try (and its caption track) per client, proxy and video, with no fall-through, so the table
 * says which pair works. Proxies are named by position only: their URLs may hold credentials.
 */
static int run_probe(const struct vts_config *cfg, int nvideos, char **videos) {
  const char *const *ids = nvideos > 0 ? (const char *const *)videos : probe_canaries;
  size_t nids = nvideos > 0 ? (size_t)nvideos : sizeof(probe_canaries) / sizeof(probe_canaries[0]);
  for (size_t v = 0; v < nids; v++) {
    if (!ident_video_id_valid(ids[v], strlen(ids[v]))) {
      fprintf(stderr, "vts-fetcher: %s: VIDEO_ID must be 11 characters of A-Z a-z 0-9 _ -\n", ids[v]);
      return 2;
    }
  }
  char err[1024];
  struct upstream *up = NULL;
  struct course *it = NULL;
  int rv = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -ENOMEM;
  if (rv == 0) rv = upstream_new(cfg, &up, err, sizeof(err));
  if (rv == 0) rv = course_new(cfg, up, &it, err, sizeof(err));
  if (rv != 0) {
    fprintf(stderr, "vts-fetcher: %s\n", rv == -EINVAL ? err : strerror(-rv));
    course_free(it);
    upstream_free(up);
    return 1;
  }
  struct course_result res;
  memset(&res, 0, sizeof(res));
  int found = 0;
  size_t nproxies = upstream_proxy_count(up);
  printf("%-14s %-6s %-12s %-16s %-13s %-24s %s\n", "client", "proxy", "video", "outcome", "reason", "detail", "ms");
  for (size_t c = 0; c < course_client_count(it); c++) {
    const struct client_profile *p = course_client_at(it, c);
    for (size_t e = nproxies > 0 ? 1 : 0; e <= nproxies; e++) {
      for (size_t v = 0; v < nids; v++) {
        uint64_t t0 = util_now_ms();
        upstream_begin_job(up, t0 + (uint64_t)cfg->job_timeout_ms, "probe");
        upstream_use_egress(up, (int)e);
        course_probe(it, c, ids[v], &res);
        char proxy[16];
        snprintf(proxy, sizeof(proxy), e == 0 ? "none" : "%zu", e);
        printf("%-14s %-6s %-12s %-16s %-13s %-24s %llu\n", p->name, proxy, ids[v], outcome_name(res.outcome),
               proto_reason_name(res.reason), res.detail, (unsigned long long)(util_now_ms() - t0));
        if (res.outcome == PROTO_OK) found = 1;
      }
    }
  }
  fflush(stdout);
  buf_free(&res.body);
  buf_free(&res.player);
  course_free(it);
  upstream_free(up);
  curl_global_cleanup();
  return found ? 0 : 1;
}

int main(int argc, char **argv) {
  static struct vts_config cfg;
  char err[1024];
  if (config_load(&cfg, err, sizeof(err)) != 0) {
    fprintf(stderr, "vts-fetcher: %s\n", err);
    return 2;
  }
  enum log_level level = LOG_INFO;
  log_level_parse(cfg.log_level, &level);
  log_init("fetcher", level);

  /* Settings that would make every child fail are refused here, once, before anything forks. */
  if (course_config_check(&cfg, err, sizeof(err)) != 0 || upstream_config_check(&cfg, err, sizeof(err)) != 0 ||
      sandbox_config_check(&cfg, err, sizeof(err)) != 0 ||
      (link_list_tls(cfg.jobs_url) && link_tls_check(&cfg, false, err, sizeof(err)) != 0)) {
    fprintf(stderr, "vts-fetcher: %s\n", err);
    return 2;
  }

  config_warn_unknown(environ);
  if (argc == 1 || (argc == 3 && strcmp(argv[1], "--workers") == 0)) {
    char egress[512];
    if (upstream_egress_describe(&cfg, egress, sizeof(egress)) == 0)
      log_msg(LOG_INFO, "upstream egress", "egress", egress, NULL);
    /* The provider by its origin alone: its URL may hold credentials. */
    char origin[288], timeout[24];
    struct buf url = BUF_INIT;
    if (cfg.pot_provider_url[0] != '\0' &&
        potoken_request_url(cfg.pot_provider_url, &url, origin, sizeof(origin)) == 0) {
      snprintf(timeout, sizeof(timeout), "%lld", (long long)cfg.pot_timeout_ms);
      log_msg(LOG_INFO, "po token provider", "provider", origin, "=timeout_ms", timeout, NULL);
    }
    buf_free(&url);
  }

  if (argc >= 3 && argc <= 4 && strcmp(argv[1], "--once") == 0)
    return run_once(&cfg, argv[2], argc == 4 ? argv[3] : "", PROTO_KIND_CAPTIONS);
  if (argc == 3 && strcmp(argv[1], "--once-speech") == 0) return run_once(&cfg, argv[2], "", PROTO_KIND_SPEECH);
  if (argc == 3 && strcmp(argv[1], "--workers") == 0) {
    int64_t n;
    if (util_parse_i64(argv[2], 1, VTS_FETCHER_MAX_WORKERS, &n) != 0) {
      fprintf(stderr, "vts-fetcher: --workers expects an integer from 1 to %d\n", VTS_FETCHER_MAX_WORKERS);
      return 2;
    }
    /* Before the fork: a proxy found blocked by one child then rests for all of them. */
    int hrv = upstream_health_share();
    if (hrv != 0) {
      fprintf(stderr, "vts-fetcher: cannot map the proxy health: %s\n", strerror(-hrv));
      return 1;
    }
    return pool_run((int)n, serve, &cfg);
  }
  if (argc >= 2 && strcmp(argv[1], "--probe") == 0) return run_probe(&cfg, argc - 2, argv + 2);
  if (argc == 1) return serve(&cfg);
  usage();
  return 2;
}
