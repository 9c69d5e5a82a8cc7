/*
 * The chapters of a metadata body (GET /v1/video/metadata?include=chapters, as the fetcher wrote it), read back for
 * the transcript's chunks, which are cut at them.
 */
#ifndef VTS_CHAPTERLIST_H
#define VTS_CHAPTERLIST_H

#include <stddef.h>
#include <stdint.h>

/*
 * The chapters' starts in ms, ascending, into *starts (malloc'd, NULL for none; the caller frees it) and *n. Returns
 * 0, -EPROTO when json is not a metadata body with a "chapters" array of objects with an integer "start", or -ENOMEM.
 */
int chapterlist_starts(const char *json, size_t len, int64_t **starts, size_t *n);

#endif
