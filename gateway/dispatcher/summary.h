/*
 * What the dispatcher reads of a player summary it holds (written by a fetcher: player_summary_json in
 * fetcher/platform/player.c, checked by bodycheck_player before it was kept): which caption track a transcript of a
 * language would be served, by the rule the fetcher applies (tracks_choose, proto/tracks.h).
 */
#ifndef VTS_SUMMARY_H
#define VTS_SUMMARY_H

#include <stddef.h>

#include "proto/proto.h"

/*
 * The language a transcript request for lang is served in, from the summary's caption tracks: the language of the
 * track it would be served (exactly, through its base language, or the video's default track when the video lacks
 * it), canonical (ident_language_canon), into out; for an auto-generated track whose language also has a manual
 * track, that language and TRACKS_ASR_SUFFIX ("en-x-asr"). Only when asking that spelling chooses the very same track,
 * so that the two requests have one answer, and when fetchers with and without a PO-token provider choose alike.
 * Returns 0, or -ENOENT when no track would be chosen or the summary cannot be read (the request then goes as it came).
 */
int summary_served_language(const char *summary, size_t len, const char *lang, char out[PROTO_MAX_LANG + 1]);

#endif
