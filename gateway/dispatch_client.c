/* Stand-in until the dispatcher lands: every job fails inside the service (500). */
#include "gateway/dispatch_client.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

int dispatch_client_init(uv_loop_t *loop, const struct vts_config *cfg, const char *url) { (void)loop; (void)cfg; (void)url; return 0; }
void dispatch_client_close(void) {}
int dispatch_submit(const struct proto_job *job, dispatch_cb cb, void *arg) { (void)job; cb(arg, NULL); return 0; }
int dispatcher_main(const struct vts_config *cfg, const char *worker_url) { (void)cfg; (void)worker_url; pause(); return 0; }
