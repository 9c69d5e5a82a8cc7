/*
 * Unit tests of the API key file: loading, every malformed line refused with its line number, duplicates, lookup by
 * digest (active, revoked, unknown, oversize keys) and by name, and the atomic save round trip.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/util.h"
#include "gateway/keys/keys.h"

struct fixture {
  char dir[64];
  char path[128];
};

static int setup(void **state) {
  struct fixture *f = calloc(1, sizeof(*f));
  if (f == NULL) return -1;
  snprintf(f->dir, sizeof(f->dir), "/tmp/vts-test-keys-XXXXXX");
  if (mkdtemp(f->dir) == NULL) return -1;
  snprintf(f->path, sizeof(f->path), "%s/keys.db", f->dir);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fixture *f = *state;
  DIR *d = opendir(f->dir);
  if (d != NULL) {
    struct dirent *de;
    for (de = readdir(d); de != NULL; de = readdir(d)) {
      if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
      char p[512];
      snprintf(p, sizeof(p), "%s/%s", f->dir, de->d_name);
      unlink(p);
    }
    closedir(d);
  }
  rmdir(f->dir);
  free(f);
  return 0;
}

static void write_file(const char *path, const char *text, size_t len) {
  FILE *fp = fopen(path, "w");
  assert_non_null(fp);
  assert_int_equal(fwrite(text, 1, len, fp), len);
  assert_int_equal(fclose(fp), 0);
}

/* A record line for key: "name<TAB>sha256(key)<TAB>status<TAB>rest". */
static void record(char *out, size_t outlen, const char *name, const char *key, const char *status, const char *rest) {
  char hex[65];
  util_sha256_hex(key, strlen(key), hex);
  snprintf(out, outlen, "%s\t%s\t%s\t%s\n", name, hex, status, rest);
}

static struct keystore *load_text(struct fixture *f, const char *text, char *err, size_t errlen) {
  write_file(f->path, text, strlen(text));
  return keystore_load(f->path, err, errlen);
}

/* An active entry named name for key, with default limits. */
static struct key_entry entry_for(const char *name, const char *key) {
  struct key_entry e;
  memset(&e, 0, sizeof(e));
  snprintf(e.name, sizeof(e.name), "%s", name);
  util_sha256_hex(key, strlen(key), e.digest);
  e.active = 1;
  return e;
}

static void test_missing_file_is_an_empty_store(void **state) {
  struct fixture *f = *state;
  char err[128] = "";
  struct keystore *ks = keystore_load(f->path, err, sizeof(err));
  assert_non_null(ks);
  assert_int_equal(keystore_count(ks), 0);
  assert_null(keystore_lookup(ks, "anything", 8));
  assert_null(keystore_entry(ks, 0));
  keystore_free(ks);
}

static void test_active_key_is_found_by_its_digest(void **state) {
  struct fixture *f = *state;
  char text[1024], l1[256], l2[256], l3[256], err[128] = "";
  record(l1, sizeof(l1), "alice", "key-alice", "active", "5\t10\t1000");
  record(l2, sizeof(l2), "bob.v2", "key-bob", "revoked", "0\t0\t0");
  record(l3, sizeof(l3), "carol_x-1", "key-carol", "active", "0\t0\t0");
  snprintf(text, sizeof(text), "# comment\n\n%s#%s\n%s%s", l1, "another comment", l2, l3);
  struct keystore *ks = load_text(f, text, err, sizeof(err));
  assert_non_null(ks);
  assert_int_equal(keystore_count(ks), 3);

  const struct key_entry *e = keystore_lookup(ks, "key-alice", 9);
  assert_non_null(e);
  assert_string_equal(e->name, "alice");
  assert_int_equal(e->active, 1);
  assert_int_equal(e->rate, 5);
  assert_int_equal(e->window_s, 10);
  assert_int_equal(e->quota, 1000);
  e = keystore_lookup(ks, "key-carol", 9);
  assert_non_null(e);
  assert_string_equal(e->name, "carol_x-1");
  assert_int_equal(e->rate, 0);

  assert_string_equal(keystore_entry(ks, 0)->name, "alice");
  assert_string_equal(keystore_entry(ks, 1)->name, "bob.v2");
  assert_int_equal(keystore_entry(ks, 1)->active, 0);
  assert_string_equal(keystore_entry(ks, 2)->name, "carol_x-1");
  keystore_free(ks);
}

/* A file of two keys, alice active and bob revoked (no limits), loaded. */
static struct keystore *load_alice_and_bob(struct fixture *f) {
  char text[1024], l1[256], l2[256], err[128] = "";
  record(l1, sizeof(l1), "alice", "key-alice", "active", "0\t0\t0");
  record(l2, sizeof(l2), "bob", "key-bob", "revoked", "0\t0\t0");
  snprintf(text, sizeof(text), "%s%s", l1, l2);
  struct keystore *ks = load_text(f, text, err, sizeof(err));
  assert_non_null(ks);
  return ks;
}

static void test_a_name_finds_its_entry_active_or_revoked(void **state) {
  struct fixture *f = *state;
  char text[1024], l1[256], l2[256], l3[256], err[128] = "";
  record(l1, sizeof(l1), "alice", "key-alice", "active", "5\t10\t1000");
  record(l2, sizeof(l2), "bob.v2", "key-bob", "revoked", "0\t0\t0\t4");
  record(l3, sizeof(l3), "carol_x-1", "key-carol", "active", "0\t0\t0");
  snprintf(text, sizeof(text), "# comment\n%s%s%s", l1, l2, l3);
  struct keystore *ks = load_text(f, text, err, sizeof(err));
  assert_non_null(ks);
  /* The very entries of the file: the same pointers keystore_entry and keystore_lookup give. */
  assert_ptr_equal(keystore_named(ks, "alice"), keystore_entry(ks, 0));
  assert_ptr_equal(keystore_named(ks, "alice"), keystore_lookup(ks, "key-alice", 9));
  assert_int_equal(keystore_named(ks, "alice")->quota, 1000);
  const struct key_entry *bob = keystore_named(ks, "bob.v2");
  assert_ptr_equal(bob, keystore_entry(ks, 1));
  assert_int_equal(bob->active, 0);
  assert_int_equal(bob->weight, 4);
  assert_ptr_equal(keystore_named(ks, "carol_x-1"), keystore_entry(ks, 2));
  keystore_free(ks);
}

static void test_a_name_not_in_the_file_is_not_found(void **state) {
  struct fixture *f = *state;
  char err[128] = "";
  struct keystore *ks = load_alice_and_bob(f);
  assert_null(keystore_named(ks, "carol"));
  assert_null(keystore_named(ks, "alic"));
  assert_null(keystore_named(ks, "alicee"));
  assert_null(keystore_named(ks, "Alice"));
  assert_null(keystore_named(ks, ""));
  assert_null(keystore_named(ks, NULL));
  /* A digest is not a name. */
  assert_null(keystore_named(ks, keystore_entry(ks, 0)->digest));
  char longer[KEYS_MAX_NAME + 2];
  memset(longer, 'a', sizeof(longer) - 1);
  longer[sizeof(longer) - 1] = '\0';
  assert_null(keystore_named(ks, longer));
  keystore_free(ks);
  assert_null(keystore_named(NULL, "alice"));
  /* An empty store (no file) finds no name. */
  assert_int_equal(unlink(f->path), 0);
  ks = keystore_load(f->path, err, sizeof(err));
  assert_non_null(ks);
  assert_null(keystore_named(ks, "alice"));
  keystore_free(ks);
}

/*
 * A reload is a new store: its names are those of the new file (a dropped key is no longer found, a revoked one is
 * found revoked, a new one found), while the old store, until freed, still answers for the old file.
 */
static void test_after_a_reload_names_are_those_of_the_new_file(void **state) {
  struct fixture *f = *state;
  struct key_entry e[2] = {entry_for("alice", "k1"), entry_for("bob", "k2")};
  char err[256] = "";
  assert_int_equal(keystore_save(f->path, e, 2, err, sizeof(err)), 0);
  struct keystore *old = keystore_load(f->path, err, sizeof(err));
  assert_non_null(old);

  struct key_entry n[2] = {entry_for("bob", "k2b"), entry_for("carol", "k3")};
  n[0].active = 0;
  assert_int_equal(keystore_save(f->path, n, 2, err, sizeof(err)), 0);
  struct keystore *ks = keystore_load(f->path, err, sizeof(err));
  assert_non_null(ks);
  assert_null(keystore_named(ks, "alice"));
  const struct key_entry *bob = keystore_named(ks, "bob");
  assert_ptr_equal(bob, keystore_entry(ks, 0));
  assert_int_equal(bob->active, 0);
  assert_string_equal(bob->digest, n[0].digest);
  assert_ptr_equal(keystore_named(ks, "carol"), keystore_entry(ks, 1));

  assert_ptr_equal(keystore_named(old, "alice"), keystore_entry(old, 0));
  assert_int_equal(keystore_named(old, "bob")->active, 1);
  assert_null(keystore_named(old, "carol"));
  keystore_free(old);
  keystore_free(ks);
}

static void test_revoked_unknown_and_near_keys_are_not_found(void **state) {
  struct fixture *f = *state;
  struct keystore *ks = load_alice_and_bob(f);
  assert_null(keystore_lookup(ks, "key-bob", 7));
  assert_null(keystore_lookup(ks, "key-alicE", 9));
  assert_null(keystore_lookup(ks, "key-alic", 8));
  assert_null(keystore_lookup(ks, "key-alice ", 10));
  assert_null(keystore_lookup(ks, "", 0));
  assert_null(keystore_lookup(ks, NULL, 0));
  /* The digest itself is not a key. */
  char hex[65];
  util_sha256_hex("key-alice", 9, hex);
  assert_null(keystore_lookup(ks, hex, 64));
  /* Only len bytes count. */
  assert_non_null(keystore_lookup(ks, "key-alice-and-more", 9));
  keystore_free(ks);
}

static void test_repeated_lookups_of_many_keys_find_each_its_own_entry(void **state) {
  /* More keys than the store remembers: found ones are answered from memory, evicted ones hashed again. */
  struct fixture *f = *state;
  static char text[40 * 256];
  char line[256], err[128] = "";
  size_t len = 0;
  for (int i = 0; i < 40; i++) {
    char name[16], key[96];
    snprintf(name, sizeof(name), "k%d", i);
    snprintf(key, sizeof(key), "vts_%064d", i);
    record(line, sizeof(line), name, key, i == 7 ? "revoked" : "active", "0\t0\t0");
    len += (size_t)snprintf(text + len, sizeof(text) - len, "%s", line);
  }
  struct keystore *ks = load_text(f, text, err, sizeof(err));
  assert_non_null(ks);
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < 40; i++) {
      char name[16], key[96];
      snprintf(name, sizeof(name), "k%d", i);
      snprintf(key, sizeof(key), "vts_%064d", i);
      const struct key_entry *e = keystore_lookup(ks, key, strlen(key));
      if (i == 7) {
        assert_null(e);
      } else {
        assert_non_null(e);
        assert_string_equal(e->name, name);
      }
      key[0] ^= 1; /* one bit off ("wts_..."): never found, remembered or not */
      assert_null(keystore_lookup(ks, key, strlen(key)));
    }
  }
  keystore_free(ks);
}

static void test_key_longer_than_the_limit_is_not_found(void **state) {
  struct fixture *f = *state;
  char key[VTS_MAX_API_KEY_BYTES + 2];
  memset(key, 'k', sizeof(key));
  key[sizeof(key) - 1] = '\0';
  char text[1024], l1[512], l2[512], err[128] = "";
  record(l1, sizeof(l1), "long", key, "active", "0\t0\t0"); /* VTS_MAX_API_KEY_BYTES + 1 bytes */
  key[VTS_MAX_API_KEY_BYTES] = '\0';
  record(l2, sizeof(l2), "limit", key, "active", "0\t0\t0"); /* exactly the limit */
  snprintf(text, sizeof(text), "%s%s", l1, l2);
  struct keystore *ks = load_text(f, text, err, sizeof(err));
  assert_non_null(ks);
  memset(key, 'k', sizeof(key) - 1);
  assert_null(keystore_lookup(ks, key, VTS_MAX_API_KEY_BYTES + 1));
  const struct key_entry *e = keystore_lookup(ks, key, VTS_MAX_API_KEY_BYTES);
  assert_non_null(e);
  assert_string_equal(e->name, "limit");
  keystore_free(ks);
}

struct bad_line {
  const char *line; /* with "%s" where a valid digest goes */
  const char *reason;
};

/* Each malformed record fails the load with "line 3: <reason>" (two valid lines come first). */
static void test_malformed_lines_fail_with_line_number(void **state) {
  struct fixture *f = *state;
  static const struct bad_line cases[] = {
      {"name\t%s\tactive\t0\t0", "expected 6 or 7 tab-separated fields, found 5"},
      {"name\t%s\tactive\t0\t0\t0\t1\t0", "expected 6 or 7 tab-separated fields, found more"},
      {"name %s active 0 0 0", "expected 6 or 7 tab-separated fields, found 1"},
      {"\t%s\tactive\t0\t0\t0", "name must be 1 to 64 characters of A-Z a-z 0-9 _ . -"},
      {"bad name\t%s\tactive\t0\t0\t0", "name must be 1 to 64 characters of A-Z a-z 0-9 _ . -"},
      {"bad/name\t%s\tactive\t0\t0\t0", "name must be 1 to 64 characters of A-Z a-z 0-9 _ . -"},
      {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\t%s\tactive\t0\t0\t0",
       "name must be 1 to 64 characters of A-Z a-z 0-9 _ . -"},
      {"name\t%sa\tactive\t0\t0\t0", "digest must be 64 lowercase hex digits"},
      {"name\tABCDEF%s\tactive\t0\t0\t0", "digest must be 64 lowercase hex digits"},
      {"name\t\tactive\t0\t0\t0", "digest must be 64 lowercase hex digits"},
      {"name\t%s\tActive\t0\t0\t0", "status must be active or revoked"},
      {"name\t%s\t\t0\t0\t0", "status must be active or revoked"},
      {"name\t%s\tactive\t-1\t0\t0", "rate must be an integer from 0 to 1000000"},
      {"name\t%s\tactive\t1000001\t0\t0", "rate must be an integer from 0 to 1000000"},
      {"name\t%s\tactive\t\t0\t0", "rate must be an integer from 0 to 1000000"},
      {"name\t%s\tactive\t5x\t0\t0", "rate must be an integer from 0 to 1000000"},
      {"name\t%s\tactive\t0\t86401\t0", "window_s must be an integer from 0 to 86400"},
      {"name\t%s\tactive\t0\t 1\t0", "window_s must be an integer from 0 to 86400"},
      {"name\t%s\tactive\t0\t0\t1000000000001", "quota must be an integer from 0 to 1000000000000"},
      {"name\t%s\tactive\t0\t0\t0\r", "quota must be an integer from 0 to 1000000000000"},
      {"name\t%s\tactive\t0\t0\t99999999999999999999999", "quota must be an integer from 0 to 1000000000000"},
      {"name\t%s\tactive\t0\t0\t0\t0", "weight must be an integer from 1 to 100"},
      {"name\t%s\tactive\t0\t0\t0\t101", "weight must be an integer from 1 to 100"},
      {"name\t%s\tactive\t0\t0\t0\t", "weight must be an integer from 1 to 100"},
      {"name\t%s\tactive\t0\t0\t0\t2x", "weight must be an integer from 1 to 100"},
      {"name\t%s\tactive\t0\t0\t0\t-2", "weight must be an integer from 1 to 100"},
      {" # indented comment", "expected 6 or 7 tab-separated fields, found 1"},
  };
  char valid_hex[65], l1[256], l2[256];
  util_sha256_hex("the-key", 7, valid_hex);
  record(l1, sizeof(l1), "first", "k1", "active", "0\t0\t0");
  record(l2, sizeof(l2), "second", "k2", "revoked", "0\t0\t0");
  int failures = 0;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char line[512], text[1024], err[256] = "", want[256];
    /* The case strings are constant format strings of this test; the digest is ours. */
    if (strstr(cases[i].line, "%s") != NULL) {
      const char *at = strstr(cases[i].line, "%s");
      snprintf(line, sizeof(line), "%.*s%s%s", (int)(at - cases[i].line), cases[i].line, valid_hex, at + 2);
    } else {
      snprintf(line, sizeof(line), "%s", cases[i].line);
    }
    snprintf(text, sizeof(text), "%s%s%s\n", l1, l2, line);
    snprintf(want, sizeof(want), "line 3: %s", cases[i].reason);
    struct keystore *ks = load_text(f, text, err, sizeof(err));
    if (ks != NULL || strcmp(err, want) != 0) {
      print_error("line \"%s\": expected failure \"%s\", got %s \"%s\"\n", line, want, ks ? "success" : "failure", err);
      failures++;
    }
    keystore_free(ks);
  }
  assert_int_equal(failures, 0);
}

/*
 * A seventh field weighs a key's share of batch work; a line without one (every file of an earlier release) weighs 1,
 * and both kinds of line mix in one file.
 */
static void test_the_weight_field_is_optional_and_defaults_to_1(void **state) {
  struct fixture *f = *state;
  char text[1024], l1[256], l2[256], l3[256], err[128] = "";
  record(l1, sizeof(l1), "old", "k1", "active", "5\t10\t1000");
  record(l2, sizeof(l2), "heavy", "k2", "active", "0\t0\t0\t2");
  record(l3, sizeof(l3), "most", "k3", "revoked", "0\t0\t7\t100");
  snprintf(text, sizeof(text), "# name\tsha256\tstatus\trate\twindow_s\tquota\n%s%s%s", l1, l2, l3);
  struct keystore *ks = load_text(f, text, err, sizeof(err));
  assert_non_null(ks);
  assert_int_equal(keystore_count(ks), 3);
  const struct key_entry *e = keystore_lookup(ks, "k1", 2);
  assert_non_null(e);
  assert_int_equal(e->weight, 1);
  assert_int_equal(e->quota, 1000);
  e = keystore_lookup(ks, "k2", 2);
  assert_non_null(e);
  assert_int_equal(e->weight, 2);
  assert_int_equal(keystore_entry(ks, 2)->weight, 100);
  assert_int_equal(keystore_entry(ks, 2)->quota, 7);
  keystore_free(ks);
}

/* Saved, a weight of 1 (or 0, an entry made in memory) is no field, so the file stays one earlier releases read. */
static void test_save_writes_a_weight_only_when_it_is_not_1(void **state) {
  struct fixture *f = *state;
  struct key_entry e[3] = {entry_for("plain", "k1"), entry_for("one", "k2"), entry_for("heavy", "k3")};
  e[1].weight = 1;
  e[2].weight = 3;
  e[2].quota = 9;
  char err[256] = "";
  assert_int_equal(keystore_save(f->path, e, 3, err, sizeof(err)), 0);
  FILE *fp = fopen(f->path, "r");
  assert_non_null(fp);
  char text[2048];
  size_t len = fread(text, 1, sizeof(text) - 1, fp);
  fclose(fp);
  text[len] = '\0';
  char want[2048], l1[256], l2[256], l3[256];
  record(l1, sizeof(l1), "plain", "k1", "active", "0\t0\t0");
  record(l2, sizeof(l2), "one", "k2", "active", "0\t0\t0");
  record(l3, sizeof(l3), "heavy", "k3", "active", "0\t0\t9\t3");
  snprintf(want, sizeof(want),
           "# vts API keys, managed by vts-keys. SHA-256 digests only, never keys.\n"
           "# name\tsha256\tstatus\trate\twindow_s\tquota\tweight  (0 = service default; no weight: 1)\n%s%s%s",
           l1, l2, l3);
  assert_string_equal(text, want);
  struct keystore *ks = keystore_load(f->path, err, sizeof(err));
  assert_non_null(ks);
  assert_int_equal(keystore_entry(ks, 0)->weight, 1);
  assert_int_equal(keystore_entry(ks, 1)->weight, 1);
  assert_int_equal(keystore_entry(ks, 2)->weight, 3);
  keystore_free(ks);
  /* Out of 1..100 (0 aside, the default): refused, the file as it was. */
  e[2].weight = VTS_MAX_KEY_WEIGHT + 1;
  assert_int_equal(keystore_save(f->path, e, 3, err, sizeof(err)), -EINVAL);
  assert_string_equal(err, "entry 3: limits out of range");
  e[2].weight = -1;
  assert_int_equal(keystore_save(f->path, e, 3, err, sizeof(err)), -EINVAL);
  fp = fopen(f->path, "r");
  assert_non_null(fp);
  char again[2048];
  len = fread(again, 1, sizeof(again) - 1, fp);
  fclose(fp);
  again[len] = '\0';
  assert_string_equal(again, want);
}

static void test_duplicate_names_and_digests_fail(void **state) {
  struct fixture *f = *state;
  char text[1024], l1[256], l2[256], l3[256], err[128] = "";
  record(l1, sizeof(l1), "alice", "k1", "active", "0\t0\t0");
  record(l2, sizeof(l2), "bob", "k2", "active", "0\t0\t0");
  record(l3, sizeof(l3), "alice", "k3", "revoked", "0\t0\t0");
  snprintf(text, sizeof(text), "%s# c\n%s%s", l1, l2, l3);
  /* The whole load fails: a name never has two entries to choose from. */
  assert_null(load_text(f, text, err, sizeof(err)));
  assert_string_equal(err, "line 4: duplicate name");

  record(l3, sizeof(l3), "carol", "k1", "active", "0\t0\t0");
  snprintf(text, sizeof(text), "%s%s%s", l1, l2, l3);
  assert_null(load_text(f, text, err, sizeof(err)));
  assert_string_equal(err, "line 3: duplicate digest");
}

static void test_last_line_without_newline_is_read(void **state) {
  struct fixture *f = *state;
  char l1[256], err[128] = "";
  record(l1, sizeof(l1), "alice", "k1", "active", "0\t0\t0");
  l1[strlen(l1) - 1] = '\0';
  struct keystore *ks = load_text(f, l1, err, sizeof(err));
  assert_non_null(ks);
  assert_non_null(keystore_lookup(ks, "k1", 2));
  keystore_free(ks);
}

static void test_nul_byte_fails_the_load(void **state) {
  struct fixture *f = *state;
  char l1[256], text[512], err[128] = "";
  record(l1, sizeof(l1), "alice", "k1", "active", "0\t0\t0");
  size_t n = strlen(l1);
  memcpy(text, l1, n);
  memcpy(text + n, "bob\0\n", 5);
  write_file(f->path, text, n + 5);
  assert_null(keystore_load(f->path, err, sizeof(err)));
  assert_string_equal(err, "line 2: NUL byte");
}

static void test_unreadable_path_fails_with_reason(void **state) {
  struct fixture *f = *state;
  char err[256] = "";
  assert_null(keystore_load(f->dir, err, sizeof(err)));
  assert_non_null(strstr(err, "Is a directory"));
}

static void test_many_keys_are_all_found(void **state) {
  struct fixture *f = *state;
  enum { N = 2000 };
  struct key_entry *entries = calloc(N, sizeof(*entries));
  assert_non_null(entries);
  for (int i = 0; i < N; i++) {
    char key[32];
    snprintf(entries[i].name, sizeof(entries[i].name), "k%d", i);
    snprintf(key, sizeof(key), "secret-%d", i);
    util_sha256_hex(key, strlen(key), entries[i].digest);
    entries[i].active = i % 3 != 0;
  }
  char err[256] = "";
  assert_int_equal(keystore_save(f->path, entries, N, err, sizeof(err)), 0);
  struct keystore *ks = keystore_load(f->path, err, sizeof(err));
  assert_non_null(ks);
  assert_int_equal(keystore_count(ks), N);
  int wrong = 0;
  for (int i = 0; i < N; i++) {
    char key[32];
    snprintf(key, sizeof(key), "secret-%d", i);
    const struct key_entry *e = keystore_lookup(ks, key, strlen(key));
    if (i % 3 == 0 ? e != NULL : (e == NULL || strcmp(e->name, entries[i].name) != 0)) wrong++;
  }
  assert_int_equal(wrong, 0);
  assert_null(keystore_lookup(ks, "secret-x", 8));
  keystore_free(ks);
  free(entries);
}

static void test_save_round_trips_and_a_new_file_is_0640(void **state) {
  struct fixture *f = *state;
  struct key_entry e[2] = {entry_for("alice", "k1"), entry_for("bob", "k2")};
  e[0].rate = 7;
  e[0].window_s = 30;
  e[0].quota = VTS_MAX_KEY_QUOTA;
  e[1].active = 0;
  char err[256] = "";
  mode_t old = umask(0);
  int rc = keystore_save(f->path, e, 2, err, sizeof(err));
  umask(old);
  assert_int_equal(rc, 0);

  struct stat st;
  assert_int_equal(stat(f->path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0640);
  struct keystore *ks = keystore_load(f->path, err, sizeof(err));
  assert_non_null(ks);
  assert_int_equal(keystore_count(ks), 2);
  const struct key_entry *a = keystore_lookup(ks, "k1", 2);
  assert_non_null(a);
  assert_int_equal(a->rate, 7);
  assert_int_equal(a->window_s, 30);
  assert_true(a->quota == VTS_MAX_KEY_QUOTA);
  assert_null(keystore_lookup(ks, "k2", 2));
  assert_int_equal(keystore_entry(ks, 1)->active, 0);
  keystore_free(ks);

  /* No temporary file is left beside it. */
  DIR *d = opendir(f->dir);
  assert_non_null(d);
  int files = 0;
  for (struct dirent *de = readdir(d); de != NULL; de = readdir(d)) {
    if (de->d_name[0] != '.') files++;
  }
  closedir(d);
  assert_int_equal(files, 1);
}

/* The key file holds at most VTS_MAX_KEYS entries: one more is refused by the load and by the save alike. */
static void test_more_than_max_keys_are_refused_by_load_and_save(void **state) {
  struct fixture *f = *state;
  struct key_entry *entries = calloc(VTS_MAX_KEYS + 1, sizeof(*entries));
  assert_non_null(entries);
  for (int i = 0; i <= VTS_MAX_KEYS; i++) {
    char key[32];
    snprintf(entries[i].name, sizeof(entries[i].name), "k%d", i);
    snprintf(key, sizeof(key), "secret-%d", i);
    util_sha256_hex(key, strlen(key), entries[i].digest);
    entries[i].active = 1;
  }
  char err[256] = "";
  assert_int_equal(keystore_save(f->path, entries, VTS_MAX_KEYS + 1, err, sizeof(err)), -EINVAL);
  assert_string_equal(err, "more than 100000 keys (revoked ones included): remove some first");
  assert_int_equal(access(f->path, F_OK), -1);
  assert_int_equal(keystore_save(f->path, entries, VTS_MAX_KEYS, err, sizeof(err)), 0);
  struct keystore *ks = keystore_load(f->path, err, sizeof(err));
  assert_non_null(ks);
  assert_int_equal(keystore_count(ks), VTS_MAX_KEYS);
  /* Every name of the fullest file finds its own entry, and the one name not in it none. */
  int wrong = 0;
  for (size_t i = 0; i < VTS_MAX_KEYS; i++) wrong += keystore_named(ks, entries[i].name) != keystore_entry(ks, i);
  assert_int_equal(wrong, 0);
  assert_null(keystore_named(ks, entries[VTS_MAX_KEYS].name));
  keystore_free(ks);
  /* One line more, written by hand: the load names it. */
  FILE *fp = fopen(f->path, "a");
  assert_non_null(fp);
  fprintf(fp, "extra\t%s\tactive\t0\t0\t0\n", entries[VTS_MAX_KEYS].digest);
  fclose(fp);
  assert_null(keystore_load(f->path, err, sizeof(err)));
  assert_string_equal(err, "line 100003: more than 100000 keys");
  free(entries);
}

static void test_save_refuses_invalid_or_duplicate_entries(void **state) {
  struct fixture *f = *state;
  struct key_entry e[2] = {entry_for("alice", "k1"), entry_for("alice", "k1")};
  char err[256] = "";
  assert_int_equal(keystore_save(f->path, e, 2, err, sizeof(err)), -EINVAL);
  assert_string_equal(err, "entry 2: duplicate name");
  snprintf(e[1].name, sizeof(e[1].name), "bob");
  assert_int_equal(keystore_save(f->path, e, 2, err, sizeof(err)), -EINVAL);
  assert_string_equal(err, "entry 2: duplicate digest");
  util_sha256_hex("k2", 2, e[1].digest);
  e[1].rate = -1;
  assert_int_equal(keystore_save(f->path, e, 2, err, sizeof(err)), -EINVAL);
  assert_string_equal(err, "entry 2: limits out of range");
  e[1].rate = 0;
  snprintf(e[1].name, sizeof(e[1].name), "b b");
  assert_int_equal(keystore_save(f->path, e, 2, err, sizeof(err)), -EINVAL);
  /* Nothing was written. */
  assert_int_equal(access(f->path, F_OK), -1);
}

static void test_name_pattern(void **state) {
  (void)state;
  assert_true(keys_name_valid("a", 1));
  assert_true(keys_name_valid("A.b_c-9", 7));
  char name[KEYS_MAX_NAME + 1];
  memset(name, 'n', sizeof(name));
  assert_true(keys_name_valid(name, KEYS_MAX_NAME));
  assert_false(keys_name_valid(name, KEYS_MAX_NAME + 1));
  assert_false(keys_name_valid("", 0));
  assert_false(keys_name_valid("a b", 3));
  assert_false(keys_name_valid("a\tb", 3));
  assert_false(keys_name_valid("a/b", 3));
  assert_false(keys_name_valid("\xc3\xa9", 2));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_missing_file_is_an_empty_store, setup, teardown),
      cmocka_unit_test_setup_teardown(test_active_key_is_found_by_its_digest, setup, teardown),
      cmocka_unit_test_setup_teardown(test_revoked_unknown_and_near_keys_are_not_found, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_name_finds_its_entry_active_or_revoked, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_name_not_in_the_file_is_not_found, setup, teardown),
      cmocka_unit_test_setup_teardown(test_after_a_reload_names_are_those_of_the_new_file, setup, teardown),
      cmocka_unit_test_setup_teardown(test_repeated_lookups_of_many_keys_find_each_its_own_entry, setup, teardown),
      cmocka_unit_test_setup_teardown(test_key_longer_than_the_limit_is_not_found, setup, teardown),
      cmocka_unit_test_setup_teardown(test_malformed_lines_fail_with_line_number, setup, teardown),
      cmocka_unit_test_setup_teardown(test_the_weight_field_is_optional_and_defaults_to_1, setup, teardown),
      cmocka_unit_test_setup_teardown(test_save_writes_a_weight_only_when_it_is_not_1, setup, teardown),
      cmocka_unit_test_setup_teardown(test_duplicate_names_and_digests_fail, setup, teardown),
      cmocka_unit_test_setup_teardown(test_last_line_without_newline_is_read, setup, teardown),
      cmocka_unit_test_setup_teardown(test_nul_byte_fails_the_load, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unreadable_path_fails_with_reason, setup, teardown),
      cmocka_unit_test_setup_teardown(test_many_keys_are_all_found, setup, teardown),
      cmocka_unit_test_setup_teardown(test_save_round_trips_and_a_new_file_is_0640, setup, teardown),
      cmocka_unit_test_setup_teardown(test_more_than_max_keys_are_refused_by_load_and_save, setup, teardown),
      cmocka_unit_test_setup_teardown(test_save_refuses_invalid_or_duplicate_entries, setup, teardown),
      cmocka_unit_test(test_name_pattern),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
