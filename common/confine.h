/*
 * The gateway's own confinement (VTS_SANDBOX): its workers and its dispatcher, once forked, set no_new_privs and load
 * a seccomp filter that refuses the calls none of them makes and an intruder would want: running a program, tracing
 * a process, mounting, loading BPF or kernel modules, changing user or group, the kernel keyring, namespaces, and
 * the like (docs/REFERENCE.md "Sandbox"). A refused call ends the process (the master starts another). The master
 * stays free: it forks and restarts its children. The fetcher's stricter sandbox is fetcher/process/sandbox.h.
 */
#ifndef VTS_CONFINE_H
#define VTS_CONFINE_H

#include <stdbool.h>

#include "common/config.h"

/* True when s is a value of VTS_SANDBOX: on, warn or off. */
bool confine_mode_valid(const char *s);

/*
 * Confines the calling process as VTS_SANDBOX says (off: nothing; warn: refused calls are logged by the kernel and
 * run; on: they kill the process) and logs the layers in force ("sandbox in force"). Returns 0, or a negative errno
 * (the process should then exit).
 */
int confine_gateway_child(const struct vts_config *cfg);

#endif
