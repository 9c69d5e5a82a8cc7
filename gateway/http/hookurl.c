/* The check of a webhook_url (see hookurl.h). */
#include "gateway/http/hookurl.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/limits.h"

#define MSG_URL "webhook_url must be an absolute http or https URL of at most 2047 bytes."
#define MSG_USERINFO "webhook_url must not carry a user name or password."
#define MSG_HOST "webhook_url must name a host (a DNS name or an IP address) and at most a valid port."
#define MSG_HTTPS "webhook_url must use https (plain http only to an address of VTS_WEBHOOK_ALLOW)."
#define MSG_ADDRESS "webhook_url names an address that is not public and not in VTS_WEBHOOK_ALLOW."

/* The characters RFC 3986 allows in a URI, '%' included (an escape): no blank, quote, angle bracket or control. */
static bool uri_char(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return c != '\0' && strchr("-._~:/?#[]@!$&'()*+,;=%", c) != NULL;
}

/* A DNS name of letters, digits and hyphens: labels of 1 to 63, 253 in all, the last not all digits. */
static bool dns_name(const char *h, size_t n) {
  if (n > 0 && h[n - 1] == '.') n--; /* a fully qualified name's root */
  if (n == 0 || n > 253) return false;
  size_t start = 0;
  bool digits_only = true;
  for (size_t i = 0; i <= n; i++) {
    if (i == n || h[i] == '.') {
      size_t len = i - start;
      if (len == 0 || len > 63 || h[start] == '-' || h[i - 1] == '-') return false;
      start = i + 1;
      if (i < n) digits_only = true;
      continue;
    }
    char c = h[i];
    bool digit = c >= '0' && c <= '9';
    if (!digit && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') && c != '-') return false;
    if (!digit) digits_only = false;
  }
  /* "127.1" or "2130706433" are addresses in spellings resolvers accept: not names, and not literals we take. */
  return !digits_only;
}

static enum hookurl_verdict verdict_with(enum hookurl_verdict v, const char *text, char *msg, size_t msglen) {
  snprintf(msg, msglen, "%s", text);
  return v;
}

enum hookurl_verdict hookurl_check(const char *url, size_t len, const struct netaddr_allow *allow, char *msg,
                                   size_t msglen) {
  msg[0] = '\0';
  if (url == NULL || len == 0 || len > VTS_WEBHOOK_URL_MAX_BYTES)
    return verdict_with(HOOKURL_MALFORMED, MSG_URL, msg, msglen);
  for (size_t i = 0; i < len; i++)
    if (!uri_char((unsigned char)url[i])) return verdict_with(HOOKURL_MALFORMED, MSG_URL, msg, msglen);
  bool https;
  size_t at;
  if (len > 8 && strncasecmp(url, "https://", 8) == 0) {
    https = true;
    at = 8;
  } else if (len > 7 && strncasecmp(url, "http://", 7) == 0) {
    https = false;
    at = 7;
  } else {
    return verdict_with(HOOKURL_MALFORMED, MSG_URL, msg, msglen);
  }
  size_t end = at;
  while (end < len && url[end] != '/' && url[end] != '?' && url[end] != '#') end++;
  const char *auth = url + at;
  size_t alen = end - at;
  if (memchr(auth, '@', alen) != NULL) return verdict_with(HOOKURL_MALFORMED, MSG_USERINFO, msg, msglen);
  /* The host, and where its port begins (after the IPv6 literal's bracket, else at the first colon). */
  const char *host = auth;
  size_t hlen;
  const char *rest;
  if (alen > 0 && auth[0] == '[') {
    const char *close = memchr(auth, ']', alen);
    if (close == NULL) return verdict_with(HOOKURL_MALFORMED, MSG_HOST, msg, msglen);
    hlen = (size_t)(close - auth) + 1;
    rest = close + 1;
  } else {
    const char *colon = memchr(auth, ':', alen);
    hlen = colon != NULL ? (size_t)(colon - auth) : alen;
    rest = auth + hlen;
  }
  size_t rlen = (size_t)(auth + alen - rest);
  if (rlen > 0) {
    /* ":" and 1 to 5 digits, 1 to 65535. */
    long port = 0;
    if (rest[0] != ':' || rlen < 2 || rlen > 6) return verdict_with(HOOKURL_MALFORMED, MSG_HOST, msg, msglen);
    for (size_t i = 1; i < rlen; i++) {
      if (rest[i] < '0' || rest[i] > '9') return verdict_with(HOOKURL_MALFORMED, MSG_HOST, msg, msglen);
      port = port * 10 + (rest[i] - '0');
    }
    if (port < 1 || port > 65535) return verdict_with(HOOKURL_MALFORMED, MSG_HOST, msg, msglen);
  }
  char h[256];
  if (hlen == 0 || hlen >= sizeof(h)) return verdict_with(HOOKURL_MALFORMED, MSG_HOST, msg, msglen);
  memcpy(h, host, hlen);
  h[hlen] = '\0';
  struct sockaddr_storage sa;
  if (netaddr_parse_literal(h, &sa) != 0) {
    if (h[0] == '[' || !dns_name(h, hlen)) return verdict_with(HOOKURL_MALFORMED, MSG_HOST, msg, msglen);
    /* A name is never in VTS_WEBHOOK_ALLOW (it holds addresses): https, and the fetcher checks where it leads. */
    return https ? HOOKURL_OK : verdict_with(HOOKURL_REFUSED, MSG_HTTPS, msg, msglen);
  }
  if (netaddr_allow_has(allow, (const struct sockaddr *)&sa)) return HOOKURL_OK;
  if (!netaddr_is_public((const struct sockaddr *)&sa)) return verdict_with(HOOKURL_REFUSED, MSG_ADDRESS, msg, msglen);
  return https ? HOOKURL_OK : verdict_with(HOOKURL_REFUSED, MSG_HTTPS, msg, msglen);
}
