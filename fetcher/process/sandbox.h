/*
 * The fetcher's confinement (VTS_SANDBOX): what a fetcher process may still do once it has read its settings,
 * certificates, profiles and models, before it takes its first job. In order: resource limits, no_new_privs, the
 * drop to VTS_FETCHER_USER when started as root (every capability gone, the bounding and ambient sets too), Landlock
 * (files read only where the fetcher reads, written nowhere; TCP connect only to the ports of its endpoints, bind
 * nothing) and a seccomp-bpf allow-list. docs/REFERENCE.md "Sandbox" says what each layer allows and why.
 *
 * The process must have one thread when sandbox_enter runs: Landlock and the bounding set bind the calling thread
 * only, so every thread started later inherits them.
 */
#ifndef VTS_SANDBOX_H
#define VTS_SANDBOX_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"

/* The values of VTS_SANDBOX. */
enum sandbox_mode { SANDBOX_OFF = 0, SANDBOX_WARN, SANDBOX_ON };

/*
 * Checks VTS_SANDBOX, VTS_FETCHER_USER (when the process is root) and VTS_FETCHER_WEBHOOK_PORTS. Returns 0, or
 * -EINVAL with a message in err.
 */
int sandbox_config_check(const struct vts_config *cfg, char *err, size_t errlen);

/*
 * Confines the calling process as VTS_SANDBOX says and logs the layers in force once ("sandbox in force"). With on, a
 * layer the kernel offers but that cannot be set up is an error; one the kernel lacks is said once (a warning) and
 * the others apply. With warn, the system call filter logs the calls it would refuse (the kernel's log) instead of
 * killing, Landlock (which has no such mode) stays off, and a layer that cannot be set up is a warning. Returns 0,
 * or a negative errno with a message in err (the process must then not take jobs).
 */
int sandbox_enter(const struct vts_config *cfg, char *err, size_t errlen);

/* The layers in force (bits of enum proto_sandbox_layer, proto/proto.h), for the results' gauge; 0 before entry. */
uint8_t sandbox_layers(void);

/* The number of system calls the filter allows (0 when it is off). */
unsigned sandbox_allowed_calls(void);

#endif
