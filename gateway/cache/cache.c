#include "gateway/cache/cache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/util.h"
#include "gateway/cache/entity.h"

#define CACHE_INITIAL_BUCKETS 64

struct entry {
  struct entry *hnext;       /* hash chain */
  struct entry *prev, *next; /* recency list: head is the most recently used */
  uint64_t hash;
  uint64_t expires_ms;
  size_t charge;      /* bytes counted against the bound */
  struct entity *ent; /* the body: one reference of the cache's */
  uint8_t outcome;
  uint8_t source;
  uint8_t reason; /* of a video that cannot be played: the case its reply said (proto_reason_gone) */
  char video_id[VTS_VIDEO_ID_LEN + 1];
  char key_lang[PROTO_MAX_JOB_KEY + 1]; /* the job key (proto_job_key): part of the key */
  char lang[PROTO_MAX_LANG + 1];        /* the language of the stored result */
};

struct cache {
  struct cache_limits limits;
  cache_clock_fn now_ms;
  struct entry **buckets;
  size_t nbuckets; /* a power of two */
  struct entry *head, *tail;
  struct cache_stats stats;
};

/*
 * The key of this process's hash: drawn once, on the first hash (after the fork, so each process has its own). Video
 * ids and languages come from clients; with an unkeyed hash, they could choose ids that all land in one bucket.
 */
static unsigned char hash_key[16];
static int hash_key_ready;

uint64_t cache_key_hash(const char *video_id, const char *lang) {
  if (!hash_key_ready) {
    if (util_random_bytes(hash_key, sizeof(hash_key)) != 0) {
      /* getrandom does not fail once the kernel's pool is ready; never go unkeyed, even so. */
      uint64_t t = util_now_ms() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&hash_key;
      memcpy(hash_key, &t, sizeof(t));
    }
    hash_key_ready = 1;
  }
  /* SipHash over "video_id NUL lang": the NUL keeps ("ab","c") apart from ("a","bc"). */
  struct util_siphash h;
  util_siphash_init(&h, hash_key);
  util_siphash_update(&h, video_id, strlen(video_id) + 1);
  util_siphash_update(&h, lang, strlen(lang));
  return util_siphash_final(&h);
}

struct cache *cache_new(const struct cache_limits *limits, cache_clock_fn now_ms) {
  struct cache *c = calloc(1, sizeof(*c));
  if (c == NULL) return NULL;
  c->buckets = calloc(CACHE_INITIAL_BUCKETS, sizeof(*c->buckets));
  if (c->buckets == NULL) {
    free(c);
    return NULL;
  }
  c->nbuckets = CACHE_INITIAL_BUCKETS;
  c->limits = *limits;
  c->now_ms = now_ms != NULL ? now_ms : util_now_ms;
  return c;
}

void cache_free(struct cache *c) {
  if (c == NULL) return;
  struct entry *e = c->head;
  while (e != NULL) {
    struct entry *next = e->next;
    entity_unref(e->ent);
    free(e);
    e = next;
  }
  free(c->buckets);
  free(c);
}

static struct entry **bucket_of(struct cache *c, uint64_t hash) { return &c->buckets[hash & (c->nbuckets - 1)]; }

static struct entry *find(struct cache *c, const char *video_id, const char *lang, uint64_t hash) {
  for (struct entry *e = *bucket_of(c, hash); e != NULL; e = e->hnext) {
    if (e->hash == hash && strcmp(e->video_id, video_id) == 0 && strcmp(e->key_lang, lang) == 0) return e;
  }
  return NULL;
}

static void list_unlink(struct cache *c, struct entry *e) {
  if (e->prev != NULL)
    e->prev->next = e->next;
  else
    c->head = e->next;
  if (e->next != NULL)
    e->next->prev = e->prev;
  else
    c->tail = e->prev;
  e->prev = e->next = NULL;
}

static void list_push_head(struct cache *c, struct entry *e) {
  e->prev = NULL;
  e->next = c->head;
  if (c->head != NULL) c->head->prev = e;
  c->head = e;
  if (c->tail == NULL) c->tail = e;
}

static void remove_entry(struct cache *c, struct entry *e) {
  struct entry **pp = bucket_of(c, e->hash);
  while (*pp != e) pp = &(*pp)->hnext;
  *pp = e->hnext;
  list_unlink(c, e);
  c->stats.entries--;
  c->stats.bytes -= e->charge;
  entity_unref(e->ent);
  free(e);
}

/* Doubles the bucket array when chains would grow past one entry on average; a failed grow only costs speed. */
static void maybe_grow(struct cache *c) {
  if (c->stats.entries <= c->nbuckets) return;
  size_t n = c->nbuckets * 2;
  struct entry **nb = calloc(n, sizeof(*nb));
  if (nb == NULL) return;
  for (size_t i = 0; i < c->nbuckets; i++) {
    struct entry *e = c->buckets[i];
    while (e != NULL) {
      struct entry *next = e->hnext;
      e->hnext = nb[e->hash & (n - 1)];
      nb[e->hash & (n - 1)] = e;
      e = next;
    }
  }
  free(c->buckets);
  c->buckets = nb;
  c->nbuckets = n;
}

int cache_put(struct cache *c, const char *video_id, const char *lang, const struct proto_result *res,
              uint64_t max_ttl_ms, uint64_t *ttl_ms) {
  if (res->outcome != PROTO_OK && res->outcome != PROTO_NOT_AVAILABLE && res->outcome != PROTO_NO_CAPTIONS)
    return -EINVAL;
  struct entity *ent = entity_new(res->body, res->body_len, 0);
  if (ent == NULL) return -ENOMEM;
  int rv = cache_put_entity(c, video_id, lang, res, ent, max_ttl_ms, ttl_ms);
  entity_unref(ent);
  return rv;
}

int cache_put_entity(struct cache *c, const char *video_id, const char *lang, const struct proto_result *res,
                     struct entity *ent, uint64_t max_ttl_ms, uint64_t *ttl_ms) {
  uint64_t ttl;
  uint8_t outcome;
  switch (res->outcome) {
    case PROTO_OK:
      ttl = c->limits.ok_ttl_ms;
      outcome = PROTO_OK;
      break;
    case PROTO_NOT_AVAILABLE:
    case PROTO_NO_CAPTIONS:
      ttl = c->limits.negative_ttl_ms;
      outcome = PROTO_NOT_AVAILABLE;
      break;
    default:
      return -EINVAL; /* a 5xx is a fault of the moment, never an answer to keep */
  }
  if (max_ttl_ms < ttl) ttl = max_ttl_ms;
  if (ttl == 0) return -EINVAL;
  if (strlen(video_id) > VTS_VIDEO_ID_LEN || strlen(lang) > PROTO_MAX_JOB_KEY || strlen(res->lang) > PROTO_MAX_LANG)
    return -EINVAL;

  uint64_t hash = cache_key_hash(video_id, lang);
  struct entry *old = find(c, video_id, lang, hash);
  size_t charge = sizeof(struct entry) + ent->bytes;
  if (charge > c->limits.max_bytes) {
    /* The newer answer cannot be kept, so an older one for the key must not outlive it either. */
    if (old != NULL) remove_entry(c, old);
    return -E2BIG;
  }
  struct entry *e = malloc(sizeof(*e));
  if (e == NULL) return -ENOMEM;
  memset(e, 0, sizeof(*e));
  e->hash = hash;
  e->expires_ms = c->now_ms() + ttl;
  e->charge = charge;
  e->ent = entity_ref(ent);
  e->outcome = outcome;
  e->source = res->source;
  e->reason = proto_result_gone(res) ? res->reason : PROTO_REASON_NONE;
  memcpy(e->video_id, video_id, strlen(video_id) + 1);
  memcpy(e->key_lang, lang, strlen(lang) + 1);
  memcpy(e->lang, res->lang, strlen(res->lang) + 1);

  if (old != NULL) remove_entry(c, old);
  while (c->tail != NULL && c->stats.bytes + charge > c->limits.max_bytes) {
    remove_entry(c, c->tail);
    c->stats.evictions++;
  }
  struct entry **b = bucket_of(c, hash);
  e->hnext = *b;
  *b = e;
  list_push_head(c, e);
  c->stats.entries++;
  c->stats.bytes += charge;
  maybe_grow(c);
  if (ttl_ms != NULL) *ttl_ms = ttl;
  return 0;
}

int cache_get(struct cache *c, const char *video_id, const char *lang, struct proto_result *res,
              uint64_t *ttl_left_ms) {
  return cache_lookup(c, video_id, lang, res, ttl_left_ms, NULL);
}

/* Fills a lookup's answer from e. */
static void fill(const struct entry *e, struct proto_result *res, struct entity **ent) {
  memset(res, 0, sizeof(*res));
  res->outcome = e->outcome;
  res->source = e->source;
  res->reason = e->reason;
  memcpy(res->lang, e->lang, sizeof(res->lang));
  memcpy(res->detail, "cache", sizeof("cache"));
  res->body = e->ent->form[ENTITY_IDENTITY].len > 0 ? e->ent->form[ENTITY_IDENTITY].data : NULL;
  res->body_len = (uint32_t)e->ent->form[ENTITY_IDENTITY].len;
  if (ent != NULL) *ent = entity_ref(e->ent);
}

int cache_lookup(struct cache *c, const char *video_id, const char *lang, struct proto_result *res,
                 uint64_t *ttl_left_ms, struct entity **ent) {
  uint64_t hash = cache_key_hash(video_id, lang);
  struct entry *e = find(c, video_id, lang, hash);
  if (e == NULL) return -ENOENT;
  uint64_t now = c->now_ms();
  if (now >= e->expires_ms) {
    if (!c->limits.keep_expired) remove_entry(c, e);
    return -ENOENT;
  }
  list_unlink(c, e);
  list_push_head(c, e);
  fill(e, res, ent);
  if (ttl_left_ms != NULL) *ttl_left_ms = e->expires_ms - now;
  return 0;
}

int cache_lookup_stale(struct cache *c, const char *video_id, const char *lang, struct proto_result *res,
                       uint64_t *ttl_left_ms, uint64_t *ended_ms, struct entity **ent) {
  int rv = cache_lookup(c, video_id, lang, res, ttl_left_ms, ent);
  if (rv != -ENOENT || !c->limits.keep_expired) return rv;
  struct entry *e = find(c, video_id, lang, cache_key_hash(video_id, lang));
  if (e == NULL) return -ENOENT;
  fill(e, res, ent);
  if (ttl_left_ms != NULL) *ttl_left_ms = 0;
  if (ended_ms != NULL) *ended_ms = c->now_ms() - e->expires_ms;
  return -ESTALE;
}

bool cache_remove(struct cache *c, const char *video_id, const char *lang) {
  struct entry *e = find(c, video_id, lang, cache_key_hash(video_id, lang));
  if (e == NULL) return false;
  remove_entry(c, e);
  return true;
}

void cache_get_stats(const struct cache *c, struct cache_stats *out) { *out = c->stats; }
