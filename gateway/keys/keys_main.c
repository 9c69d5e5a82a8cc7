/*
 * vts-keys: manages the API key file.
 *
 *   vts-keys [-f FILE] create NAME [--rate N] [--window S] [--quota N] [--weight W]   prints the new key, and only it
 *   vts-keys [-f FILE] set NAME [--rate N] [--window S] [--quota N] [--weight W]      changes limits (0 = default)
 *   vts-keys [-f FILE] revoke NAME
 *   vts-keys [-f FILE] list                                                           never prints keys or digests
 *
 * FILE defaults to $VTS_KEYS_FILE; with neither, nothing is done (exit 2): a file in the current folder would be one
 * the service never reads. Every change runs under an exclusive flock on FILE.lock, so two
 * concurrent runs cannot lose each other's update, and is written atomically (keystore_save). Running gateways pick
 * the change up on SIGHUP or when they notice the file changed. Exit status: 0 ok, 1 failure, 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/util.h"
#include "gateway/keys/keys.h"

#define EXIT_USAGE 2
#define KEY_PREFIX "vts_"
#define KEY_RANDOM_BYTES 32 /* 256 bits from getrandom */

struct limits_opt {
  int64_t rate, window_s, quota, weight;
  int has_rate, has_window, has_quota, has_weight;
};

/* The options of create and set: each one's bounds and where it goes. */
struct limit_flag {
  const char *name;
  int64_t min, max;
  size_t value, has; /* offsets in struct limits_opt */
};

static const struct limit_flag limit_flags[] = {
    {"--rate", 0, VTS_MAX_KEY_RATE, offsetof(struct limits_opt, rate), offsetof(struct limits_opt, has_rate)},
    {"--window", 0, VTS_MAX_KEY_WINDOW_S, offsetof(struct limits_opt, window_s),
     offsetof(struct limits_opt, has_window)},
    {"--quota", 0, VTS_MAX_KEY_QUOTA, offsetof(struct limits_opt, quota), offsetof(struct limits_opt, has_quota)},
    {"--weight", 1, VTS_MAX_KEY_WEIGHT, offsetof(struct limits_opt, weight), offsetof(struct limits_opt, has_weight)},
};

static void print_usage(FILE *f) {
  fprintf(
      f,
      "usage: vts-keys [-f FILE] create NAME [--rate N] [--window S] [--quota N] [--weight W]\n"
      "       vts-keys [-f FILE] set NAME [--rate N] [--window S] [--quota N] [--weight W]\n"
      "       vts-keys [-f FILE] revoke NAME\n"
      "       vts-keys [-f FILE] list\n"
      "FILE is the service's key file (VTS_KEYS_FILE when -f is not given; deploy/run-local.sh's is .run/keys.db).\n"
      "A limit of 0 means the service default. "
      "The weight (1 to %d, 1 unless given) is the key's share of batch work\n"
      "against the other keys' with jobs waiting.\n",
      VTS_MAX_KEY_WEIGHT);
}

static int usage(const char *why) {
  if (why != NULL) fprintf(stderr, "vts-keys: %s\n", why);
  print_usage(stderr);
  return EXIT_USAGE;
}

/* Parses --rate/--window/--quota/--weight pairs from argv. Returns 0, or EXIT_USAGE after printing why. */
static int parse_limits(int argc, char **argv, struct limits_opt *o) {
  memset(o, 0, sizeof(*o));
  for (int i = 0; i < argc; i += 2) {
    const char *opt = argv[i];
    const struct limit_flag *fl = NULL;
    for (size_t k = 0; k < sizeof(limit_flags) / sizeof(limit_flags[0]) && fl == NULL; k++)
      if (strcmp(opt, limit_flags[k].name) == 0) fl = &limit_flags[k];
    if (fl == NULL) {
      fprintf(stderr, "vts-keys: unknown option %s\n", opt);
      return EXIT_USAGE;
    }
    int64_t *dst = (int64_t *)(void *)((char *)o + fl->value);
    int *has = (int *)(void *)((char *)o + fl->has);
    if (*has) {
      fprintf(stderr, "vts-keys: %s given twice\n", opt);
      return EXIT_USAGE;
    }
    if (i + 1 >= argc || util_parse_i64(argv[i + 1], fl->min, fl->max, dst) != 0) {
      fprintf(stderr, "vts-keys: %s needs an integer from %lld to %lld\n", opt, (long long)fl->min, (long long)fl->max);
      return EXIT_USAGE;
    }
    *has = 1;
  }
  return 0;
}

static void apply_limits(struct key_entry *e, const struct limits_opt *o) {
  if (o->has_rate) e->rate = o->rate;
  if (o->has_window) e->window_s = o->window_s;
  if (o->has_quota) e->quota = o->quota;
  if (o->has_weight) e->weight = o->weight;
}

/* Takes the exclusive lock on path.lock, waiting for another vts-keys run. Returns the lock fd, or -1. */
static int lock_keys_file(const char *path) {
  char lock_path[4096];
  if ((size_t)snprintf(lock_path, sizeof(lock_path), "%s.lock", path) >= sizeof(lock_path)) {
    fprintf(stderr, "vts-keys: %s: path too long\n", path);
    return -1;
  }
  int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  /* flock needs no write access: a lock file another user made (root's, by a sudo run) still serves its owner. */
  if (fd < 0 && errno == EACCES) fd = open(lock_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fprintf(stderr, "vts-keys: open %s: %s\n", lock_path, strerror(errno));
    return -1;
  }
  /*
   * The lock takes the key file's owner, group and mode, so a sudo run leaves nothing only root may open. Either
   * change may be refused (only root gives a file away, only its owner changes its mode): what is refused stays.
   */
  struct stat st;
  if (stat(path, &st) == 0) {
    int refused = fchown(fd, st.st_uid, st.st_gid) != 0;
    refused |= fchmod(fd, st.st_mode & 0666) != 0;
    (void)refused;
  }
  while (flock(fd, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    fprintf(stderr, "vts-keys: lock %s: %s\n", lock_path, strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

/* The entries of the file as a modifiable array with room for one more. Returns 0, or -1 after printing why. */
static int load_entries(const char *path, struct key_entry **out, size_t *n) {
  char err[512];
  struct keystore *ks = keystore_load(path, err, sizeof(err));
  if (ks == NULL) {
    fprintf(stderr, "vts-keys: %s: %s\n", path, err);
    return -1;
  }
  *n = keystore_count(ks);
  *out = calloc(*n + 1, sizeof(**out));
  if (*out == NULL) {
    fputs("vts-keys: out of memory\n", stderr);
    keystore_free(ks);
    return -1;
  }
  for (size_t i = 0; i < *n; i++) (*out)[i] = *keystore_entry(ks, i);
  keystore_free(ks);
  return 0;
}

static struct key_entry *find_name(struct key_entry *entries, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++) {
    if (strcmp(entries[i].name, name) == 0) return &entries[i];
  }
  return NULL;
}

static int save_entries(const char *path, const struct key_entry *entries, size_t n) {
  char err[512];
  if (keystore_save(path, entries, n, err, sizeof(err)) != 0) {
    fprintf(stderr, "vts-keys: %s\n", err);
    return -1;
  }
  return 0;
}

enum command { CMD_CREATE, CMD_SET, CMD_REVOKE };

/* create, set and revoke: read, change and write the file under the lock. Returns the exit status. */
static int modify(const char *path, enum command cmd, const char *name, const struct limits_opt *o) {
  struct key_entry *entries = NULL;
  size_t n = 0;
  int status = EXIT_FAILURE;
  char key[sizeof(KEY_PREFIX) + 2 * KEY_RANDOM_BYTES];
  int lock_fd = lock_keys_file(path);
  if (lock_fd < 0) goto fail;
  if (load_entries(path, &entries, &n) != 0) goto fail;

  struct key_entry *e = find_name(entries, n, name);
  if (cmd == CMD_CREATE) {
    if (e != NULL) {
      fprintf(stderr, "vts-keys: a key named %s already exists (names stay taken after revoke)\n", name);
      goto fail;
    }
    memcpy(key, KEY_PREFIX, strlen(KEY_PREFIX));
    int rc = util_random_hex(key + strlen(KEY_PREFIX), KEY_RANDOM_BYTES);
    if (rc != 0) {
      fprintf(stderr, "vts-keys: getrandom: %s\n", strerror(-rc));
      goto fail;
    }
    e = &entries[n++];
    memset(e, 0, sizeof(*e));
    memcpy(e->name, name, strlen(name) + 1);
    util_sha256_hex(key, strlen(key), e->digest);
    e->active = 1;
    e->weight = 1;
    apply_limits(e, o);
  } else if (e == NULL) {
    fprintf(stderr, "vts-keys: no key named %s\n", name);
    goto fail;
  } else if (cmd == CMD_SET) {
    apply_limits(e, o);
  } else if (!e->active) {
    fprintf(stderr, "vts-keys: %s is already revoked\n", name);
    status = EXIT_SUCCESS;
    goto fail;
  } else {
    e->active = 0;
  }

  if (save_entries(path, entries, n) != 0) goto fail;
  /* The key is shown only once it is stored, and nowhere but stdout. */
  if (cmd == CMD_CREATE && (printf("%s\n", key) < 0 || fflush(stdout) != 0)) {
    fprintf(stderr, "vts-keys: could not write the key to stdout: revoke %s and create another\n", name);
    goto fail;
  }
  status = EXIT_SUCCESS;

fail:
  memset(key, 0, sizeof(key));
  free(entries);
  if (lock_fd >= 0) close(lock_fd);
  return status;
}

static void print_limit(int64_t v, const char *sep) {
  if (v == 0) {
    printf("default%s", sep);
  } else {
    printf("%lld%s", (long long)v, sep);
  }
}

static int list(const char *path) {
  char err[512];
  struct keystore *ks = keystore_load(path, err, sizeof(err));
  if (ks == NULL) {
    fprintf(stderr, "vts-keys: %s: %s\n", path, err);
    return EXIT_FAILURE;
  }
  printf("NAME\tSTATUS\tRATE\tWINDOW_S\tQUOTA\tWEIGHT\n");
  for (size_t i = 0; i < keystore_count(ks); i++) {
    const struct key_entry *e = keystore_entry(ks, i);
    printf("%s\t%s\t", e->name, e->active ? "active" : "revoked");
    print_limit(e->rate, "\t");
    print_limit(e->window_s, "\t");
    print_limit(e->quota, "\t");
    printf("%lld\n", (long long)e->weight);
  }
  keystore_free(ks);
  return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

int main(int argc, char **argv) {
  const char *path = getenv("VTS_KEYS_FILE");
  if (path != NULL && *path == '\0') path = NULL;
  int i = 1;
  while (i < argc && argv[i][0] == '-') {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      print_usage(stdout);
      return EXIT_SUCCESS;
    }
    if (strcmp(argv[i], "-f") != 0) return usage("unknown option");
    if (i + 1 >= argc || argv[i + 1][0] == '\0') return usage("-f needs a file name");
    path = argv[i + 1];
    i += 2;
  }
  if (i >= argc) return usage(NULL);
  if (path == NULL)
    return usage(
        "which key file? name the one the service reads: -f FILE, or VTS_KEYS_FILE (deploy/run-local.sh's "
        "is .run/keys.db)");
  const char *cmd = argv[i++];

  if (strcmp(cmd, "list") == 0) {
    if (i != argc) return usage("list takes no arguments");
    return list(path);
  }

  enum command c;
  if (strcmp(cmd, "create") == 0) {
    c = CMD_CREATE;
  } else if (strcmp(cmd, "set") == 0) {
    c = CMD_SET;
  } else if (strcmp(cmd, "revoke") == 0) {
    c = CMD_REVOKE;
  } else {
    return usage("unknown command");
  }
  if (i >= argc) return usage("missing NAME");
  const char *name = argv[i++];
  if (!keys_name_valid(name, strlen(name))) {
    fprintf(stderr, "vts-keys: NAME must be 1 to %d characters of A-Z a-z 0-9 _ . -\n", KEYS_MAX_NAME);
    return EXIT_USAGE;
  }
  struct limits_opt o;
  if (c == CMD_REVOKE) {
    if (i != argc) return usage("revoke takes only NAME");
    memset(&o, 0, sizeof(o));
  } else {
    if (parse_limits(argc - i, argv + i, &o) != 0) return EXIT_USAGE;
    if (c == CMD_SET && !o.has_rate && !o.has_window && !o.has_quota && !o.has_weight) {
      return usage("set needs at least one of --rate, --window, --quota, --weight");
    }
  }
  return modify(path, c, name, &o);
}
