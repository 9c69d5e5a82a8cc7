/*
 * jsonshape: what a JSON request body must be before yajl's tree parser may have it. Used by every handler that reads
 * a JSON body (the jobs API, the MCP endpoint).
 */
#ifndef VTS_GATEWAY_HTTP_JSONSHAPE_H
#define VTS_GATEWAY_HTTP_JSONSHAPE_H

#include <stddef.h>

/*
 * Whether body may be given to yajl_tree_parse: no NUL, raw or escaped (yajl reads to the first NUL, so a value would
 * end there, silently cut), and no nesting deeper than max_depth (yajl parses any depth but frees its tree by
 * recursion: a few hundred thousand brackets would overflow the stack). Brackets inside strings do not count.
 * Returns 1 or 0.
 */
int jsonshape_ok(const char *body, size_t len, int max_depth);

#endif
