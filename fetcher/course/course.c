#include "fetcher/course/course.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "fetcher/captions/captions.h"
#include "fetcher/captions/transcript.h"
#include "fetcher/platform/browse.h"
#include "fetcher/platform/chapters.h"
#include "fetcher/platform/client.h"
#include "fetcher/platform/player.h"
#include "fetcher/platform/potoken.h"
#include "fetcher/speech/speech.h"

/* A retired client profile is named in a warning at most once in this time, per process. */
#define COURSE_OUTDATED_LOG_MS 60000

struct course {
  const struct vts_config *cfg;
  struct upstream *up;
  struct profile_source profiles;
  unsigned generation; /* of profiles.set that clients were resolved against */
  struct innertube_client clients[VTS_INNERTUBE_MAX_CLIENTS];
  size_t nclients;
  uint64_t outdated_logged_ms[VTS_INNERTUBE_MAX_CLIENTS]; /* when each client was last said to be retired */
  struct potoken *pot;                                    /* the PO-token provider, NULL without one */
  /*
   * The visitor data of each client whose profile makes or fetches it: once per fetcher process, renewed when older
   * than the profile's visitor_renew_s (renew_at_ms, util_now_ms clock). Dropped when the clients change.
   */
  struct {
    char data[CLIENT_VISITOR_DATA_MAX];
    uint64_t renew_at_ms;
  } visitors[VTS_INNERTUBE_MAX_CLIENTS];
};

/* A failed renewal of visitor data keeps the previous one, and is tried again after this. */
#define COURSE_VISITOR_RETRY_MS 60000

int course_new(const struct vts_config *cfg, struct upstream *up, struct course **out, char *err, size_t errlen) {
  struct course *it = calloc(1, sizeof(*it));
  if (it == NULL) return -ENOMEM;
  it->cfg = cfg;
  it->up = up;
  int rv = profiles_source_init(&it->profiles, cfg->client_profiles, err, errlen);
  if (rv == 0)
    rv = profiles_clients_parse(&it->profiles.set, cfg->innertube_clients, it->clients, VTS_INNERTUBE_MAX_CLIENTS,
                                &it->nclients, err, errlen);
  if (rv == 0 && cfg->pot_provider_url[0] != '\0')
    rv = potoken_new(cfg->pot_provider_url, (uint64_t)cfg->pot_timeout_ms, &it->pot, err, errlen);
  if (rv != 0) {
    course_free(it);
    return rv;
  }
  it->generation = it->profiles.generation;
  *out = it;
  return 0;
}

void course_free(struct course *it) {
  if (it == NULL) return;
  potoken_free(it->pot);
  free(it);
}

int course_config_check(const struct vts_config *cfg, char *err, size_t errlen) {
  struct course *it = NULL;
  int rv = course_new(cfg, NULL, &it, err, errlen);
  course_free(it);
  return rv;
}

size_t course_client_count(const struct course *it) { return it->nclients; }

const struct client_profile *course_client_at(const struct course *it, size_t i) {
  return i < it->nclients ? &it->clients[i].profile : NULL;
}

void course_refresh_profiles(struct course *it) {
  if (!profiles_source_refresh(&it->profiles) || it->profiles.generation == it->generation) return;
  struct innertube_client clients[VTS_INNERTUBE_MAX_CLIENTS];
  size_t n = 0;
  char err[256];
  if (profiles_clients_parse(&it->profiles.set, it->cfg->innertube_clients, clients, VTS_INNERTUBE_MAX_CLIENTS, &n, err,
                             sizeof(err)) != 0) {
    /* The file no longer defines a client the order names: the clients in force stay. */
    log_msg(LOG_WARN, "client profiles refused: keeping the previous ones", "file", it->profiles.path, "error", err,
            NULL);
    return;
  }
  memcpy(it->clients, clients, sizeof(clients));
  it->nclients = n;
  memset(it->outdated_logged_ms, 0, sizeof(it->outdated_logged_ms));
  memset(it->visitors, 0, sizeof(it->visitors));
  it->generation = it->profiles.generation;
}

/* The state of one job's flow. */
struct flow {
  struct course *it;
  const char *video_id;
  const char *lang;
  const char *translate;          /* "" or the language asked for the chosen track's translation */
  char tlang[PROTO_MAX_LANG + 1]; /* the platform's code of that language, once its reply offered it; else "" */
  const char *request_id;
  const char *client_name; /* the client whose reply gave the tracks: the c= of a caption URL with a PO token */
  char pot[VTS_POT_MAX_TOKEN_BYTES + 1]; /* the chosen track's PO token, "" when it needs none */
  int pot_failed;                        /* the provider gave no token in this job: it is not asked again */
  int speech;     /* a speech job: a playable reply goes to the speech pipeline instead of its caption tracks */
  int tracks;     /* a tracks job: a playable reply's track list is the answer */
  int metadata;   /* a metadata job: a playable reply's video details are the answer */
  int chapters;   /* and the video's chapters beside them (one watch-next request) */
  int page_state; /* 0 not fetched, 1 usable, -1 failed: once per egress */
  struct client_page page;
  const char *player; /* the video's player summary handed with the job, NULL for none */
  size_t player_len;
  int reusing;      /* the caption step runs on that summary */
  int stale;        /* a caption URL of the summary answered 403 or 404: a fresh reply is wanted */
  char cookie[160]; /* "CONSENT=YES+..." once the consent wall was answered, else "" */
  struct upstream_response resp;
  struct course_result *res;
};

/*
 * How one client's try ended. DONE and STOP decide the job (a transcript, or no time or memory left); REFUSED is
 * this client's refusal, which another client may not share; BLOCKED is a refusal of the address we came from.
 */
enum verdict { V_DONE, V_STOP, V_REFUSED, V_BLOCKED };

static void set_result(struct course_result *res, uint8_t outcome, uint8_t reason, const char *detail) {
  res->outcome = outcome;
  res->reason = reason;
  snprintf(res->detail, sizeof(res->detail), "%s", detail);
}

/* A step's outcome, as the module that decided it set it, becomes the job's. */
static void set_outcome(struct course_result *res, const struct fetch_outcome *o) {
  set_result(res, o->outcome, o->reason, o->detail);
}

/* The verdict for a failed transfer: out of time or memory ends the job; no connection is the egress's fault. */
static enum verdict transfer_verdict(const struct fetch_outcome *o) {
  /* A spent budget has waited as long as the deadline allows: no other client or proxy would fare better. */
  if (o->outcome == PROTO_INTERNAL || o->reason == PROTO_REASON_TIMEOUT || o->reason == PROTO_REASON_BUDGET)
    return V_STOP;
  if (o->reason == PROTO_REASON_NETWORK) return V_BLOCKED;
  return V_REFUSED;
}

/*
 * Whether verdict v on res blocked the egress: a block of its address. No connection at all (DNS, connect, TLS, a dead
 * proxy: reason network) moves the job on too, but says nothing of the address: it never rests the egress.
 */
static int blocks_egress(const struct course_result *res, enum verdict v) {
  return v == V_BLOCKED && res->reason != PROTO_REASON_NETWORK;
}

/*
 * Performs req into f->resp and accepts only a 200. Otherwise sets res (a transport error or "http_<status>" with
 * its reason) and returns the verdict; V_DONE means the 200 arrived.
 */
static enum verdict fetch_200(struct flow *f, const struct upstream_request *req, struct course_result *res) {
  if (upstream_fetch(f->it->up, req, &f->resp) != 0) {
    set_outcome(res, &f->resp.outcome);
    return transfer_verdict(&f->resp.outcome);
  }
  if (f->resp.status == 200) return V_DONE;
  long st = f->resp.status;
  res->outcome = PROTO_UPSTREAM_FAILED;
  res->reason = st == 429                ? PROTO_REASON_HTTP_429
                : st >= 500 && st <= 599 ? PROTO_REASON_HTTP_5XX
                                         : PROTO_REASON_HTTP_OTHER;
  snprintf(res->detail, sizeof(res->detail), "http_%ld", st);
  return st == 429 ? V_BLOCKED : V_REFUSED;
}

static enum verdict get_watch_page(struct flow *f, struct course_result *res) {
  char url[64];
  snprintf(url, sizeof(url), "/watch?v=%s", f->video_id);
  static const char *const headers[] = {"Accept-Language: en-US,en;q=0.9", NULL};
  struct upstream_request req = {
      .method = UPSTREAM_GET,
      .url = url,
      .user_agent = PROFILES_BROWSER_UA, /* the watch page is fetched as a browser would */
      .headers = headers,
      .max_bytes = VTS_MAX_WATCH_PAGE_BYTES,
  };
  /* Once for the page, once more after answering a consent wall: never more. */
  for (int attempt = 0; attempt < 2; attempt++) {
    req.cookie = f->cookie[0] ? f->cookie : NULL;
    enum verdict v = fetch_200(f, &req, res);
    if (v != V_DONE) return v;
    client_page_scan(f->resp.body.data ? f->resp.body.data : "", f->resp.body.len, &f->page);
    if (!f->page.consent_wall) break;
    if (attempt > 0 || f->page.consent_v[0] == '\0') {
      set_result(res, PROTO_UPSTREAM_FAILED, PROTO_REASON_CONSENT, "consent");
      return V_REFUSED;
    }
    snprintf(f->cookie, sizeof(f->cookie), "CONSENT=YES+%s", f->page.consent_v);
  }
  if (f->page.recaptcha) {
    set_result(res, PROTO_UPSTREAM_FAILED, PROTO_REASON_RECAPTCHA, "recaptcha");
    return V_BLOCKED;
  }
  if (f->page.api_key[0] == '\0') {
    set_result(res, PROTO_UPSTREAM_FAILED, PROTO_REASON_MALFORMED, "no_api_key");
    return V_REFUSED;
  }
  return V_DONE;
}

/* Whole seconds of a Retry-After for ms, rounded up (a retry before the time would find the rest unfinished). */
static uint32_t retry_after_s(uint64_t ms) {
  uint64_t s = (ms + 999) / 1000;
  return s > UINT32_MAX ? UINT32_MAX : (uint32_t)s;
}

/*
 * A throttled translation: a 502 that says when translations come back through the first egress (at least 1 s: the
 * platform said no to this one just now).
 */
static enum verdict translation_throttled(struct flow *f, struct course_result *res) {
  upstream_translation_report(f->it->up, 1);
  set_result(res, PROTO_UPSTREAM_FAILED, PROTO_REASON_TRANSLATION_THROTTLED, "translation_throttled");
  uint64_t left = upstream_translation_rest_left_ms(f->it->up);
  res->retry_after_s = left > 0 ? retry_after_s(left) : 1;
  return V_DONE;
}

static enum verdict fetch_track(struct flow *f, const char *user_agent, const struct caption_track *track,
                                struct course_result *res) {
  struct buf url = BUF_INIT;
  struct segment_list segs = {0};
  enum verdict v = V_REFUSED;
  int rv =
      client_timedtext_url(f->it->up, track->base_url, f->tlang, track->po_token ? f->pot : "", f->client_name, &url);
  if (rv != 0) {
    if (rv == -ENOMEM) {
      set_result(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "no_memory");
      v = V_STOP;
    } else {
      set_result(res, PROTO_UPSTREAM_FAILED, PROTO_REASON_REFUSED, "bad_track_url");
    }
    goto done;
  }
  struct upstream_request req = {
      .method = UPSTREAM_GET,
      .url = url.data,
      .user_agent = user_agent,
      .cookie = f->cookie[0] ? f->cookie : NULL,
      .max_bytes = VTS_MAX_UPSTREAM_BODY_BYTES,
  };
  v = fetch_200(f, &req, res);
  /* A reused caption URL the platform no longer serves: the summary is stale, not the video gone. */
  if (f->reusing && v != V_DONE && (f->resp.status == 403 || f->resp.status == 404) &&
      res->reason == PROTO_REASON_HTTP_OTHER) {
    f->stale = 1;
    v = V_REFUSED;
    goto done;
  }
  /*
   * A translation the platform throttles (429, or an empty 200) ends the job: translations rest through this egress,
   * which keeps serving everything else (it answered the player request).
   */
  if (f->tlang[0] != '\0' &&
      ((v != V_DONE && res->reason == PROTO_REASON_HTTP_429) || (v == V_DONE && f->resp.body.len == 0))) {
    v = translation_throttled(f, res);
    goto done;
  }
  if (v != V_DONE) {
    /* 403 or 429 on a caption URL: the platform refuses captions to the address that asked for the player reply. */
    if (v == V_REFUSED && f->resp.status == 403) v = V_BLOCKED;
    goto done;
  }
  if (f->tlang[0] != '\0') upstream_translation_report(f->it->up, 0);
  v = V_REFUSED;
  /* The platform answers an empty 200 to a track it will not serve this client (a PO token it wanted, for one). */
  if (f->resp.body.len == 0) {
    /* A token it refused is no use for the rest of its lifetime: the next client's or job's asks for a new one. */
    if (track->po_token && f->pot[0] != '\0') potoken_forget(f->it->pot, f->video_id, f->pot);
    set_result(res, PROTO_UPSTREAM_FAILED, PROTO_REASON_MALFORMED, "empty_captions");
    goto done;
  }
  if (captions_parse(f->resp.body.data, f->resp.body.len, &segs) != 0) {
    set_result(res, PROTO_UPSTREAM_FAILED, PROTO_REASON_MALFORMED, "bad_captions");
    goto done;
  }
  if (segs.len == 0) {
    set_result(res, PROTO_NO_CAPTIONS, PROTO_REASON_NO_CAPTIONS, "empty_track");
    goto done;
  }
  v = V_STOP;
  /* A translated transcript is in the language it was translated into, as the platform writes its code. */
  const char *lang = f->tlang[0] != '\0' ? f->tlang : track->lang;
  rv = transcript_serialize(&segs, lang, "captions", &res->body);
  if (rv == -EILSEQ) {
    set_result(res, PROTO_UPSTREAM_FAILED, PROTO_REASON_MALFORMED, "bad_utf8");
  } else if (rv != 0) {
    set_result(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, rv == -E2BIG ? "transcript_too_large" : "no_memory");
  } else {
    set_result(res, PROTO_OK, PROTO_REASON_NONE, "ok");
    snprintf(res->lang, sizeof(res->lang), "%s", lang);
    v = V_DONE;
  }
done:
  if (res->outcome != PROTO_OK) buf_reset(&res->body);
  segment_list_free(&segs);
  buf_free(&url);
  return v;
}

/* The reason of a video that cannot be played: the case its reply said, or just that it cannot be. */
static uint8_t not_playable_reason(enum play_why why) {
  switch (why) {
    case PLAY_WHY_AGE_RESTRICTED:
      return PROTO_REASON_AGE_RESTRICTED;
    case PLAY_WHY_MEMBERS_ONLY:
      return PROTO_REASON_MEMBERS_ONLY;
    case PLAY_WHY_PRIVATE:
      return PROTO_REASON_PRIVATE;
    case PLAY_WHY_REMOVED:
      return PROTO_REASON_REMOVED;
    case PLAY_WHY_LIVE_NOT_ARCHIVED:
      return PROTO_REASON_LIVE_NOT_ARCHIVED;
    case PLAY_WHY_GEO_RESTRICTED:
      return PROTO_REASON_GEO_RESTRICTED;
    default:
      return PROTO_REASON_NOT_PLAYABLE;
  }
}

static const char *not_playable_detail(enum playability p) {
  switch (p) {
    case PLAY_LOGIN_REQUIRED:
      return "login_required";
    case PLAY_UNAVAILABLE:
      return "unavailable";
    case PLAY_UNPLAYABLE:
      return "unplayable";
    case PLAY_LIVE_OFFLINE:
      return "live_offline";
    default:
      return "not_playable";
  }
}

/*
 * A speech job on a playable reply: the audio through the job's proxy (the platform binds audio URLs to the address
 * that asked for the player reply), recognised into segments, serialised with source "speech".
 */
static enum verdict speech_step(struct flow *f, const struct player_info *pi, struct course_result *res) {
  struct segment_list sl;
  memset(&sl, 0, sizeof(sl));
  char lang[16] = "";
  struct fetch_outcome o;
  int outcome = speech_transcribe_via(f->it->cfg, pi, upstream_job_proxy(f->it->up), upstream_job_deadline(f->it->up),
                                      &sl, lang, &o);
  set_outcome(res, &o);
  if (outcome == PROTO_OK) {
    int rv = transcript_serialize(&sl, lang, "speech", &res->body);
    if (rv != 0)
      set_result(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL,
                 rv == -E2BIG ? "transcript_too_large" : "serialize_failed");
    else
      snprintf(res->lang, sizeof(res->lang), "%s", lang);
  }
  segment_list_free(&sl);
  return V_DONE;
}

/*
 * A tracks job on a playable reply: its track list and translation languages, empty lists when it has none. The
 * first playable reply decides, so a tracks job costs one player request.
 */
static enum verdict tracks_step(const struct player_info *pi, struct course_result *res) {
  int rv = player_tracks_json(pi, &res->body);
  if (rv != 0) {
    set_result(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, rv == -E2BIG ? "tracks_too_large" : "no_memory");
    return V_STOP;
  }
  set_result(res, PROTO_OK, PROTO_REASON_NONE, pi->ntracks > 0 ? "ok" : "no_captions");
  return V_DONE;
}

static enum verdict chapters_step(struct flow *f, int64_t length_s, struct course_result *res);

/*
 * A metadata job on a playable reply: its video details (and its chapters when the job includes them); the first
 * playable reply decides, as for tracks.
 */
static enum verdict metadata_step(struct flow *f, const struct player_info *pi, struct course_result *res) {
  int rv = player_metadata_json(pi, f->video_id, &res->body);
  if (rv != 0) {
    set_result(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, rv == -E2BIG ? "metadata_too_large" : "no_memory");
    return V_STOP;
  }
  if (f->chapters) return chapters_step(f, pi->details.length_s, res);
  set_result(res, PROTO_OK, PROTO_REASON_NONE, "ok");
  return V_DONE;
}

/*
 * The track to fetch for a captions job. With a provider, a track that needs a PO token is as good as any other, and
 * the chosen one's token is got into f->pot; without a provider, or when it gives none (counted in the result, and not
 * asked again in this job), the choice is among the tracks that need none, as if there were no provider.
 */
static int choose_track(struct flow *f, const struct player_info *pi, struct course_result *res) {
  f->pot[0] = '\0';
  if (f->it->pot != NULL && !f->pot_failed) {
    int idx = player_choose_track_any(pi, f->lang);
    if (idx < 0 || !pi->tracks[idx].po_token) return idx;
    struct fetch_outcome o;
    int rv = potoken_get(f->it->pot, f->video_id, upstream_job_deadline(f->it->up), f->request_id, f->pot,
                         sizeof(f->pot), &o);
    if (rv == 0) return idx;
    f->pot_failed = 1;
    /* Only what the provider did is its failure (not our memory). */
    if (rv == -EIO && res->pot_failures < UINT8_MAX) res->pot_failures++;
  }
  return player_choose_track(pi, f->lang);
}

/*
 * A playable reply (fresh, or a summary the dispatcher handed): the speech step, the track list, the video details or
 * a caption track.
 */
static enum verdict playable_step(struct flow *f, const struct player_info *pi, const char *ua,
                                  struct course_result *res) {
  if (f->speech && pi->naudio == 0) {
    /* A reply without a directly downloadable audio format (the reel call's): another client's reply may have one. */
    set_result(res, PROTO_NOT_AVAILABLE, PROTO_REASON_NOT_PLAYABLE, "no_audio_format");
    return V_REFUSED;
  }
  if (f->speech) return speech_step(f, pi, res);
  if (f->tracks) return tracks_step(pi, res);
  if (f->metadata) return metadata_step(f, pi, res);
  if (pi->ntracks == 0) {
    set_result(res, PROTO_NO_CAPTIONS, PROTO_REASON_NO_CAPTIONS, "no_captions");
    return V_REFUSED;
  }
  int idx = choose_track(f, pi, res);
  if (idx < 0 || (size_t)idx >= pi->ntracks) {
    /* Tracks exist but each wants a PO token (exp=xpe, exp=xpv): another client may be given usable ones. */
    set_result(res, PROTO_UPSTREAM_FAILED, PROTO_REASON_PO_TOKEN, "po_token");
    return V_REFUSED;
  }
  /* A translation into the track's own language is the track itself: no tlang request. */
  if (f->translate[0] != '\0' && strcasecmp(f->translate, pi->tracks[idx].lang) == 0) {
    f->tlang[0] = '\0';
    return fetch_track(f, ua, &pi->tracks[idx], res);
  }
  /*
   * The platform translates a track it marks translatable into a language it lists; it says so in the same reply for
   * every client, so a refusal here is the answer, not a reason to ask another client.
   */
  if (f->translate[0] != '\0' && !pi->tracks[idx].translatable) {
    set_result(res, PROTO_NOT_AVAILABLE, PROTO_REASON_NO_CAPTIONS, "not_translatable");
    return V_DONE;
  }
  const char *code = f->translate[0] != '\0' ? player_translation_code(pi, f->translate) : "";
  if (code == NULL) {
    set_result(res, PROTO_NOT_AVAILABLE, PROTO_REASON_NO_CAPTIONS, "translation_not_offered");
    return V_DONE;
  }
  snprintf(f->tlang, sizeof(f->tlang), "%s", code);
  return fetch_track(f, ua, &pi->tracks[idx], res);
}

/*
 * Keeps the summary of a playable reply in the result, for the video's next jobs (the dispatcher hands it with them):
 * the latest playable reply of the job, for as long as its caption URLs stay valid, VTS_PLAYER_REUSE_MAX_MS at most.
 */
static void keep_summary(struct flow *f, const struct player_info *pi, struct course_result *res) {
  res->player_ttl_ms = 0;
  buf_reset(&res->player);
  uint64_t ttl = VTS_PLAYER_REUSE_MAX_MS;
  int64_t expire = player_tracks_expire_s(pi), now = util_wall_s();
  if (expire > 0) {
    if (expire <= now) return;
    if ((uint64_t)(expire - now) < ttl / 1000) ttl = (uint64_t)(expire - now) * 1000;
  }
  if (player_summary_json(pi, f->video_id, &res->player) == 0) res->player_ttl_ms = (uint32_t)ttl;
}

/*
 * A job handed the video's player summary: the reply it stands for, without a player request. Returns the verdict
 * that decides the job, or V_REFUSED when the summary cannot serve (unreadable, or a caption URL that no longer
 * answers: 403 or 404): the job then asks the platform for a fresh reply, as any other.
 */
static enum verdict reuse_summary(struct flow *f, struct course_result *res) {
  struct player_info pi;
  struct buf ua = BUF_INIT;
  enum verdict v = V_REFUSED;
  if (player_parse(f->player, f->player_len, &pi) != 0 || pi.playability != PLAY_OK ||
      !player_is_for(&pi, f->video_id) || f->it->nclients == 0)
    goto done;
  /* The caption request goes as the first client's, the one that usually read the reply. */
  if (client_user_agent(&f->it->clients[0].profile, &ua) != 0) {
    set_result(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "no_memory");
    v = V_STOP;
    goto done;
  }
  f->reusing = 1;
  f->client_name = f->it->clients[0].profile.client_name;
  v = playable_step(f, &pi, ua.data, res);
  f->reusing = 0;
  /* Only what decides the job stands; anything else is asked again of the platform, a block on another egress. */
  if (v == V_BLOCKED && !f->stale) {
    if (blocks_egress(res, v)) upstream_egress_report(f->it->up, 1);
    upstream_next_egress(f->it->up);
  }
  if (f->stale || (v != V_DONE && v != V_STOP)) {
    v = V_REFUSED;
    buf_reset(&res->body);
  }
done:
  buf_free(&ua);
  player_info_free(&pi);
  return v;
}

/* The position of profile c among the configured clients, or it->nclients for none. */
static size_t client_index(const struct course *it, const struct client_profile *c) {
  size_t i = 0;
  while (i < it->nclients && &it->clients[i].profile != c) i++;
  return i;
}

/*
 * A client profile the platform retired: the next client's turn, never a block. Operators must replace the profile,
 * so it is named in a warning, at most once a minute per process.
 */
static void client_outdated(struct flow *f, const struct client_profile *c) {
  struct course *it = f->it;
  size_t i = client_index(it, c);
  uint64_t now = util_now_ms();
  if (i < it->nclients) {
    if (it->outdated_logged_ms[i] != 0 && now - it->outdated_logged_ms[i] < COURSE_OUTDATED_LOG_MS) return;
    it->outdated_logged_ms[i] = now;
  }
  char client[72];
  snprintf(client, sizeof(client), "%s:%s", c->name, c->version);
  log_msg(LOG_WARN, "client profile retired by the platform: replace it (VTS_INNERTUBE_CLIENTS, VTS_CLIENT_PROFILES)",
          "request_id", f->request_id, "client", client, NULL);
}

/* After a 200 player reply: playability, then the speech step, the track list or a caption track. */
static enum verdict after_player(struct flow *f, const struct client_profile *c, const char *ua,
                                 struct course_result *res) {
  struct player_info pi;
  enum verdict v = V_REFUSED;
  int rv = player_parse_wrapped(f->resp.body.data ? f->resp.body.data : "", f->resp.body.len, c->wrap_reply, &pi);
  if (rv == -ENOENT) {
    /* The reel call answers an id it does not know with an empty object: no reply for this video from this client. */
    set_result(res, PROTO_NOT_AVAILABLE, PROTO_REASON_NOT_PLAYABLE, "no_player_reply");
    goto done;
  }
  if (rv != 0) {
    set_result(res, PROTO_UPSTREAM_FAILED, PROTO_REASON_MALFORMED, "bad_player_reply");
    goto done;
  }
  /* The reply of another video: nothing of it is used (its tracks would be served and cached as this video's). */
  if (!player_is_for(&pi, f->video_id)) {
    set_result(res, PROTO_UPSTREAM_FAILED, PROTO_REASON_WRONG_VIDEO, "wrong_video");
    v = V_BLOCKED;
    goto done;
  }
  /* A bot check and the platform's ration are about the address we came from, not the video. */
  if (pi.playability == PLAY_BOT_CHECK) {
    set_result(res, PROTO_UPSTREAM_FAILED, PROTO_REASON_BOT_CHECK, "bot_check");
    v = V_BLOCKED;
    goto done;
  }
  if (pi.playability == PLAY_RATIONED) {
    set_result(res, PROTO_UPSTREAM_FAILED, PROTO_REASON_RATIONED, "rationed");
    v = V_BLOCKED;
    goto done;
  }
  if (pi.playability == PLAY_CLIENT_OUTDATED) {
    set_result(res, PROTO_UPSTREAM_FAILED, PROTO_REASON_CLIENT_OUTDATED, "client_outdated");
    client_outdated(f, c);
    goto done;
  }
  /* Another client may be allowed what this one is refused ("made for kids" on some apps): the next one decides. */
  if (pi.playability != PLAY_OK) {
    set_result(res, PROTO_NOT_AVAILABLE, not_playable_reason(pi.why), not_playable_detail(pi.playability));
    goto done;
  }
  if (!f->speech) keep_summary(f, &pi, res);
  f->client_name = c->client_name; /* the clientName it sent: ANDROID for ANDROID_REEL */
  v = playable_step(f, &pi, ua, res);
done:
  player_info_free(&pi);
  return v;
}

/* The headers of a client's calls, held for the request. */
struct client_headers {
  char name[32];
  char version[64];
  char visitor[CLIENT_VISITOR_DATA_MAX + 32];
  char origin[96];
  const char *list[5 + PROFILES_MAX_HEADERS + 1];
};

/* Content-Type, the client's name and version, its visitor data (when not ""), Origin, and the profile's headers. */
static void client_headers(struct client_headers *h, const struct client_profile *c, const char *visitor) {
  size_t n = 0;
  h->list[n++] = "Content-Type: application/json";
  if (c->client_id[0] != '\0') {
    snprintf(h->name, sizeof(h->name), "X-YouTube-Client-Name: %s", c->client_id);
    h->list[n++] = h->name;
  }
  snprintf(h->version, sizeof(h->version), "X-YouTube-Client-Version: %s", c->version);
  h->list[n++] = h->version;
  if (visitor[0] != '\0') {
    snprintf(h->visitor, sizeof(h->visitor), "X-Goog-Visitor-Id: %s", visitor);
    h->list[n++] = h->visitor;
  }
  if (c->origin[0] != '\0') {
    snprintf(h->origin, sizeof(h->origin), "Origin: %s", c->origin);
    h->list[n++] = h->origin;
  }
  for (size_t i = 0; i < c->nheaders; i++) h->list[n++] = c->headers[i];
  h->list[n] = NULL;
}

/*
 * The chapters of a metadata job that includes them: one watch-next request as the web client (whose panels hold
 * them), through the egress that served the player reply, after the details are in res->body; the list goes in as
 * its "chapters" member. A failure ends the job with its reason: a body without the list would say "no chapters".
 */
static enum verdict chapters_step(struct flow *f, int64_t length_s, struct course_result *res) {
  const struct client_profile *c = profiles_find(&f->it->profiles.set, "WEB");
  struct buf url = BUF_INIT, body = BUF_INIT, ua = BUF_INIT, list = BUF_INIT;
  struct chapter_list chapters = {0};
  enum verdict v = V_STOP;
  if (c == NULL) {
    set_result(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "no_web_client");
    goto done;
  }
  struct client_headers h;
  client_headers(&h, c, "");
  int rv = buf_printf(&url, "https://%s" CHAPTERS_NEXT_PATH "?prettyPrint=false", c->host);
  if (rv == 0) rv = client_user_agent(c, &ua);
  if (rv == 0) rv = chapters_next_body(c, f->video_id, &body);
  if (rv != 0) {
    set_result(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "no_memory");
    goto done;
  }
  struct upstream_request req = {.method = UPSTREAM_POST,
                                 .url = url.data,
                                 .body = body.data,
                                 .body_len = body.len,
                                 .user_agent = ua.data,
                                 .headers = h.list,
                                 .max_bytes = VTS_MAX_UPSTREAM_BODY_BYTES};
  if (fetch_200(f, &req, res) != V_DONE) goto done;
  rv = chapters_parse(f->resp.body.data ? f->resp.body.data : "", f->resp.body.len, &chapters);
  if (rv == 0) rv = chapters_json(&chapters, length_s, &list);
  if (rv == -ENOMEM) {
    set_result(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "no_memory");
  } else if (rv != 0) {
    set_result(res, PROTO_UPSTREAM_FAILED, PROTO_REASON_MALFORMED, "bad_next_reply");
  } else if (res->body.len == 0 || res->body.data[res->body.len - 1] != '}') {
    set_result(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "bad_metadata");
  } else {
    /* The details' object is reopened for one more member. */
    res->body.len--;
    rv = buf_puts(&res->body, ",\"chapters\":");
    if (rv == 0) rv = buf_append(&res->body, list.data, list.len);
    if (rv == 0) rv = buf_puts(&res->body, "}");
    if (rv == 0 && res->body.len > VTS_MAX_TRANSCRIPT_BYTES) rv = -E2BIG;
    if (rv != 0)
      set_result(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, rv == -E2BIG ? "metadata_too_large" : "no_memory");
    else
      set_result(res, PROTO_OK, PROTO_REASON_NONE, chapters.n > 0 ? "ok" : "no_chapters");
    v = V_DONE;
  }
done:
  if (res->outcome != PROTO_OK) buf_reset(&res->body);
  chapters_free(&chapters);
  buf_free(&url);
  buf_free(&body);
  buf_free(&ua);
  buf_free(&list);
  return v;
}

/*
 * The visitor data of a client that makes or fetches it (*out borrowed from the course): the one held while it is
 * fresh, else a new one, made here or asked of the visitor endpoint on the profile's host. A failed renewal keeps the
 * previous one (tried again after COURSE_VISITOR_RETRY_MS); with none to keep, the failure is the client's verdict.
 */
static enum verdict client_visitor(struct flow *f, const struct client_profile *c, const char *ua,
                                   struct course_result *res, const char **out) {
  struct course *it = f->it;
  size_t i = client_index(it, c);
  if (i == it->nclients) {
    set_result(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "no_client");
    return V_STOP;
  }
  uint64_t now = util_now_ms(), renew_ms = (uint64_t)c->visitor_renew_s * 1000;
  *out = it->visitors[i].data;
  if (it->visitors[i].data[0] != '\0' && now < it->visitors[i].renew_at_ms) return V_DONE;
  char fresh[CLIENT_VISITOR_DATA_MAX] = "";
  enum verdict v = V_DONE;
  if (c->visitor == PROFILE_VISITOR_LOCAL) {
    if (client_visitor_local(fresh) != 0) {
      set_result(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "no_random");
      v = V_STOP;
    }
  } else {
    struct buf url = BUF_INIT, body = BUF_INIT;
    struct client_headers h;
    client_headers(&h, c, "");
    int rv = buf_printf(&url, "https://%s%s?prettyPrint=false", c->host, PROFILES_VISITOR_PATH);
    if (rv == 0) rv = client_visitor_body(c, ua, &body);
    if (rv != 0) {
      set_result(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "no_memory");
      v = V_STOP;
    } else {
      struct upstream_request req = {.method = UPSTREAM_POST,
                                     .url = url.data,
                                     .body = body.data,
                                     .body_len = body.len,
                                     .user_agent = ua,
                                     .headers = h.list,
                                     .max_bytes = VTS_MAX_UPSTREAM_BODY_BYTES};
      v = fetch_200(f, &req, res);
      if (v == V_DONE &&
          client_visitor_reply(f->resp.body.data ? f->resp.body.data : "", f->resp.body.len, fresh) != 0) {
        set_result(res, PROTO_UPSTREAM_FAILED, PROTO_REASON_MALFORMED, "bad_visitor_reply");
        v = V_REFUSED;
      }
    }
    buf_free(&url);
    buf_free(&body);
  }
  char client[72];
  snprintf(client, sizeof(client), "%s:%s", c->name, c->version);
  if (v == V_DONE) {
    snprintf(it->visitors[i].data, sizeof(it->visitors[i].data), "%s", fresh);
    it->visitors[i].renew_at_ms = now + renew_ms;
    log_msg(LOG_INFO, "visitor data renewed", "request_id", f->request_id, "client", client, NULL);
    return V_DONE;
  }
  if (v == V_STOP || it->visitors[i].data[0] == '\0') return v;
  it->visitors[i].renew_at_ms = now + (renew_ms < COURSE_VISITOR_RETRY_MS ? renew_ms : COURSE_VISITOR_RETRY_MS);
  log_msg(LOG_WARN, "visitor data not renewed: keeping the previous one", "request_id", f->request_id, "client", client,
          "detail", res->detail, NULL);
  return V_DONE;
}

/*
 * One client on the current egress: the watch page when it needs one (once per egress), its visitor data when it
 * makes or fetches it, the player call, the track.
 */
static enum verdict try_client(struct flow *f, const struct client_profile *c, struct course_result *res) {
  if (c->needs_page) {
    if (f->page_state == 0) {
      enum verdict v = get_watch_page(f, res);
      f->page_state = v == V_DONE ? 1 : -1;
      if (v != V_DONE) return v;
    } else if (f->page_state < 0) {
      /* The page failed on this egress for an earlier client: res still says why. */
      return V_REFUSED;
    }
  }
  enum verdict v = V_STOP;
  struct buf url = BUF_INIT, body = BUF_INIT, ua = BUF_INIT;
  struct client_headers h;
  const char *visitor = c->visitor == PROFILE_VISITOR_PAGE ? f->page.visitor_data : "";
  int rv = client_user_agent(c, &ua);
  if (rv != 0) {
    set_result(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "no_memory");
    goto done;
  }
  if (c->visitor == PROFILE_VISITOR_LOCAL || c->visitor == PROFILE_VISITOR_FETCH) {
    v = client_visitor(f, c, ua.data, res, &visitor);
    if (v != V_DONE) goto done;
    v = V_STOP;
  }
  client_headers(&h, c, visitor);
  rv = client_player_url(c, f->video_id, c->needs_page ? f->page.api_key : "", &url);
  if (rv == 0) rv = client_player_body(c, ua.data, f->video_id, visitor, &body);
  if (rv != 0) {
    set_result(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "no_memory");
    goto done;
  }
  struct upstream_request req = {
      .method = UPSTREAM_POST,
      .url = url.data,
      .body = body.data,
      .body_len = body.len,
      .user_agent = ua.data,
      .headers = h.list,
      .cookie = f->cookie[0] ? f->cookie : NULL,
      .max_bytes = VTS_MAX_UPSTREAM_BODY_BYTES,
  };
  v = fetch_200(f, &req, res);
  if (v == V_DONE) v = after_player(f, c, ua.data, res);
done:
  buf_free(&url);
  buf_free(&body);
  buf_free(&ua);
  return v;
}

/* Records one player attempt for the per-proxy and per-client counters the result carries. */
static void record_attempt(struct flow *f, const struct client_profile *c, enum verdict v) {
  struct course_result *res = f->res;
  if (res->nattempts == PROTO_MAX_ATTEMPTS) return;
  struct proto_attempt *a = &res->attempts[res->nattempts++];
  a->proxy = (uint8_t)upstream_job_proxy_index(f->it->up);
  a->result = blocks_egress(res, v)                     ? PROTO_ATTEMPT_BLOCKED
              : v == V_DONE && res->outcome == PROTO_OK ? PROTO_ATTEMPT_OK
                                                        : PROTO_ATTEMPT_FAILED;
  snprintf(a->client, sizeof(a->client), "%s", c->name);
}

/*
 * The Retry-After of a 502: when the first egress comes back from its rest, and at least 1 s after a block (another
 * job's success may have ended the rest this one met, or this was the first block of a row).
 */
static void set_retry_after(struct course *it, int blocked, struct course_result *res) {
  if (res->outcome != PROTO_UPSTREAM_FAILED || res->retry_after_s != 0) return;
  res->retry_after_s = retry_after_s(upstream_rest_left_ms(it->up));
  if (res->retry_after_s == 0 && blocked) res->retry_after_s = 1;
}

/*
 * How much a refusal says about the video, to choose the answer when no client is left: a block (502) outranks any
 * other failure (502), which outranks "no captions" (404, speech may follow), which outranks "not playable" (404)
 * with its case said, which outranks "not playable" unsaid.
 */
static int rank(const struct course_result *r, enum verdict v) {
  if (v == V_BLOCKED) return 5;
  if (r->outcome == PROTO_NO_CAPTIONS) return 3;
  if (r->outcome == PROTO_NOT_AVAILABLE)
    return proto_reason_gone(r->reason) && r->reason != PROTO_REASON_NOT_PLAYABLE ? 2 : 1;
  return 4;
}

static void log_refusal(struct flow *f, const struct client_profile *c, const struct course_result *r, enum verdict v) {
  char client[72], proxy[16];
  snprintf(client, sizeof(client), "%s:%s", c->name, c->version);
  snprintf(proxy, sizeof(proxy), "%d", upstream_job_proxy_index(f->it->up));
  /*
   * What the platform did is a warning an operator must see, with its kind (the reason field, as
   * vts_upstream_outcomes_total counts it): a block of the address, a failure of the platform, or a request that
   * reached nothing (network: DNS, connect, TLS, the proxy), which is no block. A refusal of this client alone (not
   * playable for it, a token it lacks) is the course's ordinary business.
   */
  const char *msg = "player client refused";
  enum log_level level = LOG_INFO;
  if (r->reason == PROTO_REASON_NETWORK) {
    msg = "platform unreachable";
    level = LOG_WARN;
  } else if (v == V_BLOCKED) {
    msg = "player client blocked";
    level = LOG_WARN;
  } else if (r->reason == PROTO_REASON_HTTP_5XX || r->reason == PROTO_REASON_MALFORMED ||
             r->reason == PROTO_REASON_TIMEOUT) {
    level = LOG_WARN;
  }
  log_msg(level, msg, "request_id", f->request_id, "client", client, "=proxy", proxy, "reason",
          proto_reason_name(r->reason), "detail", r->detail, NULL);
}

/*
 * The clients in turn until one decides the job. A client-specific refusal moves to the next client (one player
 * request each); a block moves the same client to another proxy while VTS_UPSTREAM_ATTEMPTS and the proxies allow,
 * else to the next client. With no client left, the highest-ranked refusal is the answer.
 */
static void run_flow(struct flow *f, struct course_result *res) {
  struct course *it = f->it;
  f->res = res;
  res->lang[0] = '\0';
  res->nattempts = 0;
  buf_reset(&res->body);
  res->retry_after_s = 0;
  res->player_ttl_ms = 0;
  res->pot_failures = 0;
  buf_reset(&res->player);
  set_result(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "no_clients");
  /* Translations rest through every egress: the platform would refuse this one too; it is not asked. */
  if (f->translate[0] != '\0' && upstream_translation_egress(it->up) != 0) {
    set_result(res, PROTO_UPSTREAM_FAILED, PROTO_REASON_TRANSLATION_THROTTLED, "translations_resting");
    res->retry_after_s = retry_after_s(upstream_translation_rest_left_ms(it->up));
    if (res->retry_after_s == 0) res->retry_after_s = 1;
    return;
  }
  struct course_result best;
  memset(&best, 0, sizeof(best));
  int best_rank = 0, met_block = 0;
  /* The video's player summary, when the dispatcher handed one: no player request unless it is stale. */
  if (f->player_len > 0 && !f->speech) {
    enum verdict v = reuse_summary(f, res);
    if (v == V_DONE || v == V_STOP) {
      if (v == V_DONE) upstream_egress_report(it->up, 0);
      goto out;
    }
    set_result(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "no_clients");
  }
  size_t next = 0;
  int attempts = (int)it->cfg->upstream_attempts;
  for (int egress = 0; egress < attempts; egress++) {
    if (egress > 0) {
      if (upstream_next_egress(it->up) != 0) break;
      f->page_state = 0;
      f->cookie[0] = '\0';
    }
    int blocked = 0; /* the latest verdict on this egress moves the job to another (a block, or no connection) */
    int rests = 0;   /* and it was a block of the address */
    int can_move = egress + 1 < attempts && upstream_has_next_egress(it->up);
    while (next < it->nclients) {
      const struct client_profile *c = &it->clients[next].profile;
      enum verdict v = try_client(f, c, res);
      record_attempt(f, c, v);
      if (v == V_DONE || v == V_STOP) {
        /* Out of time says nothing about the proxy; an answer says it served. */
        if (v == V_DONE) upstream_egress_report(it->up, 0);
        goto out;
      }
      log_refusal(f, c, res, v);
      blocked = v == V_BLOCKED;
      rests = blocks_egress(res, v);
      met_block |= rests;
      int r = rank(res, v);
      /* Among refusals of one rank the latest is reported, as the client that had the last word. */
      if (r >= best_rank) {
        best_rank = r;
        best.outcome = res->outcome;
        best.reason = res->reason;
        memcpy(best.detail, res->detail, sizeof(best.detail));
      }
      /* A block is the address's: the same client goes through another proxy, if one is left. */
      if (v == V_BLOCKED && can_move) break;
      next++;
    }
    /* An egress that could not be reached is neither rested nor cleared: nothing was learnt of its address. */
    if (!(blocked && !rests)) upstream_egress_report(it->up, rests);
    if (!(blocked && can_move)) break;
  }
  if (best_rank > 0) set_result(res, best.outcome, best.reason, best.detail);
out:
  set_retry_after(it, met_block, res);
  buf_free(&f->resp.body);
}

void course_fetch_captions(struct course *it, const char *video_id, const char *lang, const char *translate,
                           const char *request_id, const char *player, size_t player_len, struct course_result *res) {
  struct flow f = {.it = it,
                   .video_id = video_id,
                   .lang = lang,
                   .translate = translate,
                   .request_id = request_id,
                   .player = player,
                   .player_len = player_len};
  run_flow(&f, res);
}

/* A job answered from the player reply itself: its track list, or its metadata (with its chapters). */
static void run_reply_job(struct course *it, const char *video_id, const char *request_id, const char *player,
                          size_t player_len, int metadata, int chapters, struct course_result *res) {
  struct flow f = {.it = it,
                   .video_id = video_id,
                   .lang = "",
                   .translate = "",
                   .request_id = request_id,
                   .tracks = !metadata,
                   .metadata = metadata,
                   .chapters = chapters,
                   .player = player,
                   .player_len = player_len};
  run_flow(&f, res);
}

void course_fetch_tracks(struct course *it, const char *video_id, const char *request_id, const char *player,
                         size_t player_len, struct course_result *res) {
  run_reply_job(it, video_id, request_id, player, player_len, 0, 0, res);
}

void course_fetch_metadata(struct course *it, const char *video_id, const char *request_id, const char *player,
                           size_t player_len, struct course_result *res) {
  run_reply_job(it, video_id, request_id, player, player_len, 1, 0, res);
}

void course_fetch_chapters(struct course *it, const char *video_id, const char *request_id, const char *player,
                           size_t player_len, struct course_result *res) {
  run_reply_job(it, video_id, request_id, player, player_len, 1, 1, res);
}

void course_fetch_speech(struct course *it, const char *video_id, const char *request_id, struct course_result *res) {
  struct flow f = {.it = it, .video_id = video_id, .lang = "", .translate = "", .request_id = request_id, .speech = 1};
  run_flow(&f, res);
}

/* ---- browse jobs ---- */

_Static_assert(BROWSE_MAX_TOKEN <= VTS_MAX_BROWSE_TOKEN_BYTES, "a page's token fits a browse body");

/* The case an ERROR alert of a playlist's or channel's page names (the platform's own words, in English: hl=en). */
static uint8_t browse_refusal_reason(uint8_t what, const char *text) {
  if (what == PROTO_BROWSE_CHANNEL)
    return strcasestr(text, "does not exist") != NULL ? PROTO_REASON_CHANNEL_MISSING : PROTO_REASON_CHANNEL_REMOVED;
  if (strcasestr(text, "does not exist") != NULL) return PROTO_REASON_PLAYLIST_MISSING;
  if (strcasestr(text, "private") != NULL) return PROTO_REASON_PLAYLIST_PRIVATE;
  return PROTO_REASON_PLAYLIST_UNVIEWABLE;
}

/* A 200 browse reply: the page's videos and continuation, or the refusal it carries instead. */
static enum verdict after_browse(struct flow *f, uint8_t what, struct course_result *res) {
  struct browse_page page;
  enum verdict v = V_REFUSED;
  int rv = browse_parse(f->resp.body.data ? f->resp.body.data : "", f->resp.body.len, &page);
  if (rv == -ENOMEM) {
    set_result(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "no_memory");
    v = V_STOP;
  } else if (rv != 0) {
    set_result(res, PROTO_UPSTREAM_FAILED, PROTO_REASON_MALFORMED, "bad_browse_reply");
  } else if (!page.has_list && page.error[0] != '\0') {
    /* The platform's answer about the list itself: every client and route would hear it. */
    set_result(res, PROTO_NOT_AVAILABLE, browse_refusal_reason(what, page.error), "browse_refused");
    v = V_DONE;
  } else if (!page.has_list) {
    set_result(res, PROTO_UPSTREAM_FAILED, PROTO_REASON_MALFORMED, "no_video_list");
  } else if ((rv = proto_browse_body(&res->body, page.continuation,
                                     (const char(*)[VTS_VIDEO_ID_LEN + 1]) page.video_ids, page.nvideos)) != 0) {
    set_result(res, rv == -ENOMEM ? PROTO_INTERNAL : PROTO_UPSTREAM_FAILED,
               rv == -ENOMEM ? PROTO_REASON_INTERNAL : PROTO_REASON_MALFORMED, "bad_browse_page");
    v = rv == -ENOMEM ? V_STOP : V_REFUSED;
  } else {
    set_result(res, PROTO_OK, PROTO_REASON_NONE, page.continuation[0] != '\0' ? "ok" : "last_page");
    v = V_DONE;
  }
  if (res->outcome != PROTO_OK) buf_reset(&res->body);
  browse_page_free(&page);
  return v;
}

/* One browse request as client c on the current egress. */
static enum verdict try_browse(struct flow *f, const struct client_profile *c, uint8_t what, const char *target,
                               struct course_result *res) {
  struct buf url = BUF_INIT, body = BUF_INIT, ua = BUF_INIT, token = BUF_INIT;
  struct client_headers h;
  client_headers(&h, c, "");
  /* The browse call goes to the host of the profile's player call. */
  int rv = buf_printf(&url, "https://%s/youtubei/v1/browse?prettyPrint=false", c->host);
  if (rv == 0) rv = client_user_agent(c, &ua);
  if (rv == 0 && what == PROTO_BROWSE_PLAYLIST) rv = browse_playlist_token(target, &token);
  if (rv == 0) {
    if (what == PROTO_BROWSE_CHANNEL)
      rv = browse_request_body(c, target, BROWSE_VIDEOS_TAB_PARAMS, NULL, &body);
    else
      rv = browse_request_body(c, NULL, NULL, what == PROTO_BROWSE_PLAYLIST ? token.data : target, &body);
  }
  enum verdict v = V_STOP;
  if (rv != 0) {
    set_result(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, rv == -ENOMEM ? "no_memory" : "bad_browse_target");
    goto done;
  }
  struct upstream_request req = {
      .method = UPSTREAM_POST,
      .url = url.data,
      .body = body.data,
      .body_len = body.len,
      .user_agent = ua.data,
      .headers = h.list,
      .max_bytes = VTS_MAX_UPSTREAM_BODY_BYTES,
  };
  v = fetch_200(f, &req, res);
  if (v == V_DONE) {
    v = after_browse(f, what, res);
  } else if (what != PROTO_BROWSE_CONTINUATION && (f->resp.status == 400 || f->resp.status == 404) &&
             res->reason == PROTO_REASON_HTTP_OTHER) {
    /* A first page the platform refuses as a bad argument: no such playlist or channel. */
    set_result(res, PROTO_NOT_AVAILABLE,
               what == PROTO_BROWSE_CHANNEL ? PROTO_REASON_CHANNEL_MISSING : PROTO_REASON_PLAYLIST_MISSING,
               "browse_refused");
    v = V_DONE;
  }
done:
  buf_free(&url);
  buf_free(&body);
  buf_free(&ua);
  buf_free(&token);
  return v;
}

void course_fetch_browse(struct course *it, uint8_t what, const char *target, const char *request_id,
                         struct course_result *res) {
  struct flow f = {.it = it, .video_id = "", .lang = "", .translate = "", .request_id = request_id, .res = res};
  res->lang[0] = '\0';
  res->nattempts = 0;
  buf_reset(&res->body);
  res->retry_after_s = 0;
  res->player_ttl_ms = 0;
  buf_reset(&res->player);
  /* Browse pages are the web client's: the profile of that name (built in, or the file's), whatever the order says. */
  const struct client_profile *c = profiles_find(&it->profiles.set, "WEB");
  if (c == NULL) {
    set_result(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "no_web_client");
    return;
  }
  int attempts = (int)it->cfg->upstream_attempts, met_block = 0;
  for (int egress = 0; egress < attempts; egress++) {
    if (egress > 0 && upstream_next_egress(it->up) != 0) break;
    int can_move = egress + 1 < attempts && upstream_has_next_egress(it->up);
    enum verdict v = try_browse(&f, c, what, target, res);
    record_attempt(&f, c, v);
    if (v == V_DONE || v == V_STOP) {
      if (v == V_DONE) upstream_egress_report(it->up, 0);
      break;
    }
    log_refusal(&f, c, res, v);
    if (v != V_BLOCKED || blocks_egress(res, v)) upstream_egress_report(it->up, blocks_egress(res, v));
    met_block |= blocks_egress(res, v);
    if (!(v == V_BLOCKED && can_move)) break;
  }
  set_retry_after(it, met_block, res);
  buf_free(&f.resp.body);
}

void course_probe(struct course *it, size_t client, const char *video_id, struct course_result *res) {
  struct flow f = {.it = it, .video_id = video_id, .lang = "", .translate = "", .request_id = "probe", .res = res};
  res->lang[0] = '\0';
  res->retry_after_s = 0;
  res->nattempts = 0;
  res->pot_failures = 0;
  buf_reset(&res->body);
  if (client >= it->nclients) {
    set_result(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "no_client");
    return;
  }
  enum verdict v = try_client(&f, &it->clients[client].profile, res);
  record_attempt(&f, &it->clients[client].profile, v);
  buf_free(&f.resp.body);
}
