/*
 * Folding repeated video ids. A job request may list up to a body's worth of ids chosen by the client, so the fold
 * must cost the same whatever the ids are: it sorts (O(n log n) compares of 11 bytes), where a hash table with a
 * fixed, known hash lets a client choose ids that all collide and make it quadratic.
 */
#ifndef VTS_IDFOLD_H
#define VTS_IDFOLD_H

#include <stddef.h>

#include "common/limits.h"

/*
 * Sets dup[i] to 1 when ids[i] equals an earlier ids[j] (j < i), else 0, for the n ids (an id whose first byte is
 * NUL is none: never a duplicate, never matched). Returns 0, or -ENOMEM.
 */
int idfold_mark(const char (*ids)[VTS_VIDEO_ID_LEN + 1], size_t n, unsigned char *dup);

#endif
