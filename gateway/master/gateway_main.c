/* vts-gateway: validates the environment and the key file, then runs the master (gateway/master/master.h). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/confine.h"
#include "common/log.h"
#include "gateway/http/http.h"
#include "gateway/keys/keys.h"
#include "gateway/master/master.h"
#include "gateway/redis/redis_conn.h"
#include "proto/link.h"

/* Exit status for a configuration the program refuses to start with. */
#define EXIT_BAD_CONFIG 2

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--version") == 0) {
    puts("vts-gateway " VTS_VERSION);
    return 0;
  }
  if (argc > 1) {
    fputs("usage: vts-gateway (configured by VTS_* environment variables)\n", stderr);
    return EXIT_BAD_CONFIG;
  }
  static struct vts_config cfg;
  char err[512];
  if (config_load(&cfg, err, sizeof(err)) != 0) {
    fprintf(stderr, "vts-gateway: %s\n", err);
    return EXIT_BAD_CONFIG;
  }
  struct sockaddr_storage ss;
  if (cfg.listen_port == 0 || http_listen_addr(&cfg, &ss) != 0) {
    fprintf(stderr,
            "vts-gateway: VTS_LISTEN: invalid value \"%s:%d\": expected IPv4:PORT or [IPv6]:PORT, port 1 to 65535\n",
            cfg.listen_host, cfg.listen_port);
    return EXIT_BAD_CONFIG;
  }
  if (!confine_mode_valid(cfg.sandbox)) {
    fprintf(stderr, "vts-gateway: VTS_SANDBOX: invalid value: expected on, warn or off\n");
    return EXIT_BAD_CONFIG;
  }
  if (strchr(cfg.jobs_url, ',') != NULL) {
    fprintf(stderr, "vts-gateway: VTS_JOBS_URL: the gateway listens on one URL (a list is for fetchers)\n");
    return EXIT_BAD_CONFIG;
  }
  /* Read once here, so that a missing certificate stops the start instead of a dispatcher restarting for ever. */
  if (link_url_tls(cfg.jobs_url) && link_tls_check(&cfg, true, err, sizeof(err)) != 0) {
    fprintf(stderr, "vts-gateway: %s\n", err);
    return EXIT_BAD_CONFIG;
  }
  enum log_level level = LOG_INFO;
  log_level_parse(cfg.log_level, &level);
  log_init("gateway", level);
  /* The URL is checked before anything starts: a refused one (rediss://, a malformed one) stops here, exit 2. */
  struct redis_addr redis;
  if ((cfg.redis_url[0] != '\0' && redis_conn_resolve(cfg.redis_url, &redis, err, sizeof(err)) != 0) ||
      (cfg.redis_cache_url[0] != '\0' &&
       redis_conn_resolve_var("VTS_REDIS_CACHE_URL", cfg.redis_cache_url, &redis, err, sizeof(err)) != 0)) {
    fprintf(stderr, "vts-gateway: %s\n", err);
    return EXIT_BAD_CONFIG;
  }
  struct keystore *keys = keystore_load(cfg.keys_file, err, sizeof(err));
  if (keys == NULL) {
    fprintf(stderr, "vts-gateway: VTS_KEYS_FILE: %s\n", err);
    return EXIT_BAD_CONFIG;
  }
  config_warn_unknown(environ);
  return master_run(&cfg, keys);
}
