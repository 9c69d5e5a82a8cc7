/*
 * The choice of a video's caption track for a requested language, one rule for the fetcher, which fetches the track it
 * chooses from a player reply, and the dispatcher, which reads the same choice from a player summary it holds, so
 * that a language the video lacks is asked as the language of the track it would be served (no caption download of
 * its own, no cache entry of its own).
 */
#ifndef VTS_TRACKS_H
#define VTS_TRACKS_H

#include <stddef.h>

/*
 * The spelling of a language's auto-generated track where the same language has a manual track too ("en" asks the
 * manual twin): its languageCode and this private-use suffix ("en-x-asr"). Only the dispatcher writes it, from a player
 * summary, so that every request served that track shares one cache entry and fetch; a client cannot send it (an
 * API language has at most one subtag).
 */
#define TRACKS_ASR_SUFFIX "-x-asr"

/* Track i of ctx as the choice sees it: its languageCode, whether it is asr, whether it wants a PO token. */
typedef void (*tracks_get_fn)(const void *ctx, size_t i, const char **lang, int *is_asr, int *po_token);

/*
 * Chooses one of n tracks: for "<code>" TRACKS_ASR_SUFFIX, the asr track of that code exactly, else as for the code;
 * the requested language exactly, manual before asr; then the same base language ("pt" for
 * "pt-BR", and "pt-BR" for "pt"; the bare base before a sibling), manual before asr; then default_track (-1: none);
 * then the first manual track; then the first. lang "" means no preference: the default track. Tracks that want a PO
 * token are skipped. Returns an index, or -1 when none can be chosen.
 */
int tracks_choose(tracks_get_fn get, const void *ctx, size_t n, int default_track, const char *lang);

/*
 * Whether a track URL's exp parameter names an experiment that makes the platform want a proof-of-origin token: xpe
 * or xpv, alone ("exp=xpe") or in a list ("exp=xpo,xpe", "exp=xpo%2Cxwmhp%2Cxpe").
 */
int tracks_url_wants_po_token(const char *url);

#endif
