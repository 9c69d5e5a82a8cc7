/*
 * A small, strict, bounded XML tokenizer for caption bodies (srv1, srv3): no DTD, no CDATA, no external anything.
 * It checks what a caption body needs to be trusted: one root element, names well formed, attributes quoted,
 * end tags matching start tags, depth within VTS_MAX_XML_DEPTH, nothing but comments and processing instructions
 * around the root. Text and attribute values are returned raw (references not decoded): the caller decodes.
 */
#ifndef VTS_XMLSCAN_H
#define VTS_XMLSCAN_H

#include <stddef.h>

#include "common/limits.h"

enum xmlscan_kind {
  XMLSCAN_START, /* <name attrs> */
  XMLSCAN_EMPTY, /* <name attrs/> */
  XMLSCAN_END,   /* </name> */
  XMLSCAN_TEXT,  /* character data between tags, inside the root */
  XMLSCAN_EOF,   /* the root element closed and only comments or whitespace followed */
};

struct xmlscan_token {
  enum xmlscan_kind kind;
  const char *name; /* START, EMPTY, END: the element name (not NUL-terminated) */
  size_t name_len;
  const char *attrs; /* START, EMPTY: the raw attribute list, already checked for syntax */
  size_t attrs_len;
  const char *text; /* TEXT: raw character data */
  size_t text_len;
  size_t depth; /* START, EMPTY, END: 1 for the root; TEXT: depth of the enclosing element */
};

struct xmlscan {
  const char *p;
  const char *end;
  size_t depth;
  int root_done;
  struct {
    const char *name;
    size_t len;
  } open[VTS_MAX_XML_DEPTH];
};

/* Starts scanning body (len bytes, borrowed until the scan ends). */
void xmlscan_init(struct xmlscan *x, const char *body, size_t len);
/* Reads the next token. Returns 0, or -EPROTO for anything that is not well-formed within the limits. */
int xmlscan_next(struct xmlscan *x, struct xmlscan_token *t);
/* Finds attribute name in a START or EMPTY token. Returns 0 with the raw value in val and len, or -ENOENT. */
int xmlscan_attr(const struct xmlscan_token *t, const char *name, const char **val, size_t *len);

#endif
