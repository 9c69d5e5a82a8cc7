/*
 * A cached answer's body, shared by reference: the caches (the dispatcher's shared cache, each worker's L1) and every
 * connection writing it hold a counted reference, so a hit costs no copy of the body. A worker's transcript entity
 * also carries its gzip and brotli forms, made once when it is created, and the strong validator (ETag) of its body.
 *
 * The count is not atomic: an entity belongs to one thread (the dispatcher's, or a worker's loop thread).
 */
#ifndef VTS_ENTITY_H
#define VTS_ENTITY_H

#include <stddef.h>
#include <stdint.h>

/* The forms a body is kept in; the order is the preference among equal q-values (smallest first). */
enum entity_coding { ENTITY_IDENTITY = 0, ENTITY_BR, ENTITY_GZIP, ENTITY_CODINGS };

/* entity_new flags */
#define ENTITY_COMPRESS 1u /* also make the gzip and brotli forms (a body under VTS_COMPRESS_MIN_BYTES gets none) */
/* Keep a body of at least VTS_SENDFILE_MIN_BYTES in a file mapped for reading (an unnamed file of the body
 * directory, else a sealed memory file), so that a connection can hand its pages to the socket with sendfile(2)
 * instead of copying them (falls back to memory). */
#define ENTITY_FILE 2u

/* The opaque part of the ETag: 32 hex characters of the body's SHA-256. */
#define ENTITY_TAG_HEX 32
/* A quoted ETag of any form: '"', the tag, "-gz" or "-br", '"', NUL. */
#define ENTITY_ETAG_BYTES (ENTITY_TAG_HEX + 8)

struct entity_form {
  const char *data; /* NULL when the form was not made */
  size_t len;
  int fd; /* a file holding exactly data (which maps it), or -1; nothing writes it once made */
};

struct entity {
  unsigned refs;
  uint64_t expires_ms; /* monotonic ms at which the answer's lifetime at its source ends; 0 when unknown */
  size_t bytes;        /* memory held: the record and every form */
  unsigned held;       /* one bit (1u << coding) per form held, or that the entity it validates held */
  char tag[ENTITY_TAG_HEX + 1];
  struct entity_form form[ENTITY_CODINGS];
  char body[]; /* the identity form */
};

/*
 * Creates an entity holding a copy of body (len bytes, body may be NULL when len is 0), with one reference owned
 * by the caller. With ENTITY_COMPRESS, the compressed forms that are smaller than the body are made too; with
 * ENTITY_FILE, a large body's copy is a file (form fd). Returns NULL when out of memory.
 */
struct entity *entity_new(const char *body, size_t len, unsigned flags);
/*
 * Keeps this process's large bodies (ENTITY_FILE) in unnamed files (O_TMPFILE) of the directory path from now on,
 * where the page cache serves them to sendfile(2) as it serves any file on that file system. Returns 0, or -errno
 * when path is no directory or cannot hold unnamed files, and nothing changes (without a body directory, large bodies
 * are sealed memory files). A body the directory cannot take (a full disk) is a memory file too.
 */
int entity_body_dir(const char *path);
/*
 * A validator of e: its tag, the forms it holds and expires_ms, without any body (every form's data is NULL), so that
 * a revalidation can be answered long after the body itself left a cache. One reference owned by the caller; NULL
 * when out of memory.
 */
struct entity *entity_validator(const struct entity *e);
/* Takes one more reference; returns e. */
struct entity *entity_ref(struct entity *e);
/* Drops one reference; the entity is freed with the last. NULL is ignored. */
void entity_unref(struct entity *e);
/* entity_unref with the signature of a release callback (a writer's "done with these bytes"). */
void entity_release(void *e);
/* Whether e holds form c (a validator: whether the entity it validates did). */
int entity_has(const struct entity *e, enum entity_coding c);
/* Writes the quoted strong ETag of form c into out: "<tag>", "<tag>-br" or "<tag>-gz". */
void entity_etag(const struct entity *e, enum entity_coding c, char out[ENTITY_ETAG_BYTES]);
/*
 * Whether the If-None-Match value inm (len bytes) matches etag (quoted, strong): "*" matches, as does any listed
 * entity-tag with the same opaque part, weak ("W/") or not (the weak comparison RFC 9110 asks for here). A malformed
 * list matches nothing from the malformed element on. Returns 1 or 0.
 */
int entity_etag_match(const char *inm, size_t len, const char *etag);
/* The Content-Encoding token of c ("br", "gzip"), NULL for identity. */
const char *entity_coding_name(enum entity_coding c);

#endif
