/* The delivery of a batch job's webhook (see webhook.h). */
#include "fetcher/egress/webhook.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/netaddr.h"
#include "common/util.h"
#include "fetcher/egress/transport.h"

struct webhook {
  struct netaddr_allow allow;
  struct transport t;
};

/* The connect check of one try. */
struct try_ctx {
  const struct netaddr_allow *allow;
  int https;
};

int webhook_address_allowed(const struct netaddr_allow *allow, int https, const struct sockaddr *sa) {
  if (netaddr_allow_has(allow, sa)) return 1;
  return https && netaddr_is_public(sa);
}

static int connect_check(void *arg, const struct sockaddr *sa) {
  const struct try_ctx *c = arg;
  return webhook_address_allowed(c->allow, c->https, sa) ? 0 : -EACCES;
}

int webhook_new(const struct vts_config *cfg, struct webhook **out, char *err, size_t errlen) {
  struct webhook *w = calloc(1, sizeof(*w));
  if (w == NULL) return -ENOMEM;
  char why[128];
  if (netaddr_allow_parse(cfg->webhook_allow, &w->allow, why, sizeof(why)) != 0) {
    snprintf(err, errlen, "VTS_WEBHOOK_ALLOW: %s", why);
    free(w);
    return -EINVAL;
  }
  if (transport_init(&w->t) != 0) {
    free(w);
    return -ENOMEM;
  }
  *out = w;
  return 0;
}

void webhook_free(struct webhook *w) {
  if (w == NULL) return;
  transport_cleanup(&w->t);
  free(w);
}

/* A header value the gateway made: printable ASCII only, so no line can be added to the request. */
static int header_value_ok(const char *s) {
  if (s[0] == '\0') return 0;
  for (; *s != '\0'; s++)
    if (*s < 0x21 || *s > 0x7e) return 0;
  return 1;
}

void webhook_deliver(struct webhook *w, const struct proto_job *job, uint64_t deadline_ms, struct fetch_outcome *out,
                     struct buf *status) {
  char url[VTS_WEBHOOK_URL_MAX_BYTES + 1];
  char scheme[16], host[256];
  if (job->hook_url_len == 0 || job->hook_url_len >= sizeof(url) || !header_value_ok(job->hook_id) ||
      !header_value_ok(job->hook_signature)) {
    fetch_outcome_set(out, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "bad_job");
    return;
  }
  memcpy(url, job->hook_url, job->hook_url_len);
  url[job->hook_url_len] = '\0';
  if (memchr(url, '\0', job->hook_url_len) != NULL ||
      transport_url_parts(url, scheme, sizeof(scheme), host, sizeof(host), NULL, 0) != 0 ||
      (strcmp(scheme, "https") != 0 && strcmp(scheme, "http") != 0)) {
    fetch_outcome_set(out, PROTO_UPSTREAM_FAILED, PROTO_REASON_REFUSED, "url_refused");
    return;
  }
  char id[PROTO_MAX_HOOK_ID + 32], ts[64], sig[PROTO_MAX_HOOK_SIG + 32];
  snprintf(id, sizeof(id), "webhook-id: %s", job->hook_id);
  snprintf(ts, sizeof(ts), "webhook-timestamp: %llu", (unsigned long long)job->hook_timestamp);
  snprintf(sig, sizeof(sig), "webhook-signature: %s", job->hook_signature);
  const char *const headers[] = {"Content-Type: application/json", id, ts, sig, NULL};
  struct try_ctx ctx = {&w->allow, strcmp(scheme, "https") == 0};
  uint64_t now = util_now_ms();
  struct transport_req req = {
      .url = url,
      .post = 1,
      .body = job->hook_body != NULL ? job->hook_body : "",
      .body_len = job->hook_body_len,
      .headers = headers,
      .user_agent = "vts-webhook/1",
      .deadline_ms = now + VTS_WEBHOOK_TIMEOUT_MS < deadline_ms ? now + VTS_WEBHOOK_TIMEOUT_MS : deadline_ms,
      .max_bytes = VTS_WEBHOOK_MAX_REPLY_BYTES,
      .request_id = job->request_id,
      .fresh_connection = 1,
      .connect_check = connect_check,
      .connect_ctx = &ctx,
  };
  struct buf reply = BUF_INIT;
  long code = 0;
  uint8_t reason = PROTO_REASON_NONE;
  int rv = transport_perform(&w->t, &req, &reply, &code, &reason);
  buf_free(&reply);
  if (code >= 100 && code <= 599) buf_printf(status, "%ld", code);
  char detail[32];
  /* A reply longer than we read still said its status: the receiver took the message. */
  if ((rv == 0 || rv == -EFBIG) && code >= 200 && code <= 299) {
    fetch_outcome_ok(out);
  } else if (rv == -EACCES) {
    fetch_outcome_set(out, PROTO_UPSTREAM_FAILED, PROTO_REASON_REFUSED, "address_refused");
  } else if ((rv == 0 || rv == -EFBIG) && code >= 300 && code <= 399) {
    snprintf(detail, sizeof(detail), "redirect_%ld", code);
    fetch_outcome_set(out, PROTO_UPSTREAM_FAILED, PROTO_REASON_REFUSED, detail);
  } else if (rv == 0 || (rv == -EFBIG && code > 0)) {
    snprintf(detail, sizeof(detail), "http_%ld", code);
    fetch_outcome_set(out, PROTO_UPSTREAM_FAILED, code >= 500 ? PROTO_REASON_HTTP_5XX : PROTO_REASON_HTTP_OTHER,
                      detail);
  } else {
    fetch_outcome_set(out, PROTO_UPSTREAM_FAILED, reason, proto_reason_name(reason));
  }
}
