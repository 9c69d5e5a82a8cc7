#include "common/confine.h"

#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "common/log.h"

#if defined(__SANITIZE_ADDRESS__)
#define CONFINE_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CONFINE_SANITIZER 1
#endif
#endif
#ifndef CONFINE_SANITIZER
#define CONFINE_SANITIZER 0
#endif

/*
 * What no worker or dispatcher does. A worker serves HTTP and reads its key file; a dispatcher talks to fetchers,
 * Redis and SQLite: neither runs a program, traces, mounts or changes its identity.
 */
static const char *const refused[] = {
    "execve",
    "execveat",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "bpf",
    "perf_event_open",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "add_key",
    "request_key",
    "keyctl",
    "setuid",
    "setgid",
    "setreuid",
    "setregid",
    "setresuid",
    "setresgid",
    "setgroups",
    "setfsuid",
    "setfsgid",
    "unshare",
    "setns",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "settimeofday",
    "clock_settime",
    "adjtimex",
    "clock_adjtime",
    "iopl",
    "ioperm",
    "quotactl",
    "open_by_handle_at",
    "name_to_handle_at",
    "userfaultfd",
    "fanotify_init",
    "lookup_dcookie",
    "personality",
    "fsopen",
    "fsmount",
    "move_mount",
    "open_tree",
    "mount_setattr",
};

bool confine_mode_valid(const char *s) {
  return strcmp(s, "on") == 0 || strcmp(s, "warn") == 0 || strcmp(s, "off") == 0;
}

/* Called just after fork, when the child has one thread: every thread it starts later inherits the filter. */
int confine_gateway_child(const struct vts_config *cfg) {
  if (strcmp(cfg->sandbox, "off") == 0) return 0;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    log_msg(LOG_ERROR, "cannot set no_new_privs", "error", strerror(errno), NULL);
    return -errno;
  }
  int warn = strcmp(cfg->sandbox, "warn") == 0;
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == NULL) return -ENOMEM;
  int rv = 0;
  unsigned n = 0;
  for (size_t i = 0; rv == 0 && i < sizeof(refused) / sizeof(refused[0]); i++) {
    int nr = seccomp_syscall_resolve_name(refused[i]);
    if (nr == __NR_SCMP_ERROR || nr < 0) continue;
    /* LeakSanitizer's exit check traces the process's own threads: under a sanitizer, ptrace is left to it. */
    if (CONFINE_SANITIZER && (strcmp(refused[i], "ptrace") == 0 || strcmp(refused[i], "process_vm_readv") == 0))
      continue;
    rv = seccomp_rule_add(ctx, warn ? SCMP_ACT_LOG : SCMP_ACT_KILL_PROCESS, nr, 0);
    n++;
  }
  if (rv == 0) rv = seccomp_load(ctx);
  seccomp_release(ctx);
  if (rv != 0) {
    log_msg(LOG_ERROR, "cannot load the system call filter", "error", strerror(-rv), NULL);
    return rv;
  }
  char layers[96];
  snprintf(layers, sizeof(layers), "no_new_privs, seccomp (%u calls refused%s)", n,
           warn                ? ", logged not refused"
           : CONFINE_SANITIZER ? ", ptrace left to the sanitizer"
                               : "");
  log_msg(LOG_INFO, "sandbox in force", "mode", cfg->sandbox, "layers", layers, NULL);
  return 0;
}
