#include "fetcher/process/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/landlock.h>
#include <pwd.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/confine.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "fetcher/egress/transport.h"
#include "proto/link.h"
#include "proto/proto.h"

#if defined(__SANITIZE_ADDRESS__)
#define SANDBOX_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANDBOX_SANITIZER 1
#endif
#endif
#ifndef SANDBOX_SANITIZER
#define SANDBOX_SANITIZER 0
#endif
#if SANDBOX_SANITIZER
#include <sanitizer/lsan_interface.h>
#endif

/* Landlock's later ABIs, which Debian 12's kernel headers predate. */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#define SANDBOX_NET_BIND_TCP (1ULL << 0)
#define SANDBOX_NET_CONNECT_TCP (1ULL << 1)
#define SANDBOX_RULE_NET_PORT 2
#define SANDBOX_SCOPE_ABSTRACT_UNIX (1ULL << 0)
#define SANDBOX_SCOPE_SIGNAL (1ULL << 1)

/* struct landlock_ruleset_attr as of ABI 6; the kernel is given the prefix its ABI knows. */
struct sandbox_ruleset_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

struct sandbox_net_port_attr {
  uint64_t allowed_access;
  uint64_t port;
};

static uint8_t layers_in_force;
static unsigned allowed_calls;

uint8_t sandbox_layers(void) { return layers_in_force; }
unsigned sandbox_allowed_calls(void) { return allowed_calls; }

static enum sandbox_mode parse_mode(const char *s) {
  return strcmp(s, "off") == 0 ? SANDBOX_OFF : strcmp(s, "warn") == 0 ? SANDBOX_WARN : SANDBOX_ON;
}

/* ---- the TCP ports the fetcher connects to ---- */

struct ports {
  uint16_t v[VTS_SANDBOX_MAX_PORTS];
  size_t n;
};

static void ports_add(struct ports *p, long port) {
  if (port <= 0 || port > 65535) return;
  for (size_t i = 0; i < p->n; i++)
    if (p->v[i] == port) return;
  if (p->n < VTS_SANDBOX_MAX_PORTS) p->v[p->n++] = (uint16_t)port;
}

/* The port of an absolute URL: its own, else its scheme's. */
static void ports_add_url(struct ports *p, const char *url, size_t len) {
  char copy[CONFIG_STR_MAX], scheme[16], host[256], port[8];
  if (len == 0 || len >= sizeof(copy)) return;
  memcpy(copy, url, len);
  copy[len] = '\0';
  if (transport_url_parts(copy, scheme, sizeof(scheme), host, sizeof(host), port, sizeof(port)) != 0) return;
  int64_t n;
  if (port[0] != '\0' && util_parse_i64(port, 1, 65535, &n) == 0)
    ports_add(p, (long)n);
  else if (strcmp(scheme, "https") == 0)
    ports_add(p, 443);
  else if (strcmp(scheme, "http") == 0)
    ports_add(p, 80);
  else if (strncmp(scheme, "socks", 5) == 0)
    ports_add(p, 1080);
}

/* A comma-separated list of URLs, each perhaps after "rotating+" and before ";options" (VTS_UPSTREAM_PROXY). */
static void ports_add_list(struct ports *p, const char *list) {
  while (list != NULL && *list != '\0') {
    size_t n = strcspn(list, ",");
    const char *u = list;
    if (strncmp(u, "rotating+", 9) == 0 && n > 9) u += 9;
    size_t len = strcspn(u, ";,");
    if (strstr(u, "://") == NULL || (size_t)(strstr(u, "://") - u) > len) {
      /* As curl reads a proxy variable, a value without a scheme is an http:// proxy. */
      char with[CONFIG_STR_MAX];
      int w = snprintf(with, sizeof(with), "http://%.*s", (int)len, u);
      if (w > 0 && (size_t)w < sizeof(with)) ports_add_url(p, with, (size_t)w);
    } else {
      ports_add_url(p, u, len);
    }
    list += n;
    if (*list == ',') list++;
  }
}

/* VTS_FETCHER_WEBHOOK_PORTS: "any", or comma-separated ports. Sets *any. Returns 0, or -EINVAL. */
static int webhook_ports(const char *s, struct ports *p, int *any) {
  *any = strcmp(s, "any") == 0;
  if (*any || s[0] == '\0') return 0;
  while (*s != '\0') {
    size_t n = strcspn(s, ",");
    int64_t v;
    if (util_parse_i64_n(s, n, 1, 65535, &v) != 0) return -EINVAL;
    ports_add(p, (long)v);
    s += n;
    if (*s == ',' && *++s == '\0') return -EINVAL;
  }
  return 0;
}

static const char *const proxy_vars[] = {"https_proxy", "HTTPS_PROXY", "http_proxy",
                                         "HTTP_PROXY",  "all_proxy",   "ALL_PROXY"};

/* Every port a fetcher connects to: the platform, proxies, speech server, PO-token provider, jobs link, webhooks. */
static int endpoint_ports(const struct vts_config *cfg, struct ports *p, int *any) {
  memset(p, 0, sizeof(*p));
  ports_add_url(p, cfg->upstream_url, strlen(cfg->upstream_url));
  ports_add_list(p, cfg->upstream_proxy);
  if (cfg->upstream_proxy[0] == '\0') {
    for (size_t i = 0; i < sizeof(proxy_vars) / sizeof(proxy_vars[0]); i++) {
      const char *v = getenv(proxy_vars[i]);
      if (v != NULL) ports_add_list(p, v);
    }
  }
  ports_add_url(p, cfg->speech_url, strlen(cfg->speech_url));
  ports_add_url(p, cfg->pot_provider_url, strlen(cfg->pot_provider_url));
  for (const char *j = cfg->jobs_url; *j != '\0';) {
    size_t n = strcspn(j, ",");
    char entry[CONFIG_STR_MAX], host[256], port[8];
    const char *scheme;
    int64_t v;
    if (n < sizeof(entry)) {
      memcpy(entry, j, n);
      entry[n] = '\0';
      if (link_url_split(entry, &scheme, host, sizeof(host), port, sizeof(port)) == 0 &&
          util_parse_i64(port, 1, 65535, &v) == 0)
        ports_add(p, (long)v);
    }
    j += n;
    if (*j == ',') j++;
  }
  /* DNS answers too large for UDP are asked again over TCP. */
  ports_add(p, 53);
  return webhook_ports(cfg->fetcher_webhook_ports, p, any);
}

int sandbox_config_check(const struct vts_config *cfg, char *err, size_t errlen) {
  enum sandbox_mode mode = parse_mode(cfg->sandbox);
  if (!confine_mode_valid(cfg->sandbox)) {
    snprintf(err, errlen, "VTS_SANDBOX: invalid value: expected on, warn or off");
    return -EINVAL;
  }
  struct ports p;
  int any;
  if (endpoint_ports(cfg, &p, &any) != 0) {
    snprintf(err, errlen,
             "VTS_FETCHER_WEBHOOK_PORTS: invalid value: expected any, or comma-separated ports 1 to 65535");
    return -EINVAL;
  }
  if (mode != SANDBOX_OFF && geteuid() == 0 && getpwnam(cfg->fetcher_user) == NULL) {
    snprintf(err, errlen, "VTS_FETCHER_USER: no such user: %.64s (a fetcher started as root runs as this user)",
             cfg->fetcher_user);
    return -EINVAL;
  }
  return 0;
}

/* ---- the layers ---- */

/* One description of the layers in force, for the start line. */
struct said {
  char text[256];
  size_t len;
};

static void say(struct said *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct said *s, const char *fmt, ...) {
  if (s->len >= sizeof(s->text) - 1) return;
  if (s->len > 0) s->len += (size_t)snprintf(s->text + s->len, sizeof(s->text) - s->len, ", ");
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(s->text + s->len, sizeof(s->text) - s->len, fmt, ap);
  va_end(ap);
  if (n > 0) s->len += (size_t)n;
  if (s->len >= sizeof(s->text)) s->len = sizeof(s->text) - 1;
}

static int set_limit(int resource, rlim_t v) {
  struct rlimit rl = {v, v};
  return setrlimit(resource, &rl) == 0 ? 0 : -errno;
}

/*
 * No core file (it would hold the process's memory: settings, tokens), an address space ceiling (not under a
 * sanitizer, which reserves terabytes of shadow memory up front), a file size ceiling (the fetcher writes no file:
 * the ceiling bounds what an inherited log descriptor may grow to, and a write past it fails with EFBIG instead of a
 * SIGXFSZ that would end the process) and an open file ceiling.
 */
static int apply_limits(const struct vts_config *cfg, struct said *s) {
  int rv = set_limit(RLIMIT_CORE, 0);
  if (rv == 0 && !SANDBOX_SANITIZER) rv = set_limit(RLIMIT_AS, (rlim_t)cfg->fetcher_max_memory_mb * 1024 * 1024);
  signal(SIGXFSZ, SIG_IGN);
  if (rv == 0) rv = set_limit(RLIMIT_FSIZE, (rlim_t)VTS_FETCHER_MAX_FILE_BYTES);
  if (rv == 0) rv = set_limit(RLIMIT_NOFILE, (rlim_t)VTS_FETCHER_MAX_OPEN_FILES);
  if (rv != 0) return rv;
  if (SANDBOX_SANITIZER)
    say(s, "rlimits (core 0, no address space ceiling under a sanitizer, fsize, nofile %d)",
        VTS_FETCHER_MAX_OPEN_FILES);
  else
    say(s, "rlimits (core 0, as %lld MiB, fsize, nofile %d)", (long long)cfg->fetcher_max_memory_mb,
        VTS_FETCHER_MAX_OPEN_FILES);
  return 0;
}

/* Root becomes VTS_FETCHER_USER, with no supplementary group and no capability left in any set. */
static int drop_user(const struct vts_config *cfg, struct said *s, char *err, size_t errlen) {
  if (geteuid() != 0) {
    say(s, "uid %d", (int)getuid());
    return 0;
  }
  struct passwd *pw = getpwnam(cfg->fetcher_user);
  if (pw == NULL || pw->pw_uid == 0) {
    snprintf(err, errlen, "VTS_FETCHER_USER: %.64s is not a user other than root", cfg->fetcher_user);
    return -EINVAL;
  }
  uid_t uid = pw->pw_uid;
  gid_t gid = pw->pw_gid;
  /* A change of user clears the parent-death signal a supervisor's child relies on (pool.c): it is set again. */
  int pdeath = 0;
  prctl(PR_GET_PDEATHSIG, &pdeath, 0, 0, 0);
  pid_t parent = getppid();
  /* The bounding set needs CAP_SETPCAP, so it goes while still root. */
  for (int cap = 0; cap <= 63; cap++)
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) {
      snprintf(err, errlen, "cannot drop capability %d from the bounding set: %s", cap, strerror(errno));
      return -errno;
    }
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0) {
    snprintf(err, errlen, "cannot become %.64s: %s", cfg->fetcher_user, strerror(errno));
    return -errno;
  }
  /* A way back to root would mean the drop did not happen. */
  if (setresuid(0, 0, 0) == 0 || geteuid() == 0) {
    snprintf(err, errlen, "still able to become root after the drop to %.64s", cfg->fetcher_user);
    return -EPERM;
  }
  if (pdeath != 0) {
    prctl(PR_SET_PDEATHSIG, pdeath, 0, 0, 0);
    if (getppid() != parent) {
      snprintf(err, errlen, "the supervisor is gone");
      return -ESRCH;
    }
  }
  /* A sanitizer's report reads /proc/self/maps, which a process that changed its user may no longer open. */
  if (SANDBOX_SANITIZER) prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  say(s, "uid %d", (int)uid);
  return 0;
}

static int landlock_abi(void) {
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi < 0 ? -errno : (int)abi;
}

static uint64_t fs_rights(int abi) {
  uint64_t all = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;
  if (abi >= 2) all |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) all |= LANDLOCK_ACCESS_FS_TRUNCATE;
  if (abi >= 5) all |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
  return all;
}

/*
 * What the fetcher reads once confined: shared libraries (glibc loads its name service modules on the first lookup),
 * the CA certificates (curl reads them for each new TLS connection), the resolver's files, random and null devices,
 * its own /proc entry (a sanitizer's report reads its maps), the CPU list (libavcodec sizes its threads) and the
 * speech model (opened for each speech job). Nothing is writable but /dev/null. The key file, the jobs link's
 * private key (read into memory before this point), Redis's settings and every home folder are outside.
 */
static const struct {
  const char *path;
  int write; /* /dev/null only */
} fs_rules[] = {
    {"/usr", 0},
    {"/lib", 0},
    {"/lib64", 0},
    {"/etc/ssl", 0},
    {"/etc/ca-certificates", 0},
    {"/etc/pki", 0},
    {"/etc/resolv.conf", 0},
    {"/etc/hosts", 0},
    {"/etc/nsswitch.conf", 0},
    {"/etc/gai.conf", 0},
    {"/etc/host.conf", 0},
    {"/etc/localtime", 0},
    {"/etc/ld.so.cache", 0},
    {"/dev/urandom", 0},
    {"/dev/random", 0},
    {"/dev/null", 1},
    {"/proc/self", 0},
    {"/sys/devices/system/cpu", 0},
};

static int add_path(int ruleset, const char *path, uint64_t rights, uint64_t handled) {
  int fd = open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == EACCES ? 0 : -errno;
  struct stat st;
  if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
    rights &= LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_EXECUTE |
              LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV;
  struct landlock_path_beneath_attr pb = {.allowed_access = rights & handled, .parent_fd = fd};
  int rv = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) == 0 ? 0 : -errno;
  close(fd);
  return rv;
}

/*
 * The folder that holds path: the speech model's dictionary may sit beside the model's folder, and the client
 * profiles file is replaced by a rename (a new file the rule of the old one would not cover).
 */
static int add_parent(int ruleset, const char *path, uint64_t rights, uint64_t handled) {
  char dir[CONFIG_STR_MAX];
  snprintf(dir, sizeof(dir), "%s", path);
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/') dir[--n] = '\0';
  char *slash = strrchr(dir, '/');
  if (slash == NULL) return add_path(ruleset, ".", rights, handled);
  if (slash == dir)
    slash[1] = '\0';
  else
    *slash = '\0';
  return add_path(ruleset, dir, rights, handled);
}

static int apply_landlock(const struct vts_config *cfg, int abi, struct said *s, char *err, size_t errlen) {
  struct sandbox_ruleset_attr attr = {.handled_access_fs = fs_rights(abi)};
  size_t size = sizeof(uint64_t);
  struct ports ports;
  int any_webhook = 0;
  endpoint_ports(cfg, &ports, &any_webhook);
  if (abi >= 4) {
    /* With webhooks to any port, connect stays open: only binding is refused. */
    attr.handled_access_net = SANDBOX_NET_BIND_TCP | (any_webhook ? 0 : SANDBOX_NET_CONNECT_TCP);
    size = 2 * sizeof(uint64_t);
  }
  if (abi >= 6) {
    attr.scoped = SANDBOX_SCOPE_ABSTRACT_UNIX | SANDBOX_SCOPE_SIGNAL;
    size = sizeof(attr);
  }
  int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
  if (rs < 0) {
    snprintf(err, errlen, "landlock: cannot create a ruleset: %s", strerror(errno));
    return -errno;
  }
  const uint64_t read = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
  int rv = 0;
  for (size_t i = 0; rv == 0 && i < sizeof(fs_rules) / sizeof(fs_rules[0]); i++)
    rv = add_path(rs, fs_rules[i].path, read | (fs_rules[i].write ? LANDLOCK_ACCESS_FS_WRITE_FILE : 0),
                  attr.handled_access_fs);
  if (rv == 0 && strcmp(cfg->speech_engine, "pocketsphinx") == 0 && cfg->pocketsphinx_model_dir[0] != '\0')
    rv = add_parent(rs, cfg->pocketsphinx_model_dir, read, attr.handled_access_fs);
  if (rv == 0 && cfg->client_profiles[0] != '\0')
    rv = add_parent(rs, cfg->client_profiles, read, attr.handled_access_fs);
  static const char *const ca_vars[] = {"CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR"};
  for (size_t i = 0; rv == 0 && i < sizeof(ca_vars) / sizeof(ca_vars[0]); i++) {
    const char *v = getenv(ca_vars[i]);
    if (v != NULL && v[0] != '\0') rv = add_path(rs, v, read, attr.handled_access_fs);
  }
  for (size_t i = 0; rv == 0 && abi >= 4 && !any_webhook && i < ports.n; i++) {
    struct sandbox_net_port_attr np = {.allowed_access = SANDBOX_NET_CONNECT_TCP, .port = ports.v[i]};
    if (syscall(SYS_landlock_add_rule, rs, SANDBOX_RULE_NET_PORT, &np, 0) != 0) rv = -errno;
  }
  if (rv == 0 && syscall(SYS_landlock_restrict_self, rs, 0) != 0) rv = -errno;
  close(rs);
  if (rv != 0) {
    snprintf(err, errlen, "landlock: cannot apply the rules: %s", strerror(-rv));
    return rv;
  }
  if (abi < 4)
    say(s, "landlock v%d fs", abi);
  else if (any_webhook)
    say(s, "landlock v%d fs+net (bind only: webhooks to any port)", abi);
  else
    say(s, "landlock v%d fs+net (%zu ports)", abi, ports.n);
  return 0;
}

/* ---- the system call filter ---- */

/*
 * The calls a confined fetcher makes, found by running the fetcher's integration tests with every other call
 * trapped and logged: file reads and memory, threads (clone with thread flags only, below), futexes, time, signals
 * (rt_sigaction below), sockets and polling (curl, nng, the resolver), and the few process queries glibc makes.
 */
static const char *const allowed[] = {
    "read",
    "write",
    "readv",
    "writev",
    "pread64",
    "close",
    "open",
    "openat",
    "lseek",
    "fstat",
    "newfstatat",
    "stat",
    "lstat",
    "statx",
    "access",
    "faccessat",
    "faccessat2",
    "readlink",
    "readlinkat",
    "getdents64",
    "getcwd",
    "fcntl",
    "dup",
    "dup2",
    "dup3",
    "pipe",
    "pipe2",
    "mmap",
    "munmap",
    "mremap",
    "mprotect",
    "madvise",
    "brk",
    "futex",
    "set_robust_list",
    "rseq",
    "set_tid_address",
    "sched_yield",
    "sched_getaffinity",
    "getrandom",
    "membarrier",
    "clock_gettime",
    "clock_getres",
    "clock_nanosleep",
    "nanosleep",
    "gettimeofday",
    "time",
    "rt_sigprocmask",
    "rt_sigreturn",
    "rt_sigtimedwait",
    "sigaltstack",
    "restart_syscall",
    "tgkill",
    "tkill",
    "getpid",
    "gettid",
    "getppid",
    "getuid",
    "geteuid",
    "getgid",
    "getegid",
    "exit",
    "exit_group",
    "epoll_create1",
    "epoll_ctl",
    "epoll_wait",
    "epoll_pwait",
    "poll",
    "ppoll",
    "select",
    "pselect6",
    "eventfd2",
    "connect",
    "getsockname",
    "getpeername",
    "setsockopt",
    "getsockopt",
    "shutdown",
    "sendto",
    "sendmsg",
    "sendmmsg",
    "recvfrom",
    "recvmsg",
    "recvmmsg",
    "bind",
    "socketpair",
    "uname",
    "sysinfo",
    "getrusage",
    "getrlimit",
    "setitimer",
    "getitimer",
    "timerfd_create",
    "timerfd_settime",
    "sched_getparam",
    "sched_getscheduler",
};

/* What a sanitizer's runtime adds once the process is confined (its reports, its allocator). */
static const char *const allowed_sanitizer[] = {"mincore", "prctl", "getresuid", "getresgid"};

/* Never allowed, whatever the mode: under a sanitizer they fail with EPERM (a report keeps its frames), else kill. */
static const char *const never[] = {"execve",           "execveat",         "fork", "vfork", "ptrace",
                                    "process_vm_readv", "process_vm_writev"};

/* Names of the calls by number, resolved before the filter goes on: the SIGSYS handler may not allocate. */
#define SANDBOX_MAX_NR 512
static const char *call_names[SANDBOX_MAX_NR];
static char refused_prefix[160];
static size_t refused_prefix_len;

static void append(char *line, size_t *len, size_t cap, const char *s, size_t n) {
  if (*len + n > cap) n = cap - *len;
  memcpy(line + *len, s, n);
  *len += n;
}

/*
 * A refused call: one log line naming it, then death by SIGSYS (the call never ran). The handler cannot be replaced
 * (rt_sigaction of SIGSYS is itself refused) and a masked SIGSYS is forced through by the kernel.
 */
static void on_sigsys(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)uc;
  char line[320], num[24];
  size_t len = 0;
  append(line, &len, sizeof(line), refused_prefix, refused_prefix_len);
  int nr = si->si_syscall;
  const char *name = nr >= 0 && nr < SANDBOX_MAX_NR && call_names[nr] != NULL ? call_names[nr] : "unknown";
  append(line, &len, sizeof(line), name, strlen(name));
  append(line, &len, sizeof(line), "\",\"nr\":", 7);
  size_t k = sizeof(num);
  unsigned v = (unsigned)nr;
  do {
    num[--k] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0 && k > 0);
  append(line, &len, sizeof(line), num + k, sizeof(num) - k);
  append(line, &len, sizeof(line), "}\n", 2);
  ssize_t w = write(STDERR_FILENO, line, len);
  (void)w;
  signal(SIGSYS, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGSYS);
  sigprocmask(SIG_UNBLOCK, &set, NULL);
  raise(SIGSYS);
  _exit(128 + SIGSYS);
}

static int prepare_trap(void) {
  for (int nr = 0; nr < SANDBOX_MAX_NR; nr++)
    if (call_names[nr] == NULL) call_names[nr] = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
  int n = snprintf(refused_prefix, sizeof(refused_prefix),
                   "{\"level\":\"error\",\"component\":\"fetcher\",\"pid\":%d,\"msg\":\"system call refused by the "
                   "sandbox: process killed\",\"syscall\":\"",
                   (int)getpid());
  if (n < 0 || (size_t)n >= sizeof(refused_prefix)) return -ENOMEM;
  refused_prefix_len = (size_t)n;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_sigsys;
  sa.sa_flags = SA_SIGINFO;
  sigfillset(&sa.sa_mask);
  return sigaction(SIGSYS, &sa, NULL) == 0 ? 0 : -errno;
}

/* The calls with at least one rule that allows them, for the start line's count. */
static unsigned char allowed_bits[SANDBOX_MAX_NR / 8];

static int allow(scmp_filter_ctx ctx, int nr, unsigned nargs, struct scmp_arg_cmp a, struct scmp_arg_cmp b) {
  int rv = nargs == 0   ? seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0)
           : nargs == 1 ? seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, a)
                        : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 2, a, b);
  if (rv == -EEXIST) rv = 0;
  if (rv == 0 && nr >= 0 && nr < SANDBOX_MAX_NR) allowed_bits[nr / 8] |= (unsigned char)(1u << (nr % 8));
  return rv;
}

static int allow_names(scmp_filter_ctx ctx, const char *const *names, size_t n) {
  const struct scmp_arg_cmp none = {0};
  for (size_t i = 0; i < n; i++) {
    int nr = seccomp_syscall_resolve_name(names[i]);
    if (nr == __NR_SCMP_ERROR || nr < 0) continue;
    int rv = allow(ctx, nr, 0, none, none);
    if (rv != 0) return rv;
  }
  return 0;
}

/* Calls allowed with some arguments only: each row is one more rule (rules of a call are alternatives). */
static int allow_with_arguments(scmp_filter_ctx ctx) {
  const struct scmp_arg_cmp none = {0};
  /* Threads only: a new process (fork, or a clone without CLONE_THREAD) is refused. */
  int rv = allow(ctx, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD | CLONE_VM, CLONE_THREAD | CLONE_VM),
                 none);
  /* clone3's flags sit behind a pointer the filter cannot read: glibc falls back to clone on ENOSYS. */
  if (rv == 0) rv = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  /* Any handler but SIGSYS's, which must stay the one that logs and dies. */
  if (rv == 0) rv = allow(ctx, SCMP_SYS(rt_sigaction), 1, SCMP_A0(SCMP_CMP_NE, SIGSYS), none);
  /* Sockets of the families the fetcher uses: IP for everything, netlink for getaddrinfo, UNIX for nscd. */
  static const int families[] = {AF_INET, AF_INET6, AF_UNIX, AF_NETLINK};
  for (size_t i = 0; rv == 0 && i < sizeof(families) / sizeof(families[0]); i++)
    rv = allow(ctx, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, families[i]), none);
  /* Reading any limit of its own; changing only the CPU one (each job's soft limit, job.c). */
  if (rv == 0) rv = allow(ctx, SCMP_SYS(prlimit64), 2, SCMP_A0(SCMP_CMP_EQ, 0), SCMP_A2(SCMP_CMP_EQ, 0));
  if (rv == 0) rv = allow(ctx, SCMP_SYS(prlimit64), 2, SCMP_A0(SCMP_CMP_EQ, 0), SCMP_A1(SCMP_CMP_EQ, RLIMIT_CPU));
  if (rv == 0) rv = allow(ctx, SCMP_SYS(setrlimit), 1, SCMP_A0(SCMP_CMP_EQ, RLIMIT_CPU), none);
  static const unsigned long ioctls[] = {FIONBIO, FIONREAD, TCGETS, FIOCLEX};
  for (size_t i = 0; rv == 0 && i < sizeof(ioctls) / sizeof(ioctls[0]); i++)
    rv = allow(ctx, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_EQ, ioctls[i]), none);
  /* Thread names (nng, libavcodec). */
  static const int options[] = {PR_SET_NAME, PR_GET_NAME};
  for (size_t i = 0; rv == 0 && i < sizeof(options) / sizeof(options[0]); i++)
    rv = allow(ctx, SCMP_SYS(prctl), 1, SCMP_A0(SCMP_CMP_EQ, options[i]), none);
  return rv;
}

static int apply_seccomp(enum sandbox_mode mode, struct said *s, char *err, size_t errlen) {
  int rv = mode == SANDBOX_ON ? prepare_trap() : 0;
  if (rv != 0) {
    snprintf(err, errlen, "seccomp: cannot install the SIGSYS handler: %s", strerror(-rv));
    return rv;
  }
  scmp_filter_ctx ctx = seccomp_init(mode == SANDBOX_ON ? SCMP_ACT_TRAP : SCMP_ACT_LOG);
  if (ctx == NULL) {
    snprintf(err, errlen, "seccomp: cannot create a filter");
    return -ENOMEM;
  }
  /*
   * The process has one thread here (sandbox_enter checks): the threads started later inherit the filter, so no
   * thread synchronisation is asked for, and libseccomp may load the filter with prctl where a service manager's
   * own filter refuses the seccomp call.
   */
  rv = allow_names(ctx, allowed, sizeof(allowed) / sizeof(allowed[0]));
  if (rv == 0 && SANDBOX_SANITIZER)
    rv = allow_names(ctx, allowed_sanitizer, sizeof(allowed_sanitizer) / sizeof(allowed_sanitizer[0]));
  if (rv == 0) rv = allow_with_arguments(ctx);
  for (size_t i = 0; rv == 0 && i < sizeof(never) / sizeof(never[0]); i++) {
    int nr = seccomp_syscall_resolve_name(never[i]);
    if (nr == __NR_SCMP_ERROR || nr < 0) continue;
    if (SANDBOX_SANITIZER) rv = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
  }
  if (rv == 0) rv = seccomp_load(ctx);
  seccomp_release(ctx);
  if (rv != 0) {
    snprintf(err, errlen, "seccomp: cannot load the filter: %s", strerror(-rv));
    return rv;
  }
  unsigned count = 0;
  for (int nr = 0; nr < SANDBOX_MAX_NR; nr++) count += (allowed_bits[nr / 8] >> (nr % 8)) & 1u;
  allowed_calls = count;
  say(s, "seccomp (%u calls%s)", count, mode == SANDBOX_ON ? "" : ", others logged not refused");
  return 0;
}

/* Landlock binds the calling thread only: a thread started before it would stay free. */
static int single_threaded(void) {
  DIR *d = opendir("/proc/self/task");
  if (d == NULL) return 1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n == 1;
}

int sandbox_enter(const struct vts_config *cfg, char *err, size_t errlen) {
  enum sandbox_mode mode = parse_mode(cfg->sandbox);
  struct said s = {.len = 0};
  uint8_t in_force = 0;
  if (mode == SANDBOX_OFF) {
    log_msg(LOG_WARN, "sandbox off (VTS_SANDBOX=off): this fetcher runs with all the rights of its user", NULL);
    return 0;
  }
  const int strict = mode == SANDBOX_ON;
  if (!single_threaded()) {
    snprintf(err, errlen, "sandbox: the process already runs threads");
    return -EBUSY;
  }
  int rv = apply_limits(cfg, &s);
  if (rv == 0)
    in_force |= 1u << PROTO_SANDBOX_RLIMITS;
  else if (strict) {
    snprintf(err, errlen, "cannot set resource limits: %s", strerror(-rv));
    return rv;
  } else {
    log_msg(LOG_WARN, "sandbox: cannot set resource limits", "error", strerror(-rv), NULL);
  }

  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    snprintf(err, errlen, "cannot set no_new_privs: %s", strerror(errno));
    return -errno;
  }
  in_force |= 1u << PROTO_SANDBOX_NO_NEW_PRIVS;
  say(&s, "no_new_privs");

#if SANDBOX_SANITIZER
  /*
   * LeakSanitizer's exit check stops the threads with ptrace, which the filter refuses: it runs here instead, once,
   * while the process may still trace its own threads (and the leak check of job code runs where the fetcher is not
   * confined: the unit tests and VTS_SANDBOX=off).
   */
  __lsan_do_leak_check();
#endif
  rv = drop_user(cfg, &s, err, errlen);
  if (rv != 0 && strict) return rv;
  if (rv != 0)
    log_msg(LOG_WARN, "sandbox: cannot change user", "error", err, NULL);
  else
    in_force |= 1u << PROTO_SANDBOX_USER;

  int abi = landlock_abi();
  if (mode == SANDBOX_WARN) {
    log_msg(LOG_WARN, "sandbox: landlock off (VTS_SANDBOX=warn: it has no logging mode)", NULL);
  } else if (abi <= 0) {
    log_msg(LOG_WARN, "sandbox: the kernel offers no landlock: files and ports stay open to this user", "error",
            strerror(abi == 0 ? ENOSYS : -abi), NULL);
  } else {
    rv = apply_landlock(cfg, abi, &s, err, errlen);
    if (rv != 0) return rv;
    in_force |= 1u << PROTO_SANDBOX_LANDLOCK_FS;
    if (abi >= 4) in_force |= 1u << PROTO_SANDBOX_LANDLOCK_NET;
    if (abi < 4)
      log_msg(LOG_WARN, "sandbox: the kernel's landlock predates network rules (ABI 4): ports stay open", NULL);
  }

  /* Each step of the confinement is answered alike (strict: fail; else: say what is not in force). */
  rv = apply_seccomp(mode, &s, err, errlen);
  if (rv != 0 && strict) return rv;
  if (rv != 0)
    log_msg(LOG_WARN, "sandbox: no system call filter", "error", err, NULL);
  else
    in_force |= 1u << PROTO_SANDBOX_SECCOMP;

  layers_in_force = in_force;
  log_msg(LOG_INFO, "sandbox in force", "mode", cfg->sandbox, "layers", s.text, NULL);
  return 0;
}
