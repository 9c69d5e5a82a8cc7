#include "gateway/dispatcher/summary.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "common/ident.h"
#include "proto/tracks.h"

/* The caption tracks of a summary: the array of captionTracks objects, each with a languageCode. */
struct tracks {
  yajl_val list; /* captionTracks */
};

static const char *member_string(yajl_val obj, const char *name) {
  const char *path[] = {name, NULL};
  yajl_val v = yajl_tree_get(obj, path, yajl_t_string);
  return v != NULL ? YAJL_GET_STRING(v) : "";
}

static void track_get(const void *ctx, size_t i, const char **lang, int *is_asr, int *po_token) {
  yajl_val t = YAJL_GET_ARRAY(((const struct tracks *)ctx)->list)->values[i];
  *lang = member_string(t, "languageCode");
  *is_asr = strcmp(member_string(t, "kind"), "asr") == 0;
  *po_token = tracks_url_wants_po_token(member_string(t, "baseUrl"));
}

/* The same, every track usable: as a fetcher with a PO-token provider chooses. */
static void track_get_any(const void *ctx, size_t i, const char **lang, int *is_asr, int *po_token) {
  track_get(ctx, i, lang, is_asr, po_token);
  *po_token = 0;
}

/* The default caption track as the summary names it: audioTracks[defaultAudioTrackIndex].defaultCaptionTrackIndex. */
static int default_track(yajl_val renderer) {
  const char *audio_path[] = {"audioTracks", NULL};
  const char *which_path[] = {"defaultAudioTrackIndex", NULL};
  const char *index_path[] = {"defaultCaptionTrackIndex", NULL};
  yajl_val audio = yajl_tree_get(renderer, audio_path, yajl_t_array);
  yajl_val which = yajl_tree_get(renderer, which_path, yajl_t_number);
  long long a = which != NULL && YAJL_IS_INTEGER(which) ? YAJL_GET_INTEGER(which) : 0;
  if (audio == NULL || a < 0 || (size_t)a >= YAJL_GET_ARRAY(audio)->len) return -1;
  yajl_val index = yajl_tree_get(YAJL_GET_ARRAY(audio)->values[a], index_path, yajl_t_number);
  if (index == NULL || !YAJL_IS_INTEGER(index) || YAJL_GET_INTEGER(index) < -1 || YAJL_GET_INTEGER(index) > 1000000)
    return -1;
  return (int)YAJL_GET_INTEGER(index);
}

int summary_served_language(const char *summary, size_t len, const char *lang, char out[PROTO_MAX_LANG + 1]) {
  /*
   * yajl's tree parser reads a NUL-terminated text. The http floor's readers copy alike: the one home below both,
   * common/, does not link yajl, and each answers a failed copy its own way.
   */
  char *text = malloc(len + 1);
  if (text == NULL) return -ENOENT;
  memcpy(text, summary, len);
  text[len] = '\0';
  yajl_val root = yajl_tree_parse(text, NULL, 0);
  free(text);
  if (root == NULL) return -ENOENT;

  int rv = -ENOENT;
  const char *renderer_path[] = {"captions", "playerCaptionsTracklistRenderer", NULL};
  const char *tracks_path[] = {"captionTracks", NULL};
  yajl_val renderer = yajl_tree_get(root, renderer_path, yajl_t_object);
  struct tracks t = {renderer != NULL ? yajl_tree_get(renderer, tracks_path, yajl_t_array) : NULL};
  if (t.list == NULL) goto done;
  size_t n = YAJL_GET_ARRAY(t.list)->len;
  for (size_t i = 0; i < n; i++)
    if (!YAJL_IS_OBJECT(YAJL_GET_ARRAY(t.list)->values[i])) goto done;
  int def = default_track(renderer);
  /*
   * A fetcher with a PO-token provider may choose a track that needs a token, one without chooses among the others:
   * only a choice both make is certain.
   */
  int idx = tracks_choose(track_get, &t, n, def, lang);
  if (idx < 0 || tracks_choose(track_get_any, &t, n, def, lang) != idx) goto done;
  const char *served;
  int asr, po;
  track_get(&t, (size_t)idx, &served, &asr, &po);
  size_t slen = strlen(served);
  if (slen > PROTO_MAX_LANG || !ident_language_valid(served, slen)) goto done;
  ident_language_canon(served, slen, out);
  out[slen] = '\0';
  if (tracks_choose(track_get, &t, n, def, out) == idx && tracks_choose(track_get_any, &t, n, def, out) == idx) {
    rv = 0;
  } else if (asr && slen + sizeof(TRACKS_ASR_SUFFIX) - 1 <= PROTO_MAX_LANG) {
    /* The auto-generated twin of a language whose manual track its plain code asks: its own spelling. */
    memcpy(out + slen, TRACKS_ASR_SUFFIX, sizeof(TRACKS_ASR_SUFFIX));
    if (tracks_choose(track_get, &t, n, def, out) == idx && tracks_choose(track_get_any, &t, n, def, out) == idx)
      rv = 0;
  }

done:
  yajl_tree_free(root);
  return rv;
}
