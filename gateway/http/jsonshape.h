/*
 * jsonshape: what a JSON request body must be before yajl's tree parser may have it, used by every handler that reads
 * a JSON body (the jobs API, the MCP endpoint); and the parse of a JSON text that is not NUL-terminated (a stored
 * metadata body, an answer of the jobs API relayed over MCP).
 */
#ifndef VTS_GATEWAY_HTTP_JSONSHAPE_H
#define VTS_GATEWAY_HTTP_JSONSHAPE_H

#include <stddef.h>
#include <yajl/yajl_tree.h>

/*
 * Whether body may be given to yajl_tree_parse: no NUL, raw or escaped (yajl reads to the first NUL, so a value would
 * end there, silently cut), and no nesting deeper than max_depth (yajl parses any depth but frees its tree by
 * recursion: a few hundred thousand brackets would overflow the stack). Brackets inside strings do not count.
 * Returns 1 or 0.
 */
int jsonshape_ok(const char *body, size_t len, int max_depth);

/*
 * The JSON text of len bytes, not NUL-terminated, as yajl's tree into *root (the caller frees it with yajl_tree_free).
 * yajl's tree parser reads to a NUL, so this parses a terminated copy. Returns 0, -EPROTO when the text does not
 * parse, or -ENOMEM; *root is NULL on failure.
 */
int jsonshape_tree(const char *text, size_t len, yajl_val *root);

#endif
