/* The HTTP sink of the jobs API (see jobsink.h). */
#include "gateway/http/jobsink.h"

#include <string.h>
#include <strings.h>

#include "common/util.h"

static void http_answer(struct jobsink *s, int status, const char *headers, char *body, size_t len) {
  struct jobsink_http *h = (struct jobsink_http *)s;
  http_respond(h->req, status, headers, body, len, body);
}

static void http_error(struct jobsink *s, enum api_error e, const char *message, const char *headers) {
  struct jobsink_http *h = (struct jobsink_http *)s;
  if (message != NULL)
    http_respond_error_msg(h->req, e, message, headers);
  else
    http_respond_error(h->req, e, headers);
}

static int http_gone(const struct jobsink *s) { return http_request_gone(((const struct jobsink_http *)s)->req); }

static void http_end(struct jobsink *s) { http_request_release(((struct jobsink_http *)s)->req); }

static const struct jobsink_ops http_ops = {http_answer, http_error, http_gone, http_end};

void jobsink_http_init(struct jobsink_http *s, struct http_request *req) {
  s->sink.ops = &http_ops;
  s->req = req;
  http_request_hold(req);
}

int64_t jobsink_retry_after(const char *headers) {
  static const char name[] = "Retry-After:";
  for (const char *p = headers; p != NULL && *p != '\0';) {
    const char *eol = strstr(p, "\r\n");
    size_t n = eol != NULL ? (size_t)(eol - p) : strlen(p);
    if (n > sizeof(name) - 1 && strncasecmp(p, name, sizeof(name) - 1) == 0) {
      const char *v = p + sizeof(name) - 1;
      size_t vn = n - (sizeof(name) - 1);
      while (vn > 0 && *v == ' ') v++, vn--;
      int64_t s = 0;
      return util_parse_i64_n(v, vn, 0, INT64_MAX, &s) == 0 ? s : 0;
    }
    p = eol != NULL ? eol + 2 : NULL;
  }
  return 0;
}
