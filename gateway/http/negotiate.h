/*
 * Content negotiation and validators of a transcript answer: which stored form an Accept-Encoding picks, and
 * whether an If-None-Match names the ETag being answered (RFC 9110 12.5.3 and 13.1.2).
 */
#ifndef VTS_NEGOTIATE_H
#define VTS_NEGOTIATE_H

#include <stddef.h>

#include "gateway/cache/entity.h"

/* available: one bit (1u << coding) per form the entity holds; identity is always taken as held. */
#define NEGOTIATE_BIT(c) (1u << (c))

/*
 * Picks the form to send for the Accept-Encoding value ae (len bytes, its lines joined by commas), among available.
 * NULL (no header) picks identity, as does an empty value. Codings are case-insensitive, "x-gzip" is gzip, q-values
 * (0, 0.5, 1.000) rank them, q=0 refuses one, "*" stands for every coding not named, identity is acceptable unless
 * refused by name or by "*;q=0" (not named, it comes after every named coding). Among equal q-values the smaller form
 * wins (br, then gzip, then identity). An element with a malformed q-value is ignored. When nothing held is acceptable,
 * identity is sent all the same (a transcript is better than a 406).
 */
enum entity_coding negotiate_coding(const char *ae, size_t len, unsigned available);

#endif
