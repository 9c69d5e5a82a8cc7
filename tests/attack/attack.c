/*
 * An attacker inside a running fetcher, for tests/integration/test_sandbox.py only (never installed, never linked
 * into a program). Preloaded into vts-fetcher (LD_PRELOAD), it takes over curl_easy_setopt: when a request's URL or
 * body holds the mark of an entry of VTS_ATTACK (a job's video id), that entry's attacks run, inside the job, long
 * after the sandbox went up (before the first job); a death is then one of a job in progress. Each attack writes what
 * happened to the descriptor VTS_ATTACK_FD (opened by the test before the process started, so before any sandbox):
 * "<attack> <what> <outcome>" lines, "trying" before a call that may kill the process.
 *
 *   VTS_ATTACK        MARK=attack,attack;MARK=...: each attack one of exec, read:<path>, write:<path>,
 *                     connect:<port>, ptrace_parent, raise_nofile, raise_as (the open file and address space limits)
 */

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static int report_fd = -1;
static unsigned long long fired; /* the entries of VTS_ATTACK that ran */

static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
  va_end(ap);
  if (n < 0 || report_fd < 0) return;
  if ((size_t)n > sizeof(line) - 2) n = (int)sizeof(line) - 2;
  line[n++] = '\n';
  ssize_t w = write(report_fd, line, (size_t)n);
  (void)w;
}

static const char *outcome(int rv) { return rv == 0 ? "succeeded" : strerrorname_np(errno); }

static void attack_one(const char *what) {
  if (strcmp(what, "exec") == 0) {
    report("exec /bin/sh trying");
    execl("/bin/sh", "sh", "-c", "exit 0", (char *)NULL);
    report("exec /bin/sh %s", strerrorname_np(errno));
  } else if (strncmp(what, "read:", 5) == 0) {
    int fd = open(what + 5, O_RDONLY | O_CLOEXEC);
    report("read %s %s", what + 5, fd >= 0 ? "succeeded" : strerrorname_np(errno));
    if (fd >= 0) close(fd);
  } else if (strncmp(what, "write:", 6) == 0) {
    int fd = open(what + 6, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    report("write %s %s", what + 6, fd >= 0 ? "succeeded" : strerrorname_np(errno));
    if (fd >= 0) close(fd);
  } else if (strncmp(what, "connect:", 8) == 0) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)strtol(what + 8, NULL, 10))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rv = s < 0 ? -1 : connect(s, (struct sockaddr *)&a, sizeof(a));
    report("connect %s %s", what + 8, outcome(rv));
    if (s >= 0) close(s);
  } else if (strcmp(what, "ptrace_parent") == 0) {
    report("ptrace %d trying", (int)getppid());
    long rv = ptrace(PTRACE_ATTACH, getppid(), NULL, NULL);
    report("ptrace %d %s", (int)getppid(), outcome(rv == 0 ? 0 : -1));
  } else if (strcmp(what, "raise_as") == 0) {
    struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
    report("setrlimit as trying");
    report("setrlimit as %s", outcome(setrlimit(RLIMIT_AS, &rl)));
  } else if (strcmp(what, "raise_nofile") == 0) {
    struct rlimit rl = {1 << 20, 1 << 20};
    report("setrlimit nofile trying");
    report("setrlimit nofile %s", outcome(setrlimit(RLIMIT_NOFILE, &rl)));
  }
}

/* Runs the attacks of the entry of VTS_ATTACK ("MARK=attack,attack;MARK=...") whose mark text holds, once each. */
static void attack(const char *text) {
  const char *fd = getenv("VTS_ATTACK_FD");
  const char *list = getenv("VTS_ATTACK");
  if (fd == NULL || list == NULL || text == NULL) return;
  report_fd = (int)strtol(fd, NULL, 10);
  for (int entry = 0; *list != '\0' && entry < 64; entry++) {
    size_t n = strcspn(list, ";");
    const char *eq = memchr(list, '=', n);
    char mark[64];
    if (eq != NULL && (size_t)(eq - list) < sizeof(mark)) {
      snprintf(mark, sizeof(mark), "%.*s", (int)(eq - list), list);
      if (!(fired & (1ULL << entry)) && mark[0] != '\0' && strstr(text, mark) != NULL) {
        fired |= 1ULL << entry;
        report("sandbox up uid %d", (int)getuid());
        for (const char *a = eq + 1; a < list + n;) {
          char one[512];
          size_t k = strcspn(a, ",;");
          snprintf(one, sizeof(one), "%.*s", (int)k, a);
          attack_one(one);
          a += k;
          if (*a == ',') a++;
        }
        report("done");
      }
    }
    list += n;
    if (*list == ';') list++;
  }
}

/* Every option's argument is a pointer, a long or a curl_off_t: one 64-bit word on the targets we build for. */
int curl_easy_setopt(void *curl, int option, ...) {
  va_list ap;
  va_start(ap, option);
  void *arg = va_arg(ap, void *);
  va_end(ap);
  int (*real)(void *, int, ...) = (int (*)(void *, int, ...))dlsym(RTLD_NEXT, "curl_easy_setopt");
  /* CURLOPT_URL and CURLOPT_POSTFIELDS: strings, the second a player request's body with its video id. */
  if ((option == 10002 || option == 10015) && arg != NULL) attack((const char *)arg);
  return real(curl, option, arg);
}
