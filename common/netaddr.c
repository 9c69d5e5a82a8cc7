#include "common/netaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

bool netaddr_is_loopback(const char *host) {
  if (host == NULL) return false;
  if (strcasecmp(host, "localhost") == 0) return true;
  struct in_addr a4;
  if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  char bare[INET6_ADDRSTRLEN];
  size_t n = strlen(host);
  if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
    if (n - 2 >= sizeof(bare)) return false;
    memcpy(bare, host + 1, n - 2);
    bare[n - 2] = '\0';
    host = bare;
  }
  struct in6_addr a6;
  return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

/* The bytes of sa as a range would hold them: 4 for IPv4 (an IPv4-mapped IPv6 address too), 16 for IPv6. */
static int addr_bytes(const struct sockaddr *sa, unsigned char out[16], int *family) {
  if (sa->sa_family == AF_INET) {
    memcpy(out, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    *family = AF_INET;
    return 0;
  }
  if (sa->sa_family != AF_INET6) return -EINVAL;
  const struct in6_addr *a6 = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(a6)) {
    memcpy(out, a6->s6_addr + 12, 4);
    *family = AF_INET;
  } else {
    memcpy(out, a6->s6_addr, 16);
    *family = AF_INET6;
  }
  return 0;
}

static bool range_has(const struct netaddr_range *r, int family, const unsigned char *a) {
  if (r->family != family) return false;
  int full = r->prefix / 8, rest = r->prefix % 8;
  if (memcmp(r->addr, a, (size_t)full) != 0) return false;
  if (rest == 0) return true;
  unsigned char mask = (unsigned char)(0xff << (8 - rest));
  return (r->addr[full] & mask) == (a[full] & mask);
}

/* Parses one "address" or "address/prefix" of n bytes at s. Returns 0, or -EINVAL. */
static int range_parse(const char *s, size_t n, struct netaddr_range *out) {
  char text[INET6_ADDRSTRLEN + 8];
  if (n == 0 || n >= sizeof(text)) return -EINVAL;
  memcpy(text, s, n);
  text[n] = '\0';
  char *slash = strchr(text, '/');
  long prefix = -1;
  if (slash != NULL) {
    *slash = '\0';
    const char *p = slash + 1;
    if (*p == '\0' || strlen(p) > 3) return -EINVAL;
    prefix = 0;
    for (; *p != '\0'; p++) {
      if (*p < '0' || *p > '9') return -EINVAL;
      prefix = prefix * 10 + (*p - '0');
    }
  }
  memset(out, 0, sizeof(*out));
  int bits;
  if (inet_pton(AF_INET, text, out->addr) == 1) {
    out->family = AF_INET;
    bits = 32;
  } else if (inet_pton(AF_INET6, text, out->addr) == 1) {
    out->family = AF_INET6;
    bits = 128;
  } else {
    return -EINVAL;
  }
  if (prefix > bits) return -EINVAL;
  out->prefix = prefix < 0 ? bits : (int)prefix;
  /* No bit set below the prefix: "10.1.2.3/16" means something else than it says. */
  for (int b = out->prefix; b < bits; b++)
    if (out->addr[b / 8] & (0x80 >> (b % 8))) return -EINVAL;
  return 0;
}

int netaddr_allow_parse(const char *list, struct netaddr_allow *out, char *err, size_t errlen) {
  memset(out, 0, sizeof(*out));
  const char *p = list != NULL ? list : "";
  while (*p != '\0') {
    size_t len = strcspn(p, ",");
    const char *s = p;
    size_t n = len;
    while (n > 0 && (*s == ' ' || *s == '\t')) s++, n--;
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    if (out->n == NETADDR_MAX_ALLOW) {
      snprintf(err, errlen, "more than %d entries", NETADDR_MAX_ALLOW);
      return -EINVAL;
    }
    if (range_parse(s, n, &out->range[out->n]) != 0) {
      snprintf(err, errlen, "\"%.*s\" is not an address or a CIDR range", (int)(n < 64 ? n : 64), s);
      return -EINVAL;
    }
    out->n++;
    p += len;
    if (*p == ',') p++;
  }
  return 0;
}

int netaddr_parse_literal(const char *host, struct sockaddr_storage *out) {
  memset(out, 0, sizeof(*out));
  if (host == NULL) return -EINVAL;
  struct sockaddr_in *a4 = (struct sockaddr_in *)(void *)out;
  if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    return 0;
  }
  char bare[INET6_ADDRSTRLEN];
  size_t n = strlen(host);
  if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
    if (n - 2 >= sizeof(bare)) return -EINVAL;
    memcpy(bare, host + 1, n - 2);
    bare[n - 2] = '\0';
    host = bare;
  }
  struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)(void *)out;
  if (inet_pton(AF_INET6, host, &a6->sin6_addr) != 1) return -EINVAL;
  a6->sin6_family = AF_INET6;
  return 0;
}

bool netaddr_allow_has(const struct netaddr_allow *allow, const struct sockaddr *sa) {
  unsigned char a[16];
  int family;
  if (allow == NULL || addr_bytes(sa, a, &family) != 0) return false;
  for (size_t i = 0; i < allow->n; i++)
    if (range_has(&allow->range[i], family, a)) return true;
  return false;
}

/* The special-purpose ranges of IANA's registries that a webhook must not reach (public means none of these). */
static const char *const not_public[] = {
    "0.0.0.0/8",      "10.0.0.0/8",   "100.64.0.0/10",  "127.0.0.0/8",    "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24",   "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15",  "198.51.100.0/24",
    "203.0.113.0/24", "224.0.0.0/4",  "240.0.0.0/4",    "64:ff9b::/96",   "64:ff9b:1::/48", "2001::/23",
    "2001:db8::/32",  "2002::/16",    "3fff::/20",      "5f00::/16",
};

bool netaddr_is_public(const struct sockaddr *sa) {
  unsigned char a[16];
  int family;
  if (addr_bytes(sa, a, &family) != 0) return false;
  /* IPv6 unicast that routes on the internet is 2000::/3; everything else (::1, fc00::/7, fe80::/10, ff00::/8...). */
  if (family == AF_INET6 && (a[0] & 0xe0) != 0x20) return false;
  for (size_t i = 0; i < sizeof(not_public) / sizeof(not_public[0]); i++) {
    struct netaddr_range r;
    if (range_parse(not_public[i], strlen(not_public[i]), &r) == 0 && range_has(&r, family, a)) return false;
  }
  return true;
}
