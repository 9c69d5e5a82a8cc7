#include "fetcher/platform/potoken.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "fetcher/egress/transport.h"
#include "fetcher/readers/jsonstream.h"
#include "proto/proto.h"

/* One kept token: the content binding it was issued for, and until when (util_now_ms clock) it is used. */
struct pot_slot {
  char binding[POTOKEN_MAX_BINDING + 1];
  char token[VTS_POT_MAX_TOKEN_BYTES + 1];
  uint64_t keep_until_ms; /* 0: an empty slot */
};

struct potoken {
  struct buf url;   /* the request URL: credentials and query as the operator gave them */
  char origin[288]; /* scheme://host[:port], what logs name */
  uint64_t timeout_ms;
  struct transport t; /* made at the first request (after curl_global_init) */
  int t_ready;
  struct pot_slot slots[VTS_POT_CACHE_SLOTS];
};

int potoken_request_url(const char *base, struct buf *out, char *origin, size_t originlen) {
  CURLU *h = curl_url();
  if (h == NULL) return -ENOMEM;
  int rv = -EINVAL;
  char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL, *frag = NULL, *full = NULL;
  if (curl_url_set(h, CURLUPART_URL, base, 0) != CURLUE_OK) goto done;
  if (curl_url_get(h, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK) goto done;
  if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) goto done;
  if (curl_url_get(h, CURLUPART_HOST, &host, 0) != CURLUE_OK || host[0] == '\0') goto done;
  if (curl_url_get(h, CURLUPART_FRAGMENT, &frag, 0) == CURLUE_OK) goto done;
  if (curl_url_get(h, CURLUPART_PORT, &port, 0) != CURLUE_OK) port = NULL;
  if (curl_url_get(h, CURLUPART_PATH, &path, 0) != CURLUE_OK) goto done;
  size_t n = strlen(path);
  while (n > 0 && path[n - 1] == '/') n--;
  struct buf p = BUF_INIT;
  rv = buf_printf(&p, "%.*s/get_pot", (int)n, path);
  if (rv == 0 && curl_url_set(h, CURLUPART_PATH, p.data, 0) != CURLUE_OK) rv = -EINVAL;
  buf_free(&p);
  if (rv != 0) goto done;
  rv = -EINVAL;
  if (curl_url_get(h, CURLUPART_URL, &full, 0) != CURLUE_OK) goto done;
  rv = buf_puts(out, full);
  if (rv == 0 && origin != NULL) {
    if (port != NULL)
      snprintf(origin, originlen, "%s://%s:%s", scheme, host, port);
    else
      snprintf(origin, originlen, "%s://%s", scheme, host);
  }
done:
  curl_free(scheme);
  curl_free(host);
  curl_free(port);
  curl_free(path);
  curl_free(frag);
  curl_free(full);
  curl_url_cleanup(h);
  return rv;
}

int potoken_new(const char *url, uint64_t timeout_ms, struct potoken **out, char *err, size_t errlen) {
  struct potoken *p = calloc(1, sizeof(*p));
  if (p == NULL) return -ENOMEM;
  int rv = potoken_request_url(url, &p->url, p->origin, sizeof(p->origin));
  if (rv != 0) {
    /* The value itself is not repeated: it may hold the provider's credentials. */
    if (rv == -EINVAL)
      snprintf(err, errlen,
               "VTS_POT_PROVIDER_URL: invalid value: expected an http:// or https:// URL with a host and "
               "no fragment");
    buf_free(&p->url);
    free(p);
    return rv;
  }
  p->timeout_ms = timeout_ms;
  *out = p;
  return 0;
}

void potoken_free(struct potoken *p) {
  if (p == NULL) return;
  if (p->t_ready) transport_cleanup(&p->t);
  buf_free(&p->url);
  free(p);
}

/* The members of a reply, as jsonstream's field ids of the root object. */
enum { F_NONE = 0, F_TOKEN, F_BINDING, F_EXPIRES, F_ERROR };

struct reply {
  char *token;
  size_t tokenlen;
  const char *binding;
  int64_t expires_ms;
  int has_token, binding_ok, has_binding, has_error, bad;
};

static int reply_key(void *ctx, int node, const char *key, size_t len) {
  (void)ctx;
  if (node != JSONSTREAM_ROOT) return F_NONE;
  static const struct {
    const char *name;
    int field;
  } members[] = {{"poToken", F_TOKEN}, {"contentBinding", F_BINDING}, {"expiresAt", F_EXPIRES}, {"error", F_ERROR}};
  for (size_t i = 0; i < sizeof(members) / sizeof(members[0]); i++)
    if (len == strlen(members[i].name) && memcmp(key, members[i].name, len) == 0) return members[i].field;
  return F_NONE;
}

static int reply_open(void *ctx, int node, int field, int is_array) {
  (void)node;
  (void)is_array;
  struct reply *r = ctx;
  /* An object or array where a string belongs: out of shape. An error object still says the provider refuses. */
  if (field == F_ERROR)
    r->has_error = 1;
  else if (field != F_NONE)
    r->bad = 1;
  return JSONSTREAM_SKIP;
}

static int reply_close(void *ctx, int node) {
  (void)ctx;
  (void)node;
  return 0;
}

/* base64url, with '=' padding: a token goes into a URL as it is. */
static int token_chars_ok(const char *s, size_t len) {
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
          c == '='))
      return 0;
  }
  return 1;
}

static int reply_scalar(void *ctx, int node, int field, enum jsonstream_kind kind, const char *s, size_t len) {
  (void)node;
  struct reply *r = ctx;
  if (field == F_ERROR) {
    /* {"error": null} says nothing; any other value is the provider's refusal. */
    if (kind != JSONSTREAM_NULL) r->has_error = 1;
    return 0;
  }
  if (field == F_NONE) return 0;
  if (kind != JSONSTREAM_STRING) {
    r->bad = 1;
    return 0;
  }
  if (field == F_TOKEN) {
    if (len == 0 || len > VTS_POT_MAX_TOKEN_BYTES || len >= r->tokenlen || !token_chars_ok(s, len)) {
      r->bad = 1;
      return 0;
    }
    memcpy(r->token, s, len);
    r->token[len] = '\0';
    r->has_token = 1;
  } else if (field == F_BINDING) {
    r->has_binding = 1;
    r->binding_ok = len == strlen(r->binding) && memcmp(s, r->binding, len) == 0;
  } else if (field == F_EXPIRES) {
    /* Before 1970 is long past, and -1 is what "no expiry" is held as: out of shape either way. */
    if (util_parse_rfc3339(s, len, &r->expires_ms) != 0 || r->expires_ms < 0) r->bad = 1;
  }
  return 0;
}

int potoken_parse_reply(const char *body, size_t len, const char *binding, char *token, size_t tokenlen,
                        int64_t *expires_ms) {
  static const struct jsonstream_ops ops = {reply_key, reply_open, reply_close, reply_scalar};
  struct reply r = {.token = token, .tokenlen = tokenlen, .binding = binding, .expires_ms = -1};
  if (tokenlen > 0) token[0] = '\0';
  int rv = jsonstream_parse(body, len, 1, &ops, &r);
  if (rv != 0)
    rv = rv == -ENOMEM ? rv : -EPROTO;
  else if (r.has_error)
    rv = -EACCES;
  else if (r.bad || !r.has_token || (r.has_binding && !r.binding_ok))
    rv = -EPROTO;
  if (rv != 0) {
    if (tokenlen > 0) token[0] = '\0';
    return rv;
  }
  *expires_ms = r.expires_ms;
  return 0;
}

uint64_t potoken_keep_ms(int64_t expires_ms, int64_t now_wall_ms) {
  if (expires_ms < 0) return 0;
  int64_t left = expires_ms - now_wall_ms - VTS_POT_EXPIRY_MARGIN_MS;
  if (left <= 0) return 0;
  int64_t most = (int64_t)VTS_POT_MAX_LIFETIME_S * 1000;
  return (uint64_t)(left < most ? left : most);
}

/* The slot of binding while its token lives, else NULL. */
static struct pot_slot *kept(struct potoken *p, const char *binding, uint64_t now) {
  for (size_t i = 0; i < VTS_POT_CACHE_SLOTS; i++) {
    struct pot_slot *s = &p->slots[i];
    if (s->keep_until_ms > now && strcmp(s->binding, binding) == 0) return s;
  }
  return NULL;
}

/* Keeps token for binding until keep_until: in binding's own slot, an empty or expired one, or the soonest to end. */
static void store_token(struct potoken *p, const char *binding, const char *token, uint64_t now, uint64_t keep_until) {
  struct pot_slot *best = &p->slots[0];
  for (size_t i = 0; i < VTS_POT_CACHE_SLOTS; i++) {
    struct pot_slot *s = &p->slots[i];
    if (strcmp(s->binding, binding) == 0 || s->keep_until_ms <= now) {
      best = s;
      break;
    }
    if (s->keep_until_ms < best->keep_until_ms) best = s;
  }
  snprintf(best->binding, sizeof(best->binding), "%s", binding);
  snprintf(best->token, sizeof(best->token), "%s", token);
  best->keep_until_ms = keep_until;
}

void potoken_forget(struct potoken *p, const char *binding, const char *token) {
  if (p == NULL) return;
  for (size_t i = 0; i < VTS_POT_CACHE_SLOTS; i++) {
    struct pot_slot *s = &p->slots[i];
    if (s->keep_until_ms != 0 && strcmp(s->binding, binding) == 0 && strcmp(s->token, token) == 0) {
      memset(s, 0, sizeof(*s));
      log_msg(LOG_INFO, "po token refused by the platform: forgotten", "binding", binding, NULL);
    }
  }
}

static int failed(struct potoken *p, struct fetch_outcome *o, const char *detail, const char *request_id, long status,
                  uint64_t started) {
  char code[24], dur[24];
  snprintf(code, sizeof(code), "%ld", status);
  snprintf(dur, sizeof(dur), "%llu", (unsigned long long)(util_now_ms() - started));
  log_msg(LOG_WARN, "po token provider gave no token", "request_id", request_id, "provider", p->origin, "detail",
          detail, "=provider_status", code, "=dur_ms", dur, NULL);
  fetch_outcome_set(o, PROTO_UPSTREAM_FAILED, PROTO_REASON_PO_TOKEN, detail);
  return -EIO;
}

int potoken_get(struct potoken *p, const char *binding, uint64_t deadline_ms, const char *request_id, char *token,
                size_t tokenlen, struct fetch_outcome *o) {
  uint64_t now = util_now_ms();
  if (strlen(binding) > POTOKEN_MAX_BINDING || tokenlen == 0) {
    fetch_outcome_set(o, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "pot_bad_binding");
    return -EINVAL;
  }
  const struct pot_slot *s = kept(p, binding, now);
  if (s != NULL) {
    snprintf(token, tokenlen, "%s", s->token);
    return 0;
  }
  /* The provider's own deadline, inside the job's: a provider that hangs costs at most this. */
  uint64_t deadline = now + p->timeout_ms < deadline_ms ? now + p->timeout_ms : deadline_ms;
  if (!p->t_ready) {
    if (transport_init(&p->t) != 0) {
      fetch_outcome_set(o, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "no_memory");
      return -ENOMEM;
    }
    p->t_ready = 1;
  }
  struct buf body = BUF_INIT, reply = BUF_INIT;
  static const char *const headers[] = {"Content-Type: application/json", "Accept: application/json", NULL};
  int rv = buf_puts(&body, "{\"content_binding\":\"");
  if (rv == 0) rv = buf_json_escape(&body, binding, strlen(binding));
  if (rv == 0) rv = buf_puts(&body, "\"}");
  if (rv != 0) {
    buf_free(&body);
    fetch_outcome_set(o, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "no_memory");
    return -ENOMEM;
  }
  struct transport_req req = {
      .url = p->url.data,
      .post = 1,
      .body = body.data,
      .body_len = body.len,
      .headers = headers,
      .deadline_ms = deadline,
      .max_bytes = VTS_POT_MAX_REPLY_BYTES,
      .request_id = request_id,
      .operator_url = 1, /* the operator's own provider: plain http off loopback is theirs to choose */
  };
  long status = 0;
  uint8_t reason = PROTO_REASON_NONE;
  rv = transport_perform(&p->t, &req, &reply, &status, &reason);
  buf_free(&body);
  int64_t expires_ms = -1;
  const char *detail = NULL;
  if (rv != 0)
    detail = reason == PROTO_REASON_TIMEOUT   ? "pot_timeout"
             : reason == PROTO_REASON_NETWORK ? "pot_unreachable"
                                              : "pot_malformed";
  else if (status != 200)
    detail = "pot_refused";
  else {
    rv = potoken_parse_reply(reply.data ? reply.data : "", reply.len, binding, token, tokenlen, &expires_ms);
    if (rv == -EACCES)
      detail = "pot_refused";
    else if (rv != 0)
      detail = "pot_malformed";
  }
  buf_free(&reply);
  if (detail != NULL) {
    if (tokenlen > 0) token[0] = '\0';
    return failed(p, o, detail, request_id, status, now);
  }
  int64_t wall_ms = util_wall_ms();
  if (expires_ms >= 0 && expires_ms <= wall_ms) {
    token[0] = '\0';
    return failed(p, o, "pot_expired", request_id, status, now);
  }
  uint64_t keep_ms = potoken_keep_ms(expires_ms, wall_ms);
  if (keep_ms > 0) store_token(p, binding, token, util_now_ms(), util_now_ms() + keep_ms);
  char dur[24], kept_s[24];
  snprintf(dur, sizeof(dur), "%llu", (unsigned long long)(util_now_ms() - now));
  snprintf(kept_s, sizeof(kept_s), "%llu", (unsigned long long)(keep_ms / 1000));
  log_msg(LOG_INFO, "po token issued", "request_id", request_id, "provider", p->origin, "binding", binding, "=dur_ms",
          dur, "=kept_s", kept_s, NULL);
  return 0;
}
