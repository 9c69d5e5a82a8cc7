/* Unit tests of a cached body: its compressed forms (made once, decoding to the body), its ETag, its reference count.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "common/limits.h"
#include "gateway/cache/entity.h"

/* A transcript-like body of n bytes: JSON segments, repetitive as real ones are. */
static char *transcript_body(size_t n) {
  char *b = malloc(n);
  assert_non_null(b);
  size_t i = 0;
  for (int seg = 0; i < n; seg++) {
    char piece[96];
    int k = snprintf(piece, sizeof(piece), "{\"text\":\"line %d of the talk\",\"start\":%d.5,\"duration\":1.9},", seg,
                     seg * 2);
    for (int j = 0; j < k && i < n; j++) b[i++] = piece[j];
  }
  return b;
}

static void gunzip_equals(const struct entity_form *f, const char *want, size_t want_len) {
  char *out = malloc(want_len + 16);
  assert_non_null(out);
  z_stream z;
  memset(&z, 0, sizeof(z));
  assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
  z.next_in = (Bytef *)(uintptr_t)f->data;
  z.avail_in = (uInt)f->len;
  z.next_out = (Bytef *)out;
  z.avail_out = (uInt)(want_len + 16);
  assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
  assert_int_equal(z.total_out, want_len);
  assert_memory_equal(out, want, want_len);
  inflateEnd(&z);
  free(out);
}

static void test_compressed_forms_are_made_once_and_decode_to_the_body(void **state) {
  (void)state;
  size_t n = 248 * 1024;
  char *body = transcript_body(n);
  struct entity *e = entity_new(body, n, ENTITY_COMPRESS);
  assert_non_null(e);
  assert_int_equal(e->form[ENTITY_IDENTITY].len, n);
  assert_memory_equal(e->form[ENTITY_IDENTITY].data, body, n);
  assert_true(entity_has(e, ENTITY_GZIP));
  assert_true(entity_has(e, ENTITY_BR));
  assert_true(e->form[ENTITY_GZIP].len < n / 5);
  assert_true(e->form[ENTITY_BR].len < e->form[ENTITY_GZIP].len);
  gunzip_equals(&e->form[ENTITY_GZIP], body, n);
  assert_string_equal(entity_coding_name(ENTITY_GZIP), "gzip");
  assert_string_equal(entity_coding_name(ENTITY_BR), "br");
  assert_null(entity_coding_name(ENTITY_IDENTITY));
  entity_unref(e);
  free(body);
}

static void test_small_bodies_and_uncompressed_entities_have_identity_only(void **state) {
  (void)state;
  char *body = transcript_body(VTS_COMPRESS_MIN_BYTES - 1);
  struct entity *small = entity_new(body, VTS_COMPRESS_MIN_BYTES - 1, ENTITY_COMPRESS);
  assert_non_null(small);
  assert_true(entity_has(small, ENTITY_IDENTITY));
  assert_false(entity_has(small, ENTITY_GZIP));
  assert_false(entity_has(small, ENTITY_BR));
  entity_unref(small);
  free(body);

  body = transcript_body(8192);
  struct entity *plain = entity_new(body, 8192, 0);
  assert_false(entity_has(plain, ENTITY_GZIP));
  assert_false(entity_has(plain, ENTITY_BR));
  assert_int_equal(plain->bytes, sizeof(*plain) + 8192);
  entity_unref(plain);
  free(body);

  struct entity *empty = entity_new(NULL, 0, ENTITY_COMPRESS);
  assert_non_null(empty);
  assert_int_equal(empty->form[ENTITY_IDENTITY].len, 0);
  entity_unref(empty);
}

/* Whether fd is open in this process. */
static int fd_open(int fd) { return fcntl(fd, F_GETFD) >= 0; }

static void test_a_large_body_is_a_sealed_memory_file_that_it_maps(void **state) {
  (void)state;
  size_t n = 248 * 1024;
  char *body = transcript_body(n);
  struct entity *e = entity_new(body, n, ENTITY_COMPRESS | ENTITY_FILE);
  assert_non_null(e);
  const struct entity_form *id = &e->form[ENTITY_IDENTITY];
  assert_true(id->fd >= 0);
  assert_int_equal(id->len, n);
  assert_memory_equal(id->data, body, n);
  /* The file holds exactly the body (what sendfile sends), and nothing can change it any more. */
  char *read_back = malloc(n + 1);
  assert_non_null(read_back);
  assert_int_equal(pread(id->fd, read_back, n + 1, 0), (ssize_t)n);
  assert_memory_equal(read_back, body, n);
  free(read_back);
  int seals = fcntl(id->fd, F_GET_SEALS);
  assert_int_equal(seals & (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
                   F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  assert_int_equal(pwrite(id->fd, "x", 1, 0), -1);
  /* The compressed forms are made from the same bytes; the body is counted once. */
  gunzip_equals(&e->form[ENTITY_GZIP], body, n);
  assert_int_equal(e->form[ENTITY_GZIP].fd, -1);
  assert_int_equal(e->bytes, sizeof(*e) + n + e->form[ENTITY_GZIP].len + e->form[ENTITY_BR].len);
  /* A validator holds no file; the last reference closes the file. */
  struct entity *v = entity_validator(e);
  assert_int_equal(v->form[ENTITY_IDENTITY].fd, -1);
  entity_unref(v);
  int fd = id->fd;
  entity_unref(e);
  assert_false(fd_open(fd));
  /* Under VTS_SENDFILE_MIN_BYTES, or without ENTITY_FILE, the body stays in memory. */
  struct entity *small = entity_new(body, VTS_SENDFILE_MIN_BYTES - 1, ENTITY_FILE);
  assert_int_equal(small->form[ENTITY_IDENTITY].fd, -1);
  assert_ptr_equal(small->form[ENTITY_IDENTITY].data, small->body);
  entity_unref(small);
  struct entity *plain = entity_new(body, n, ENTITY_COMPRESS);
  assert_int_equal(plain->form[ENTITY_IDENTITY].fd, -1);
  entity_unref(plain);
  free(body);
}

static void test_etag_is_strong_per_body_and_distinct_per_form(void **state) {
  (void)state;
  char *body = transcript_body(4096);
  struct entity *a = entity_new(body, 4096, ENTITY_COMPRESS);
  struct entity *same = entity_new(body, 4096, 0);
  body[100] ^= 1;
  struct entity *other = entity_new(body, 4096, ENTITY_COMPRESS);
  char id[ENTITY_ETAG_BYTES], gz[ENTITY_ETAG_BYTES], br[ENTITY_ETAG_BYTES], id2[ENTITY_ETAG_BYTES],
      id3[ENTITY_ETAG_BYTES];
  entity_etag(a, ENTITY_IDENTITY, id);
  entity_etag(a, ENTITY_GZIP, gz);
  entity_etag(a, ENTITY_BR, br);
  entity_etag(same, ENTITY_IDENTITY, id2);
  entity_etag(other, ENTITY_IDENTITY, id3);
  assert_int_equal(strlen(id), ENTITY_TAG_HEX + 2);
  assert_int_equal(id[0], '"');
  assert_int_equal(id[ENTITY_TAG_HEX + 1], '"');
  assert_string_equal(id, id2); /* the same body, made anywhere, has the same tag */
  assert_string_not_equal(id, id3);
  char want[ENTITY_ETAG_BYTES];
  snprintf(want, sizeof(want), "\"%.*s-gz\"", ENTITY_TAG_HEX, id + 1);
  assert_string_equal(gz, want);
  snprintf(want, sizeof(want), "\"%.*s-br\"", ENTITY_TAG_HEX, id + 1);
  assert_string_equal(br, want);
  entity_unref(a);
  entity_unref(same);
  entity_unref(other);
  free(body);
}

static void test_references_keep_the_entity_until_the_last_goes(void **state) {
  (void)state;
  struct entity *e = entity_new("{}", 2, 0);
  assert_int_equal(e->refs, 1);
  assert_ptr_equal(entity_ref(e), e);
  assert_ptr_equal(entity_ref(e), e);
  assert_int_equal(e->refs, 3);
  entity_unref(e);
  entity_release(e);
  assert_int_equal(e->refs, 1);
  assert_memory_equal(e->body, "{}", 2);
  entity_unref(e); /* freed: ASan would report a use after it or a leak without it */
  entity_unref(NULL);
}

static void test_a_validator_keeps_the_tags_and_forms_without_the_body(void **state) {
  (void)state;
  char *body = transcript_body(8192);
  struct entity *e = entity_new(body, 8192, ENTITY_COMPRESS);
  e->expires_ms = 123456;
  struct entity *v = entity_validator(e);
  assert_non_null(v);
  entity_unref(e); /* the validator does not depend on it */
  assert_int_equal(v->refs, 1);
  assert_int_equal(v->expires_ms, 123456);
  assert_int_equal(v->bytes, sizeof(*v));
  for (int c = 0; c < ENTITY_CODINGS; c++) {
    assert_true(entity_has(v, (enum entity_coding)c));
    assert_null(v->form[c].data);
  }
  struct entity *again = entity_new(body, 8192, 0);
  char want[ENTITY_ETAG_BYTES], got[ENTITY_ETAG_BYTES];
  entity_etag(again, ENTITY_GZIP, want);
  entity_etag(v, ENTITY_GZIP, got);
  assert_string_equal(got, want);
  entity_unref(again);
  entity_unref(v);
  free(body);
}

/* How many entries the directory path lists besides . and .. */
static int entries(const char *path) {
  DIR *d = opendir(path);
  assert_non_null(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  closedir(d);
  return n;
}

/*
 * With a body directory (the gateway gives its state directory), a large body is an unnamed file of that directory's
 * file system: no name in it, nothing but the body, gone with the last reference. A path that is no directory
 * changes nothing. Runs last: the body directory stays set for the rest of the process.
 */
static void test_a_large_body_is_an_unnamed_file_of_the_body_directory(void **state) {
  (void)state;
  const char *tmp = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
  char dir[512], file[600];
  snprintf(dir, sizeof(dir), "%s/vts-test-bodies.XXXXXX", tmp);
  assert_non_null(mkdtemp(dir));
  snprintf(file, sizeof(file), "%s/not-a-directory", dir);
  int f = open(file, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  assert_true(f >= 0);
  close(f);
  assert_int_equal(entity_body_dir(file), -ENOTDIR);
  assert_int_equal(entity_body_dir("/nonexistent-vts-dir"), -ENOENT);
  size_t n = 248 * 1024;
  char *body = transcript_body(n);
  struct entity *before = entity_new(body, n, ENTITY_FILE);
  assert_true(fcntl(before->form[ENTITY_IDENTITY].fd, F_GET_SEALS) > 0); /* still a sealed memory file */
  entity_unref(before);

  assert_int_equal(entity_body_dir(dir), 0);
  struct entity *e = entity_new(body, n, ENTITY_COMPRESS | ENTITY_FILE);
  assert_non_null(e);
  const struct entity_form *id = &e->form[ENTITY_IDENTITY];
  assert_true(id->fd >= 0);
  assert_memory_equal(id->data, body, n);
  struct stat st, dst;
  assert_int_equal(fstat(id->fd, &st), 0);
  assert_int_equal(stat(dir, &dst), 0);
  assert_true(S_ISREG(st.st_mode));
  assert_int_equal(st.st_nlink, 0); /* unnamed */
  assert_int_equal(st.st_dev, dst.st_dev);
  assert_int_equal(st.st_size, (off_t)n);
  assert_int_equal(st.st_mode & 07777, 0600);
  assert_int_equal(fcntl(id->fd, F_GET_SEALS), -1); /* a file of the directory's file system, not a memory file */
  assert_int_equal(entries(dir), 1);                /* only the test's own file: the body has no name */
  char *read_back = malloc(n + 1);
  assert_non_null(read_back);
  assert_int_equal(pread(id->fd, read_back, n + 1, 0), (ssize_t)n);
  assert_memory_equal(read_back, body, n);
  free(read_back);
  gunzip_equals(&e->form[ENTITY_GZIP], body, n);
  int fd = id->fd;
  entity_unref(e);
  assert_false(fd_open(fd));
  /* A small body stays in memory, as without a body directory. */
  struct entity *small = entity_new(body, VTS_SENDFILE_MIN_BYTES - 1, ENTITY_FILE);
  assert_int_equal(small->form[ENTITY_IDENTITY].fd, -1);
  entity_unref(small);
  free(body);
  assert_int_equal(unlink(file), 0);
  assert_int_equal(rmdir(dir), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compressed_forms_are_made_once_and_decode_to_the_body),
      cmocka_unit_test(test_small_bodies_and_uncompressed_entities_have_identity_only),
      cmocka_unit_test(test_a_large_body_is_a_sealed_memory_file_that_it_maps),
      cmocka_unit_test(test_etag_is_strong_per_body_and_distinct_per_form),
      cmocka_unit_test(test_references_keep_the_entity_until_the_last_goes),
      cmocka_unit_test(test_a_validator_keeps_the_tags_and_forms_without_the_body),
      cmocka_unit_test(test_a_large_body_is_an_unnamed_file_of_the_body_directory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
