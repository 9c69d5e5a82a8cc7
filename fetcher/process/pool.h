/*
 * `vts-fetcher --workers N`: a small supervisor that forks N single-job fetcher processes and keeps N alive. It
 * initialises nothing but signals before forking (nng and curl are not fork-safe: each child sets up its own).
 * A dead child is restarted within VTS_FETCHER_RESTART_MAX_MS, sooner when it had been running for a while.
 * SIGTERM or SIGINT is forwarded to every child; the supervisor exits 0 once they all have.
 */
#ifndef VTS_POOL_H
#define VTS_POOL_H

/*
 * Runs n children, each calling child_main(arg) and exiting with its return value; never returns in a child.
 * Children get PR_SET_PDEATHSIG(SIGTERM) so they never outlive the supervisor. Returns the supervisor's exit status.
 */
int pool_run(int n, int (*child_main)(void *arg), void *arg);

#endif
