#include "gateway/http/negotiate.h"

#include <string.h>
#include <strings.h>

/* q-values are counted in thousandths: "0.5" is 500. -1 means "not named". */
#define Q_MAX 1000
#define Q_UNNAMED (-1)
/* Identity not named: acceptable, but after any coding the client named with a q above 0. */
#define Q_IDENTITY_DEFAULT 1

static int is_ows(char c) { return c == ' ' || c == '\t'; }

static int is_tchar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Parses the qvalue of RFC 9110 12.4.2 from s (n bytes): "0", "0.", up to three decimals, or 1 with zeros only. */
static int parse_qvalue(const char *s, size_t n) {
  if (n == 0 || n > 5 || (s[0] != '0' && s[0] != '1')) return -1;
  if (n > 1 && s[1] != '.') return -1;
  int q = (s[0] - '0') * Q_MAX;
  int scale = 100;
  for (size_t i = 2; i < n; i++, scale /= 10) {
    if (s[i] < '0' || s[i] > '9') return -1;
    q += (s[i] - '0') * scale;
  }
  return q <= Q_MAX ? q : -1;
}

/*
 * Reads the parameters after a coding, from *pos up to the next top-level comma: returns the q-value (Q_MAX when
 * none), or -1 when a parameter is malformed. A quoted parameter value may hold commas.
 */
static int parse_params(const char *s, size_t len, size_t *pos) {
  size_t i = *pos;
  int q = Q_MAX, bad = 0;
  while (i < len && s[i] != ',') {
    while (i < len && is_ows(s[i])) i++;
    if (i >= len || s[i] == ',') break;
    if (s[i] != ';') {
      bad = 1;
      while (i < len && s[i] != ',') i++;
      break;
    }
    i++;
    while (i < len && is_ows(s[i])) i++;
    size_t name = i;
    while (i < len && is_tchar(s[i])) i++;
    size_t name_len = i - name;
    while (i < len && is_ows(s[i])) i++;
    if (name_len == 0 || i >= len || s[i] != '=') {
      bad = 1;
      continue;
    }
    i++;
    while (i < len && is_ows(s[i])) i++;
    size_t val = i;
    if (i < len && s[i] == '"') {
      for (i++; i < len && s[i] != '"'; i++)
        if (s[i] == '\\' && i + 1 < len) i++;
      if (i < len) i++;
    } else {
      while (i < len && is_tchar(s[i])) i++;
    }
    if (name_len == 1 && (s[name] == 'q' || s[name] == 'Q')) {
      q = parse_qvalue(s + val, i - val);
      if (q < 0) bad = 1;
    }
  }
  *pos = i;
  return bad ? -1 : q;
}

static int token_is(const char *t, size_t n, const char *name) {
  return strlen(name) == n && strncasecmp(t, name, n) == 0;
}

enum entity_coding negotiate_coding(const char *ae, size_t len, unsigned available) {
  if (ae == NULL) return ENTITY_IDENTITY;
  int q[ENTITY_CODINGS] = {Q_UNNAMED, Q_UNNAMED, Q_UNNAMED};
  int star = Q_UNNAMED;
  size_t i = 0;
  while (i < len) {
    while (i < len && (is_ows(ae[i]) || ae[i] == ',')) i++;
    size_t tok = i;
    while (i < len && is_tchar(ae[i])) i++;
    size_t tok_len = i - tok;
    int qv = parse_params(ae, len, &i);
    if (tok_len == 0 || qv < 0) continue;
    int *slot = NULL;
    if (token_is(ae + tok, tok_len, "identity"))
      slot = &q[ENTITY_IDENTITY];
    else if (token_is(ae + tok, tok_len, "br"))
      slot = &q[ENTITY_BR];
    else if (token_is(ae + tok, tok_len, "gzip") || token_is(ae + tok, tok_len, "x-gzip"))
      slot = &q[ENTITY_GZIP];
    else if (token_is(ae + tok, tok_len, "*"))
      slot = &star;
    if (slot != NULL && qv > *slot) *slot = qv;
  }
  for (int c = 0; c < ENTITY_CODINGS; c++) {
    if (q[c] != Q_UNNAMED) continue;
    if (star != Q_UNNAMED)
      q[c] = star;
    else
      q[c] = c == ENTITY_IDENTITY ? Q_IDENTITY_DEFAULT : 0;
  }
  available |= NEGOTIATE_BIT(ENTITY_IDENTITY);
  enum entity_coding best = ENTITY_IDENTITY;
  int best_q = 0;
  /* Ties go to the form listed first in enum entity_coding's preference: br, gzip, then identity. */
  static const enum entity_coding order[] = {ENTITY_BR, ENTITY_GZIP, ENTITY_IDENTITY};
  for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
    enum entity_coding c = order[k];
    if (!(available & NEGOTIATE_BIT(c)) || q[c] <= best_q) continue;
    best = c;
    best_q = q[c];
  }
  return best;
}
