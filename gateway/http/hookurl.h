/*
 * The check of a batch job's webhook_url at POST /v1/jobs, before the job exists: an absolute http or https URL with
 * a host and no user name or password, sent over https unless its host is an address VTS_WEBHOOK_ALLOW permits (then
 * plain http is allowed too), and never to an address literal that is not public unless VTS_WEBHOOK_ALLOW permits it.
 * A name passes here: what it resolves to is checked by the fetcher each time it connects (fetcher/egress/webhook.c).
 */
#ifndef VTS_HOOKURL_H
#define VTS_HOOKURL_H

#include <stddef.h>

#include "common/netaddr.h"

enum hookurl_verdict {
  HOOKURL_OK,
  HOOKURL_MALFORMED, /* 400 invalid_request */
  HOOKURL_REFUSED,   /* 400 webhook_url_refused: a well-formed URL to a destination the service does not call */
};

/* Checks the len bytes of url against allow; on anything but HOOKURL_OK, msg (msglen bytes) names webhook_url. */
enum hookurl_verdict hookurl_check(const char *url, size_t len, const struct netaddr_allow *allow, char *msg,
                                   size_t msglen);

#endif
