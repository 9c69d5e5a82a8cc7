/*
 * A bounded, streaming reader of untrusted JSON on yajl's event parser, for the fetcher's upstream documents.
 * yajl's tree API accepts comments, stops at the first NUL and frees recursively; this reader keeps comments off,
 * parses the given length (a NUL is an error), caps size (VTS_MAX_UPSTREAM_BODY_BYTES) and depth
 * (VTS_MAX_JSON_DEPTH), and builds nothing: the caller names the containers it wants and receives only their scalars.
 */
#ifndef VTS_JSONSTREAM_H
#define VTS_JSONSTREAM_H

#include <stddef.h>

enum jsonstream_kind { JSONSTREAM_STRING, JSONSTREAM_NUMBER, JSONSTREAM_BOOL, JSONSTREAM_NULL };

#define JSONSTREAM_SKIP 0    /* node id of a container the caller does not want: its content is not reported */
#define JSONSTREAM_ROOT 1    /* node id of the top-level object */
#define JSONSTREAM_ITEM (-1) /* field id of an array element */

/* Callbacks return 0 to go on or a negative errno, which stops the parse and becomes its result. */
struct jsonstream_ops {
  /* A key of an object the caller wants (node id node): returns a field id > 0, or 0 for a key of no interest. */
  int (*key)(void *ctx, int node, const char *key, size_t len);
  /*
   * A container opens as the value of field (or JSONSTREAM_ITEM) in a wanted container node: returns the new
   * container's node id, JSONSTREAM_SKIP, or a negative errno. Not called for the values of fields of no interest.
   */
  int (*open)(void *ctx, int node, int field, int is_array);
  /* A container that open named closes. */
  int (*close)(void *ctx, int node);
  /*
   * A scalar value of field (> 0, or JSONSTREAM_ITEM) in a wanted container. s/len is the decoded string, the number
   * as written, "true"/"false" or "null"; s is not NUL-terminated and a string may hold NUL bytes (from \u0000).
   */
  int (*scalar)(void *ctx, int node, int field, enum jsonstream_kind kind, const char *s, size_t len);
};

/* A row of a reader's table of keys: key, in a container of node id node, is field id field. */
struct jsonstream_key {
  int node;
  const char *key;
  int field;
};

/* A row of a reader's table of containers: field (or JSONSTREAM_ITEM) of node, an array or not, opens node child. */
struct jsonstream_child {
  int node;
  int field;
  int is_array;
  int child;
};

/* The field of key (len bytes) in node by the n rows, or -1 when no row names it. */
int jsonstream_key_field(const struct jsonstream_key *rows, size_t n, int node, const char *key, size_t len);
/* The node that field of node opens by the n rows, or JSONSTREAM_SKIP when no row names it. */
int jsonstream_child_node(const struct jsonstream_child *rows, size_t n, int node, int field, int is_array);

/*
 * Parses body, which must be one JSON object. validate_utf8 = 0 leaves strings unchecked (the caller repairs the few
 * it keeps). Returns 0, -EPROTO for a body that is not one complete, well-formed object within the caps, -ENOMEM, or
 * a callback's error.
 */
int jsonstream_parse(const char *body, size_t len, int validate_utf8, const struct jsonstream_ops *ops, void *ctx);

#endif
