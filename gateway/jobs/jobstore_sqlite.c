/*
 * Batch jobs in an embedded SQLite database: the backend without VTS_REDIS_URL (see jobstore.h). Over 800 lines:
 * every operation of the store's table is here with its SQL, and all share one schema and one transaction step.
 */
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "gateway/jobs/jobstore_backend.h"

/*
 * The schema. A job's turn orders the round-robin of takes: the job with items due and the smallest turn gives the
 * next item and takes a turn past every other (a new job's turn is 0: it gives its first item next). An item's answer
 * is zlib-compressed in body, body_len its size before. not_before_ms holds back an item that met a ration; lease_ms is
 * when a running item's taker is presumed dead. A webhook's delivery (hooks) is state 0 pending (due at next_ms), 1
 * delivered or 2 given up (enum jobstore_hook_state).
 */
static const char schema[] =
    "PRAGMA journal_mode=WAL;"
    "PRAGMA synchronous=NORMAL;"
    "CREATE TABLE IF NOT EXISTS jobs("
    " id TEXT PRIMARY KEY, key_id TEXT NOT NULL, cancelled INTEGER NOT NULL DEFAULT 0,"
    " created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL, total INTEGER NOT NULL,"
    " language TEXT NOT NULL, translate TEXT NOT NULL, format TEXT NOT NULL,"
    " webhook_url TEXT NOT NULL, webhook_secret TEXT NOT NULL, source TEXT NOT NULL,"
    " turn INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX IF NOT EXISTS jobs_by_key ON jobs(key_id);"
    "CREATE INDEX IF NOT EXISTS jobs_by_age ON jobs(updated_ms);"
    "CREATE TABLE IF NOT EXISTS items("
    " job_id TEXT NOT NULL, seq INTEGER NOT NULL, video_id TEXT NOT NULL, status INTEGER NOT NULL,"
    " not_before_ms INTEGER NOT NULL DEFAULT 0, lease_ms INTEGER NOT NULL DEFAULT 0, tries INTEGER NOT NULL DEFAULT 0,"
    " error_code TEXT, error_message TEXT, body BLOB, body_len INTEGER,"
    " PRIMARY KEY(job_id, seq)) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS items_by_status ON items(status, not_before_ms, job_id, seq);"
    "CREATE INDEX IF NOT EXISTS items_queue ON items(status, job_id, seq);"
    "CREATE TABLE IF NOT EXISTS hooks("
    " job_id TEXT PRIMARY KEY, state INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, made_ms INTEGER NOT NULL,"
    " next_ms INTEGER NOT NULL, http_status INTEGER NOT NULL DEFAULT 0, body BLOB NOT NULL) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS hooks_due ON hooks(state, next_ms);"
    "CREATE INDEX IF NOT EXISTS jobs_hooked ON jobs(id) WHERE webhook_url!='';"
    /* A playlist's or channel's job: the continuation of its list's next page, with a lease like an item's. */
    "CREATE TABLE IF NOT EXISTS pages("
    " job_id TEXT PRIMARY KEY, token TEXT NOT NULL, max_items INTEGER NOT NULL,"
    " not_before_ms INTEGER NOT NULL DEFAULT 0, lease_ms INTEGER NOT NULL DEFAULT 0, tries INTEGER NOT NULL DEFAULT 0)"
    " WITHOUT ROWID;";

/* A database made before jobs took turns gets the column (an error when it is there already, which is ignored). */
static const char add_turn[] =
    "ALTER TABLE jobs ADD COLUMN turn INTEGER NOT NULL DEFAULT 0;"
    "CREATE INDEX IF NOT EXISTS jobs_by_turn ON jobs(turn);";
/* Likewise the columns of bounded lists and revoked keys: why a job stopped short, and the pages its list read. */
static const char add_stop[] = "ALTER TABLE jobs ADD COLUMN stop_reason TEXT NOT NULL DEFAULT '';";
static const char add_read[] = "ALTER TABLE pages ADD COLUMN nread INTEGER NOT NULL DEFAULT 1;";

/*
 * Whether a job is open: an item queued or running, or a page of its list to read (alias is the jobs table's name in
 * the statement).
 */
#define JOB_OPEN(alias)                                 \
  "(EXISTS(SELECT 1 FROM items i WHERE i.job_id=" alias \
  ".id AND i.status IN (0,1)) OR "                      \
  "EXISTS(SELECT 1 FROM pages p WHERE p.job_id=" alias ".id))"

/*
 * The jobs jobstore_expire may delete: nothing queued or running, no webhook delivery pending or owed, and no change
 * since the parameter.
 */
#define EXPIRABLE                                                                                                   \
  "jobs.updated_ms<? AND NOT EXISTS(SELECT 1 FROM items i WHERE i.job_id=jobs.id AND i.status IN (0,1)) AND NOT "   \
  "EXISTS(SELECT 1 FROM hooks h WHERE h.job_id=jobs.id AND h.state=0) AND (jobs.webhook_url='' OR EXISTS(SELECT 1 " \
  "FROM hooks h WHERE h.job_id=jobs.id)) AND NOT EXISTS(SELECT 1 FROM pages p WHERE p.job_id=jobs.id)"

/*
 * Every statement the store runs, X(name, sql): each is prepared once per handle, on its first use, and kept until the
 * handle closes (reset and its bindings cleared after each use), so that a poll of an idle store parses no SQL.
 */
#define SQ_STATEMENTS(X)                                                                                               \
  X(TX_BEGIN, "BEGIN")                                                                                                 \
  X(TX_IMMEDIATE, "BEGIN IMMEDIATE")                                                                                   \
  X(TX_COMMIT, "COMMIT")                                                                                               \
  X(TX_ROLLBACK, "ROLLBACK")                                                                                           \
  X(JOB_INSERT,                                                                                                        \
    "INSERT INTO "                                                                                                     \
    "jobs(id,key_id,created_ms,updated_ms,total,language,translate,format,webhook_url,webhook_secret,source) "         \
    "VALUES(?,?,?,?,?,?,?,?,?,?,?)")                                                                                   \
  X(ITEM_INSERT, "INSERT INTO items(job_id,seq,video_id,status) VALUES(?,?,?,0)")                                      \
  X(PAGE_INSERT, "INSERT INTO pages(job_id,token,max_items) VALUES(?,?,?)")                                            \
  X(JOB_GET,                                                                                                           \
    "SELECT cancelled,created_ms,updated_ms,total,language,translate,format,webhook_url,webhook_secret,stop_reason "   \
    "FROM jobs WHERE id=? AND key_id=?")                                                                               \
  X(JOB_COUNTS, "SELECT status,count(*) FROM items WHERE job_id=? GROUP BY status")                                    \
  X(JOB_HAS_PAGE, "SELECT 1 FROM pages WHERE job_id=?")                                                                \
  X(JOB_OWNED, "SELECT 1 FROM jobs WHERE id=? AND key_id=?")                                                           \
  X(ITEMS_PAGE,                                                                                                        \
    "SELECT seq,video_id,status,error_code,error_message,body,body_len FROM items WHERE job_id=? AND seq>? ORDER BY "  \
    "seq LIMIT ?")                                                                                                     \
  X(JOB_IS_OPEN, "SELECT 1 FROM jobs j WHERE j.id=? AND " JOB_OPEN("j"))                                               \
  X(JOB_CANCEL_ITEMS, "UPDATE items SET status=4 WHERE job_id=? AND status=0")                                         \
  X(PAGE_DELETE, "DELETE FROM pages WHERE job_id=?")                                                                   \
  X(JOB_CANCEL, "UPDATE jobs SET cancelled=1,updated_ms=? WHERE id=?")                                                 \
  X(KEY_OPEN_JOBS, "SELECT count(*) FROM jobs j WHERE j.key_id=? AND " JOB_OPEN("j"))                                  \
  X(KEY_STORED_ITEMS, "SELECT COALESCE(SUM(total),0) FROM jobs WHERE key_id=?")                                        \
  X(ITEM_LEASE, "UPDATE items SET status=1,lease_ms=?,tries=tries+1 WHERE job_id=? AND seq=?")                         \
  X(JOB_TURN, "UPDATE jobs SET updated_ms=?,turn=(SELECT max(turn) FROM jobs)+1 WHERE id=?")                           \
  X(JOB_TOUCH, "UPDATE jobs SET updated_ms=? WHERE id=?")                                                              \
  X(ITEM_DONE, "UPDATE items SET status=2,body=?,body_len=? WHERE job_id=? AND seq=? AND status=1")                    \
  X(ITEM_FAIL, "UPDATE items SET status=3,error_code=?,error_message=? WHERE job_id=? AND seq=? AND status=1")         \
  X(ITEM_RETRY, "UPDATE items SET status=0,not_before_ms=?,lease_ms=0 WHERE job_id=? AND seq=? AND status=1")          \
  X(PAGES_RECOVER, "UPDATE pages SET lease_ms=0 WHERE lease_ms>0 AND lease_ms<?")                                      \
  X(ITEMS_RECOVER, "UPDATE items SET status=0,lease_ms=0 WHERE status=1 AND lease_ms<?")                               \
  X(EXPIRE_FIND, "SELECT id FROM jobs WHERE " EXPIRABLE " LIMIT 1")                                                    \
  X(EXPIRE_ITEMS,                                                                                                      \
    "DELETE FROM items WHERE job_id=?1 AND seq IN (SELECT seq FROM items WHERE job_id=?1 ORDER BY seq LIMIT ?2)")      \
  X(JOB_DELETE, "DELETE FROM jobs WHERE id=?")                                                                         \
  X(HOOK_DELETE, "DELETE FROM hooks WHERE job_id=?")                                                                   \
  X(HOOK_OWED,                                                                                                         \
    "SELECT id,key_id FROM jobs WHERE webhook_url!='' AND NOT EXISTS(SELECT 1 FROM hooks h WHERE h.job_id=jobs.id) "   \
    "AND NOT EXISTS(SELECT 1 FROM items i INDEXED BY items_queue WHERE i.status IN (0,1) AND i.job_id=jobs.id) AND "   \
    "NOT EXISTS(SELECT 1 FROM pages p WHERE p.job_id=jobs.id) LIMIT 1")                                                \
  X(HOOK_ADD, "INSERT OR IGNORE INTO hooks(job_id,state,made_ms,next_ms,body) VALUES(?,0,?,?,?)")                      \
  X(HOOK_END, "UPDATE hooks SET state=?,next_ms=?,http_status=? WHERE job_id=? AND state=0")                           \
  X(PAGE_DUE, "SELECT 1 FROM pages WHERE lease_ms=0 AND not_before_ms<=? LIMIT 1")                                     \
  X(ITEM_DUE, "SELECT 1 FROM items WHERE status=0 AND not_before_ms<=? LIMIT 1")                                       \
  X(HOOK_DUE, "SELECT 1 FROM hooks WHERE state=0 AND next_ms<=? LIMIT 1")                                              \
  X(JOB_IDS, "SELECT video_id,seq FROM items WHERE job_id=?")                                                          \
  X(PAGE_MAX_ITEMS, "SELECT max_items FROM pages WHERE job_id=? AND lease_ms>0")                                       \
  X(JOB_TOTAL, "UPDATE jobs SET total=?,updated_ms=? WHERE id=?")                                                      \
  X(PAGE_NEXT, "UPDATE pages SET token=?,lease_ms=0,tries=0,not_before_ms=0,nread=? WHERE job_id=?")                   \
  X(JOB_STOP_REASON, "UPDATE jobs SET stop_reason=? WHERE id=?")                                                       \
  X(PAGE_BACK, "UPDATE pages SET lease_ms=0,not_before_ms=? WHERE job_id=? AND lease_ms>0")                            \
  X(KEY_STOP_ITEMS,                                                                                                    \
    "UPDATE items SET status=4 WHERE status=0 AND job_id IN (SELECT id FROM jobs WHERE key_id=? AND stop_reason=?)")   \
  X(KEY_STOP_PAGES, "DELETE FROM pages WHERE job_id IN (SELECT id FROM jobs WHERE key_id=?)")                          \
  X(KEY_STOP_HOOKS, "UPDATE hooks SET state=2 WHERE state=0 AND job_id IN (SELECT id FROM jobs WHERE key_id=?)")       \
  X(KEY_GIVE_UP_HOOKS,                                                                                                 \
    "INSERT OR IGNORE INTO hooks(job_id,state,made_ms,next_ms,body) SELECT id,2,?,0,x'' FROM jobs WHERE key_id=? AND " \
    "webhook_url!=''")                                                                                                 \
  X(ITEM_TAKE,                                                                                                         \
    "SELECT i.job_id,i.seq,i.video_id,i.tries,j.key_id,j.language,j.translate,j.format,j.created_ms FROM items i "     \
    "INDEXED BY items_queue JOIN jobs j ON j.id=i.job_id WHERE i.status=0 AND i.not_before_ms<=?1 AND "                \
    "i.job_id=(SELECT id FROM jobs WHERE EXISTS(SELECT 1 FROM items q INDEXED BY items_queue WHERE q.status=0 "        \
    "AND q.job_id=jobs.id AND q.not_before_ms<=?1) AND key_id NOT IN (SELECT value FROM json_each(?2)) ORDER BY "      \
    "turn,id LIMIT 1) ORDER BY i.seq LIMIT 1")                                                                         \
  X(HOOK_TAKE,                                                                                                         \
    "SELECT h.job_id,h.attempts,h.made_ms,h.body,j.webhook_url,j.webhook_secret,j.key_id FROM hooks h JOIN jobs "      \
    "j ON j.id=h.job_id WHERE h.state=0 AND h.next_ms<=? AND j.key_id NOT IN (SELECT value FROM json_each(?)) "        \
    "ORDER BY h.next_ms LIMIT 1")                                                                                      \
  X(HOOK_LEASE, "UPDATE hooks SET attempts=attempts+1,next_ms=? WHERE job_id=?")                                       \
  X(PAGE_TAKE,                                                                                                         \
    "SELECT p.job_id,p.token,p.tries,j.key_id,j.created_ms,p.nread FROM pages p JOIN jobs j ON j.id=p.job_id "         \
    "WHERE p.lease_ms=0 AND p.not_before_ms<=? AND j.cancelled=0 AND j.key_id NOT IN (SELECT value FROM "              \
    "json_each(?)) ORDER BY p.job_id LIMIT 1")                                                                         \
  X(PAGE_LEASE, "UPDATE pages SET lease_ms=?,tries=tries+1 WHERE job_id=?")                                            \
  X(KEY_STOP_JOBS, "UPDATE jobs SET cancelled=1,stop_reason=?,updated_ms=? WHERE key_id=? AND " JOB_OPEN("jobs"))

#define SQ_ENUM(name, sql) SQ_##name,
enum sq_stmt { SQ_STATEMENTS(SQ_ENUM) SQ__COUNT };
#undef SQ_ENUM

#define SQ_SQL(name, sql) sql,
static const char *const sq_sql[SQ__COUNT] = {SQ_STATEMENTS(SQ_SQL)};
#undef SQ_SQL

/* The backend's state: its connection to the database, and the statements prepared on it. */
struct sqstore {
  sqlite3 *db;
  sqlite3_stmt *st[SQ__COUNT]; /* NULL until first used */
};

static void open_error(char *err, size_t errlen, const char *path, const char *what) {
  if (err && errlen) snprintf(err, errlen, "%s: %s", path, what);
}

/* Opens (creating when missing) the database at path. */
static int open_path(const char *path, void **out, char *err, size_t errlen) {
  struct sqstore *js = calloc(1, sizeof(*js));
  if (!js) return -ENOMEM;
  int rc = sqlite3_open_v2(path, &js->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_busy_timeout(js->db, 5000);
  if (rc == SQLITE_OK) rc = sqlite3_exec(js->db, schema, NULL, NULL, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_exec(js->db, add_turn, NULL, NULL, NULL);
    sqlite3_exec(js->db, add_stop, NULL, NULL, NULL);
    sqlite3_exec(js->db, add_read, NULL, NULL, NULL);
    rc = sqlite3_exec(js->db, "CREATE INDEX IF NOT EXISTS jobs_by_turn ON jobs(turn);", NULL, NULL, NULL);
  }
  if (rc != SQLITE_OK) {
    open_error(err, errlen, path, js->db ? sqlite3_errmsg(js->db) : sqlite3_errstr(rc));
    sqlite3_close(js->db);
    free(js);
    return rc == SQLITE_NOMEM ? -ENOMEM : -EIO;
  }
  *out = js;
  return 0;
}

/* The database at VTS_STATE_DIR/jobs.db, the directory made when missing. */
static int sq_open(const struct vts_config *cfg, int timeout_ms, void **self, char *err, size_t errlen) {
  (void)timeout_ms; /* a local file: SQLite's busy timeout bounds each call */
  char path[CONFIG_STR_MAX + 16];
  snprintf(path, sizeof(path), "%s/jobs.db", cfg->state_dir);
  int rv = util_make_dirs(cfg->state_dir);
  if (rv != 0) {
    snprintf(err, errlen, "%s: %s", cfg->state_dir, strerror(-rv));
    return rv;
  }
  return open_path(path, self, err, errlen);
}

/* The embedded store serves when no other backend is configured. */
static int sq_selected(const struct vts_config *cfg) {
  (void)cfg;
  return 1;
}

static void sq_close(void *self) {
  struct sqstore *js = self;
  for (size_t i = 0; i < SQ__COUNT; i++) sqlite3_finalize(js->st[i]);
  sqlite3_close(js->db);
  free(js);
}

/*
 * A statement done with: reset, so that it holds no read or write of the database open, and its bindings cleared, so
 * that it keeps no pointer to the caller's strings. NULL is nothing.
 */
static void release(sqlite3_stmt *st) {
  if (st == NULL) return;
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
}

/*
 * Statement id, prepared on its first use and kept, with its parameters bound from a format: 's' text, 'i' int64, 'b'
 * blob (pointer, length). Bound without copies: the values must live until the statement is released. NULL when it
 * cannot be prepared or bound (a statement that could not be prepared is tried again at its next use).
 */
static sqlite3_stmt *prepare(struct sqstore *js, enum sq_stmt id, const char *types, ...) {
  if (js->st[id] == NULL &&
      sqlite3_prepare_v3(js->db, sq_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &js->st[id], NULL) != SQLITE_OK) {
    sqlite3_finalize(js->st[id]);
    js->st[id] = NULL;
    return NULL;
  }
  sqlite3_stmt *st = js->st[id];
  va_list ap;
  va_start(ap, types);
  int rc = SQLITE_OK;
  for (int i = 0; types[i] != '\0' && rc == SQLITE_OK; i++) {
    if (types[i] == 's') {
      rc = sqlite3_bind_text(st, i + 1, va_arg(ap, const char *), -1, SQLITE_STATIC);
    } else if (types[i] == 'i') {
      rc = sqlite3_bind_int64(st, i + 1, va_arg(ap, int64_t));
    } else {
      const void *p = va_arg(ap, const void *);
      size_t n = va_arg(ap, size_t);
      rc = sqlite3_bind_blob64(st, i + 1, p, n, SQLITE_STATIC);
    }
  }
  va_end(ap);
  if (rc != SQLITE_OK) {
    release(st);
    return NULL;
  }
  return st;
}

/* Runs a statement that returns no rows. Returns the number of rows changed, or -EIO. */
static int run(struct sqstore *js, sqlite3_stmt *st) {
  if (!st) return -EIO;
  int rc = sqlite3_step(st);
  release(st);
  return rc == SQLITE_DONE ? sqlite3_changes(js->db) : -EIO;
}

/* A statement without parameters or rows (a transaction's begin or end): 0 or -EIO. */
static int exec(struct sqstore *js, enum sq_stmt id) {
  int rv = run(js, prepare(js, id, ""));
  return rv < 0 ? rv : 0;
}

/* Ends a transaction: commits when rv >= 0, rolls back otherwise; a failed commit is -EIO. */
static int finish(struct sqstore *js, int rv) {
  if (rv >= 0) {
    if (exec(js, SQ_TX_COMMIT) == 0) return rv;
    rv = -EIO;
  }
  exec(js, SQ_TX_ROLLBACK);
  return rv;
}

/*
 * The keys a take passes over as a JSON array of strings (read by json_each), in out (malloc'd, the caller frees).
 * Key names are [A-Za-z0-9_.-]: nothing to escape. NULL for no memory.
 */
static char *skip_json(const struct jobstore_skip *skip) {
  size_t n = skip != NULL ? skip->n : 0, len = 3;
  for (size_t i = 0; i < n; i++) len += strlen(skip->keys[i]) + 3;
  char *out = malloc(len);
  if (out == NULL) return NULL;
  size_t at = 0;
  out[at++] = '[';
  for (size_t i = 0; i < n; i++)
    at += (size_t)snprintf(out + at, len - at, "%s\"%s\"", i > 0 ? "," : "", skip->keys[i]);
  out[at++] = ']';
  out[at] = '\0';
  return out;
}

/* BEGIN IMMEDIATE of a take, with its skip list as JSON in *passed (the caller frees). Returns 0, -ENOMEM or -EIO. */
static int begin_take(struct sqstore *js, const struct jobstore_skip *skip, char **passed) {
  *passed = skip_json(skip);
  if (*passed == NULL) return -ENOMEM;
  if (exec(js, SQ_TX_IMMEDIATE) == 0) return 0;
  free(*passed);
  *passed = NULL;
  return -EIO;
}

static void copy_column(sqlite3_stmt *st, int col, char *out, size_t outlen) {
  const unsigned char *s = sqlite3_column_text(st, col);
  snprintf(out, outlen, "%s", s ? (const char *)s : "");
}

/* The first row of a query: 0 (it is there to read), -EAGAIN (none), or -EIO (no statement, or the step failed). */
static int first_row(sqlite3_stmt *st) {
  if (st == NULL) return -EIO;
  int rc = sqlite3_step(st);
  return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? -EAGAIN : -EIO;
}

/*
 * A fair take (an item, a page, a webhook try): whether anything may be due ("i": now; a read that asks less than the
 * query), its query ("is": now, the keys it passes over as JSON), the reader of
 * its first row into the take's out, and the hold on the row taken (the lease, its try counted): lease ("is": the
 * lease's end, the job id at job_id_at in out), or hold where it takes more (returns a count of changes or -errno).
 */
struct take {
  size_t out_size;
  enum sq_stmt due;
  enum sq_stmt query;
  void (*read)(sqlite3_stmt *st, void *out);
  enum sq_stmt lease;
  size_t job_id_at;
  int (*hold)(struct sqstore *js, const void *out, int64_t now_ms, int64_t lease_ms);
};

/*
 * The one shape of the takes: t's due asked (nothing due: -EAGAIN, no write lock taken), then BEGIN IMMEDIATE, the
 * first row of t's query read into out (zeroed first), held, committed. Returns 0, -EAGAIN (nothing due), -ENOMEM or
 * -EIO.
 */
static int fair_take(struct sqstore *js, const struct take *t, int64_t now_ms, int64_t lease_ms,
                     const struct jobstore_skip *skip, void *out) {
  memset(out, 0, t->out_size);
  /* Asked first without a write lock: the poll of an idle store ends here, with one read of an index. */
  sqlite3_stmt *due = prepare(js, t->due, "i", now_ms);
  int rv = first_row(due);
  release(due);
  if (rv != 0) return rv;
  char *passed;
  rv = begin_take(js, skip, &passed);
  if (rv != 0) return rv;
  sqlite3_stmt *st = prepare(js, t->query, "is", now_ms, passed);
  rv = first_row(st);
  if (rv == 0) t->read(st, out);
  release(st);
  free(passed);
  if (rv == 0)
    rv = t->hold != NULL ? t->hold(js, out, now_ms, lease_ms)
                         : run(js, prepare(js, t->lease, "is", now_ms + lease_ms, (const char *)out + t->job_id_at));
  rv = finish(js, rv);
  return rv < 0 ? rv : 0;
}

static int sq_open_jobs(void *self, const char *key_id, size_t *n);
static int sq_stored_items(void *self, const char *key_id, size_t *n);

static int sq_create(void *self, const struct jobstore_spec *spec, const char (*video_ids)[VTS_VIDEO_ID_LEN + 1],
                     size_t n, int64_t now_ms, const char *id_out) {
  struct sqstore *js = self;
  int more = spec->continuation != NULL && spec->continuation[0] != '\0';
  if (exec(js, SQ_TX_IMMEDIATE) != 0) return -EIO;
  int rv = 0;
  if (spec->max_open > 0) {
    size_t open = 0;
    rv = sq_open_jobs(js, spec->key_id, &open);
    if (rv == 0 && open >= spec->max_open) rv = -EDQUOT;
  }
  if (rv >= 0 && spec->max_stored > 0) {
    size_t stored = 0;
    rv = sq_stored_items(js, spec->key_id, &stored);
    if (rv == 0 && stored + n > spec->max_stored) rv = -ENOSPC;
  }
  if (rv >= 0)
    rv = run(js,
             prepare(js, SQ_JOB_INSERT, "ssiiissssss", id_out, spec->key_id, now_ms, now_ms, (int64_t)n, spec->language,
                     spec->translate, spec->format, spec->webhook_url, spec->webhook_secret, spec->source));
  sqlite3_stmt *st = rv >= 0 ? prepare(js, SQ_ITEM_INSERT, "s", id_out) : NULL;
  if (rv >= 0 && !st) rv = -EIO;
  for (size_t i = 0; rv >= 0 && i < n; i++) {
    if (sqlite3_bind_int64(st, 2, (int64_t)i + 1) != SQLITE_OK ||
        sqlite3_bind_text(st, 3, video_ids[i], -1, SQLITE_STATIC) != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE)
      rv = -EIO;
    sqlite3_reset(st);
  }
  release(st);
  if (rv >= 0 && more)
    rv = run(js, prepare(js, SQ_PAGE_INSERT, "ssi", id_out, spec->continuation, (int64_t)spec->max_items));
  rv = finish(js, rv);
  return rv < 0 ? rv : 0;
}

static int sq_get(void *self, const char *key_id, const char *job_id, struct jobstore_job *out) {
  struct sqstore *js = self;
  memset(out, 0, sizeof(*out));
  sqlite3_stmt *st = prepare(js, SQ_JOB_GET, "ss", job_id, key_id);
  if (!st) return -EIO;
  int rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    release(st);
    return rc == SQLITE_DONE ? -ENOENT : -EIO;
  }
  int cancelled = sqlite3_column_int(st, 0);
  snprintf(out->id, sizeof(out->id), "%s", job_id);
  out->created_ms = sqlite3_column_int64(st, 1);
  out->updated_ms = sqlite3_column_int64(st, 2);
  out->total = (size_t)sqlite3_column_int64(st, 3);
  copy_column(st, 4, out->language, sizeof(out->language));
  copy_column(st, 5, out->translate, sizeof(out->translate));
  copy_column(st, 6, out->format, sizeof(out->format));
  copy_column(st, 7, out->webhook_url, sizeof(out->webhook_url));
  copy_column(st, 8, out->webhook_secret, sizeof(out->webhook_secret));
  copy_column(st, 9, out->stop_reason, sizeof(out->stop_reason));
  release(st);
  st = prepare(js, SQ_JOB_COUNTS, "s", job_id);
  if (!st) return -EIO;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    int s = sqlite3_column_int(st, 0);
    if (s >= 0 && s < ITEM__COUNT) out->counts[s] = (size_t)sqlite3_column_int64(st, 1);
  }
  release(st);
  if (rc != SQLITE_DONE) return -EIO;
  st = prepare(js, SQ_JOB_HAS_PAGE, "s", job_id);
  if (!st) return -EIO;
  rc = sqlite3_step(st);
  release(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return -EIO;
  out->more = rc == SQLITE_ROW;
  out->status = jobstore_job_status(out, cancelled);
  return 0;
}

/* Whether job_id is key_id's: 0, -ENOENT or -EIO. */
static int owned(struct sqstore *js, const char *key_id, const char *job_id) {
  sqlite3_stmt *st = prepare(js, SQ_JOB_OWNED, "ss", job_id, key_id);
  if (!st) return -EIO;
  int rc = sqlite3_step(st);
  release(st);
  return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? -ENOENT : -EIO;
}

static int item_row(sqlite3_stmt *st, jobstore_item_fn fn, void *ctx) {
  struct jobstore_item it = {.seq = sqlite3_column_int64(st, 0)};
  copy_column(st, 1, it.video_id, sizeof(it.video_id));
  int s = sqlite3_column_int(st, 2);
  it.status = s >= 0 && s < ITEM__COUNT ? (enum jobstore_item_status)s : ITEM_FAILED;
  it.error_code = (const char *)sqlite3_column_text(st, 3);
  it.error_message = (const char *)sqlite3_column_text(st, 4);
  char *plain = NULL;
  if (it.status == ITEM_DONE) {
    int rv = jobstore_inflate(sqlite3_column_blob(st, 5), (size_t)sqlite3_column_bytes(st, 5),
                              sqlite3_column_int64(st, 6), &plain);
    if (rv != 0) return rv;
    it.body = plain;
    it.body_len = (size_t)sqlite3_column_int64(st, 6);
  }
  int rv = fn(ctx, &it);
  free(plain);
  return rv;
}

static int sq_items(void *self, const char *key_id, const char *job_id, int64_t after, size_t limit,
                    jobstore_item_fn fn, void *ctx, int64_t *next) {
  struct sqstore *js = self;
  *next = 0;
  /* One read transaction: the page and the question whether more follow see the same state. */
  if (exec(js, SQ_TX_BEGIN) != 0) return -EIO;
  int rv = owned(js, key_id, job_id);
  sqlite3_stmt *st = NULL;
  if (rv == 0) {
    st = prepare(js, SQ_ITEMS_PAGE, "sii", job_id, after, (int64_t)limit + 1);
    if (!st) rv = -EIO;
  }
  size_t seen = 0;
  int64_t last = after;
  int rc = SQLITE_DONE;
  while (rv == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (seen == limit) {
      *next = last; /* a row past the page: more follow */
      break;
    }
    int64_t seq = sqlite3_column_int64(st, 0);
    rv = item_row(st, fn, ctx);
    if (rv == JOBSTORE_PAGE_FULL) {
      *next = last; /* the page ends before this item, which the next page begins with */
      rv = 0;
      break;
    }
    last = seq;
    seen++;
  }
  if (rv == 0 && rc != SQLITE_ROW && rc != SQLITE_DONE) rv = -EIO;
  release(st);
  exec(js, SQ_TX_COMMIT);
  return rv;
}

static int sq_cancel(void *self, const char *key_id, const char *job_id, int64_t now_ms, size_t *n) {
  struct sqstore *js = self;
  *n = 0;
  if (exec(js, SQ_TX_IMMEDIATE) != 0) return -EIO;
  int rv = owned(js, key_id, job_id);
  /* An ended job (nothing queued or running, no page of its list to read) is left as it is. */
  if (rv == 0) {
    sqlite3_stmt *st = prepare(js, SQ_JOB_IS_OPEN, "s", job_id);
    int rc = st != NULL ? sqlite3_step(st) : SQLITE_ERROR;
    release(st);
    if (rc == SQLITE_DONE) return finish(js, 0);
    if (rc != SQLITE_ROW) rv = -EIO;
  }
  if (rv == 0) rv = run(js, prepare(js, SQ_JOB_CANCEL_ITEMS, "s", job_id));
  if (rv >= 0) *n = (size_t)rv;
  if (rv >= 0 && run(js, prepare(js, SQ_PAGE_DELETE, "s", job_id)) < 0) rv = -EIO;
  if (rv >= 0 && run(js, prepare(js, SQ_JOB_CANCEL, "is", now_ms, job_id)) < 0) rv = -EIO;
  rv = finish(js, rv);
  return rv < 0 ? rv : 0;
}

static int sq_open_jobs(void *self, const char *key_id, size_t *n) {
  struct sqstore *js = self;
  sqlite3_stmt *st = prepare(js, SQ_KEY_OPEN_JOBS, "s", key_id);
  if (!st) return -EIO;
  int rc = sqlite3_step(st);
  *n = rc == SQLITE_ROW ? (size_t)sqlite3_column_int64(st, 0) : 0;
  release(st);
  return rc == SQLITE_ROW ? 0 : -EIO;
}

/* A job's total is its items (a list's grows as pages add them), so the key's jobs sum them through jobs_by_key. */
static int sq_stored_items(void *self, const char *key_id, size_t *n) {
  struct sqstore *js = self;
  sqlite3_stmt *st = prepare(js, SQ_KEY_STORED_ITEMS, "s", key_id);
  int rv = first_row(st);
  *n = rv == 0 ? (size_t)sqlite3_column_int64(st, 0) : 0;
  release(st);
  return rv == 0 ? 0 : -EIO;
}

static void read_item(sqlite3_stmt *st, void *row) {
  struct jobstore_task *out = row;
  copy_column(st, 0, out->job_id, sizeof(out->job_id));
  out->seq = sqlite3_column_int64(st, 1);
  copy_column(st, 2, out->video_id, sizeof(out->video_id));
  out->tries = sqlite3_column_int(st, 3);
  copy_column(st, 4, out->key_id, sizeof(out->key_id));
  copy_column(st, 5, out->language, sizeof(out->language));
  copy_column(st, 6, out->translate, sizeof(out->translate));
  copy_column(st, 7, out->format, sizeof(out->format));
  out->created_ms = sqlite3_column_int64(st, 8);
}

/* The item leased and its try counted; its job goes to the back of the turns. */
static int hold_item(struct sqstore *js, const void *row, int64_t now_ms, int64_t lease_ms) {
  const struct jobstore_task *out = row;
  int rv = run(js, prepare(js, SQ_ITEM_LEASE, "isi", now_ms + lease_ms, out->job_id, out->seq));
  if (rv >= 0) rv = run(js, prepare(js, SQ_JOB_TURN, "is", now_ms, out->job_id));
  return rv;
}

/* Whose turn: the job with an item due and the smallest turn; its first item due in its order. */
static const struct take item_take = {.out_size = sizeof(struct jobstore_task),
                                      .due = SQ_ITEM_DUE,
                                      .query = SQ_ITEM_TAKE,
                                      .read = read_item,
                                      .hold = hold_item};

static int sq_take(void *self, int64_t now_ms, int64_t lease_ms, const struct jobstore_skip *skip,
                   struct jobstore_task *out) {
  return fair_take(self, &item_take, now_ms, lease_ms, skip, out);
}

/* Changes a running item with the statement st (its last two parameters are job_id and seq), and the job's time. */
static int end_running(struct sqstore *js, sqlite3_stmt *st, const char *job_id, int64_t now_ms) {
  if (!st) {
    exec(js, SQ_TX_ROLLBACK);
    return -EIO;
  }
  int rv = run(js, st);
  if (rv == 0) rv = -ENOENT;
  if (rv > 0) rv = run(js, prepare(js, SQ_JOB_TOUCH, "is", now_ms, job_id));
  rv = finish(js, rv);
  return rv < 0 ? rv : 0;
}

static int sq_done(void *self, const char *job_id, int64_t seq, const void *z, size_t zlen, size_t len,
                   const struct jobstore_charge *charge, int64_t now_ms) {
  struct sqstore *js = self;
  if (charge != NULL) return -ENOTSUP;
  if (exec(js, SQ_TX_IMMEDIATE) != 0) return -EIO;
  return end_running(js, prepare(js, SQ_ITEM_DONE, "bisi", z, zlen, (int64_t)len, job_id, seq), job_id, now_ms);
}

static int sq_fail(void *self, const char *job_id, int64_t seq, const char *code, const char *message, int64_t now_ms) {
  struct sqstore *js = self;
  if (exec(js, SQ_TX_IMMEDIATE) != 0) return -EIO;
  return end_running(js, prepare(js, SQ_ITEM_FAIL, "sssi", code, message, job_id, seq), job_id, now_ms);
}

static int sq_retry(void *self, const char *job_id, int64_t seq, int64_t not_before_ms, int64_t now_ms) {
  struct sqstore *js = self;
  if (exec(js, SQ_TX_IMMEDIATE) != 0) return -EIO;
  return end_running(js, prepare(js, SQ_ITEM_RETRY, "isi", not_before_ms, job_id, seq), job_id, now_ms);
}

static int sq_recover(void *self, int64_t now_ms) {
  struct sqstore *js = self;
  if (run(js, prepare(js, SQ_PAGES_RECOVER, "i", now_ms)) < 0) return -EIO;
  return run(js, prepare(js, SQ_ITEMS_RECOVER, "i", now_ms));
}

static int sq_expire(void *self, int64_t now_ms, int64_t ttl_ms) {
  struct sqstore *js = self;
  if (exec(js, SQ_TX_IMMEDIATE) != 0) return -EIO;
  int64_t before = now_ms - ttl_ms;
  char job[JOBSTORE_ID_LEN + 1] = "";
  sqlite3_stmt *st = prepare(js, SQ_EXPIRE_FIND, "i", before);
  int rv = first_row(st);
  if (rv == 0) copy_column(st, 0, job, sizeof(job));
  release(st);
  if (rv == -EAGAIN) rv = 0;
  int deleted = 0;
  if (rv == 0 && job[0] != '\0') {
    rv = run(js, prepare(js, SQ_EXPIRE_ITEMS, "si", job, (int64_t)JOBSTORE_EXPIRE_BATCH));
    deleted = rv >= 0 ? rv : 0;
    /* The job's last items went: the job and its delivery go too. */
    if (rv >= 0 && deleted < JOBSTORE_EXPIRE_BATCH) {
      rv = run(js, prepare(js, SQ_JOB_DELETE, "s", job));
      if (rv >= 0) rv = run(js, prepare(js, SQ_HOOK_DELETE, "s", job));
      deleted++;
    }
  }
  rv = finish(js, rv);
  return rv < 0 ? rv : deleted > 0;
}

static int sq_hook_owed(void *self, char job_id[JOBSTORE_ID_LEN + 1], char key_id[JOBSTORE_KEY_ID_MAX + 1]) {
  struct sqstore *js = self;
  sqlite3_stmt *st = prepare(js, SQ_HOOK_OWED, "");
  if (st == NULL) return -EIO;
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    copy_column(st, 0, job_id, JOBSTORE_ID_LEN + 1);
    copy_column(st, 1, key_id, JOBSTORE_KEY_ID_MAX + 1);
  }
  release(st);
  return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? -EAGAIN : -EIO;
}

static int sq_hook_add(void *self, const char *job_id, const char *body, size_t len, int64_t now_ms) {
  struct sqstore *js = self;
  if (len > VTS_WEBHOOK_MAX_PAYLOAD_BYTES) return -EINVAL;
  int rv = run(js, prepare(js, SQ_HOOK_ADD, "siib", job_id, now_ms, now_ms, (const void *)body, len));
  return rv < 0 ? rv : 0;
}

static void read_hook(sqlite3_stmt *st, void *row) {
  struct jobstore_hook *out = row;
  copy_column(st, 0, out->job_id, sizeof(out->job_id));
  out->attempt = sqlite3_column_int(st, 1) + 1;
  out->made_ms = sqlite3_column_int64(st, 2);
  size_t n = (size_t)sqlite3_column_bytes(st, 3);
  if (n > VTS_WEBHOOK_MAX_PAYLOAD_BYTES) n = VTS_WEBHOOK_MAX_PAYLOAD_BYTES;
  if (n > 0) memcpy(out->body, sqlite3_column_blob(st, 3), n);
  out->body_len = n;
  copy_column(st, 4, out->url, sizeof(out->url));
  copy_column(st, 5, out->secret, sizeof(out->secret));
  copy_column(st, 6, out->key_id, sizeof(out->key_id));
}

/* hook_take and page_take are rows of the takes' table: alike in shape, each its own query and lease. */
static const struct take hook_take = {.out_size = sizeof(struct jobstore_hook),
                                      .due = SQ_HOOK_DUE,
                                      .query = SQ_HOOK_TAKE,
                                      .read = read_hook,
                                      .lease = SQ_HOOK_LEASE,
                                      .job_id_at = offsetof(struct jobstore_hook, job_id)};

static int sq_hook_take(void *self, int64_t now_ms, int64_t lease_ms, const struct jobstore_skip *skip,
                        struct jobstore_hook *out) {
  return fair_take(self, &hook_take, now_ms, lease_ms, skip, out);
}

static int sq_hook_end(void *self, const char *job_id, enum jobstore_hook_state state, int64_t next_ms,
                       int http_status) {
  struct sqstore *js = self;
  int rv = run(js, prepare(js, SQ_HOOK_END, "iiis", (int64_t)state, next_ms, (int64_t)http_status, job_id));
  return rv < 0 ? rv : rv == 0 ? -ENOENT : 0;
}

static void read_page(sqlite3_stmt *st, void *row) {
  struct jobstore_page *out = row;
  copy_column(st, 0, out->job_id, sizeof(out->job_id));
  copy_column(st, 1, out->token, sizeof(out->token));
  out->tries = sqlite3_column_int(st, 2);
  copy_column(st, 3, out->key_id, sizeof(out->key_id));
  out->created_ms = sqlite3_column_int64(st, 4);
  out->read = sqlite3_column_int64(st, 5);
}

static const struct take page_take = {.out_size = sizeof(struct jobstore_page),
                                      .due = SQ_PAGE_DUE,
                                      .query = SQ_PAGE_TAKE,
                                      .read = read_page,
                                      .lease = SQ_PAGE_LEASE,
                                      .job_id_at = offsetof(struct jobstore_page, job_id)};

static int sq_take_page(void *self, int64_t now_ms, int64_t lease_ms, const struct jobstore_skip *skip,
                        struct jobstore_page *out) {
  /* Asked before every item a runner starts: with no page due, no write lock is taken (page_take's due). */
  return fair_take(self, &page_take, now_ms, lease_ms, skip, out);
}

static int id_cmp(const void *a, const void *b) { return memcmp(a, b, VTS_VIDEO_ID_LEN + 1); }

/*
 * The ids a job holds, sorted (for folding a page's duplicates), its highest position, and its total. Returns 0,
 * -ENOMEM or -EIO; *ids is the caller's to free.
 */
static int job_ids(struct sqstore *js, const char *job_id, char (**ids)[VTS_VIDEO_ID_LEN + 1], size_t *n,
                   int64_t *last_seq) {
  *ids = NULL;
  *n = 0;
  *last_seq = 0;
  sqlite3_stmt *st = prepare(js, SQ_JOB_IDS, "s", job_id);
  if (!st) return -EIO;
  size_t cap = 0;
  int rc, rv = 0;
  while (rv == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (*n == cap) {
      cap = cap ? cap * 2 : 256;
      void *grown = realloc(*ids, cap * sizeof(**ids));
      if (!grown) {
        rv = -ENOMEM;
        break;
      }
      *ids = grown;
    }
    memset((*ids)[*n], 0, sizeof((*ids)[*n]));
    const unsigned char *id = sqlite3_column_text(st, 0);
    if (id) memcpy((*ids)[*n], id, strnlen((const char *)id, VTS_VIDEO_ID_LEN));
    int64_t seq = sqlite3_column_int64(st, 1);
    if (seq > *last_seq) *last_seq = seq;
    (*n)++;
  }
  if (rv == 0 && rc != SQLITE_DONE) rv = -EIO;
  release(st);
  if (rv == 0 && *n > 1) qsort(*ids, *n, sizeof(**ids), id_cmp);
  return rv;
}

static int sq_page_done(void *self, const char *job_id, const char (*ids)[VTS_VIDEO_ID_LEN + 1], size_t n,
                        const char *next, int64_t read, int64_t max_pages, const char *why, int64_t now_ms,
                        size_t *added) {
  struct sqstore *js = self;
  *added = 0;
  if (exec(js, SQ_TX_IMMEDIATE) != 0) return -EIO;
  sqlite3_stmt *st = prepare(js, SQ_PAGE_MAX_ITEMS, "s", job_id);
  int rv = st ? 0 : -EIO;
  int64_t max_items = 0;
  if (rv == 0) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
      max_items = sqlite3_column_int64(st, 0);
    else
      rv = rc == SQLITE_DONE ? -ENOENT : -EIO;
  }
  release(st);
  char(*held)[VTS_VIDEO_ID_LEN + 1] = NULL;
  size_t nheld = 0;
  int64_t seq = 0;
  if (rv == 0) rv = job_ids(js, job_id, &held, &nheld, &seq);
  /* The page's own ids, with those seen before in it: one page may repeat an id too. */
  char(*seen)[VTS_VIDEO_ID_LEN + 1] = rv == 0 ? calloc(n + 1, sizeof(*seen)) : NULL;
  if (rv == 0 && !seen) rv = -ENOMEM;
  int64_t total = (int64_t)nheld;
  size_t nseen = 0;
  st = rv == 0 ? prepare(js, SQ_ITEM_INSERT, "s", job_id) : NULL;
  if (rv == 0 && !st) rv = -EIO;
  for (size_t i = 0; rv == 0 && i < n && total < max_items; i++) {
    char id[VTS_VIDEO_ID_LEN + 1] = {0};
    memcpy(id, ids[i], VTS_VIDEO_ID_LEN);
    if ((nheld > 0 && bsearch(id, held, nheld, sizeof(*held), id_cmp) != NULL)) continue;
    int dup = 0;
    for (size_t k = 0; k < nseen && !dup; k++) dup = memcmp(seen[k], id, VTS_VIDEO_ID_LEN) == 0;
    if (dup) continue;
    memcpy(seen[nseen++], id, sizeof(id));
    if (sqlite3_bind_int64(st, 2, ++seq) != SQLITE_OK ||
        sqlite3_bind_text(st, 3, id, -1, SQLITE_TRANSIENT) != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE)
      rv = -EIO;
    sqlite3_reset(st);
    total++;
    (*added)++;
  }
  release(st);
  free(held);
  free(seen);
  if (rv == 0) rv = run(js, prepare(js, SQ_JOB_TOTAL, "iis", total, now_ms, job_id));
  if (rv >= 0) {
    int named = next != NULL && next[0] != '\0' && total<max_items, bounded = max_pages> 0;
    const char *stop = named && bounded && *added == 0         ? JOBSTORE_STOP_NO_NEW_IDS
                       : named && bounded && read >= max_pages ? JOBSTORE_STOP_MAX_PAGES
                       : !named && why != NULL                 ? why
                                                               : NULL;
    rv = !named || stop != NULL ? run(js, prepare(js, SQ_PAGE_DELETE, "s", job_id))
                                : run(js, prepare(js, SQ_PAGE_NEXT, "sis", next, read, job_id));
    if (rv >= 0 && stop != NULL) rv = run(js, prepare(js, SQ_JOB_STOP_REASON, "ss", stop, job_id));
  }
  if (rv < 0) *added = 0;
  rv = finish(js, rv);
  return rv < 0 ? rv : 0;
}

static int sq_page_retry(void *self, const char *job_id, int64_t not_before_ms, int64_t now_ms) {
  struct sqstore *js = self;
  if (exec(js, SQ_TX_IMMEDIATE) != 0) return -EIO;
  int rv = run(js, prepare(js, SQ_PAGE_BACK, "is", not_before_ms, job_id));
  if (rv == 0) rv = -ENOENT;
  if (rv > 0) rv = run(js, prepare(js, SQ_JOB_TOUCH, "is", now_ms, job_id));
  rv = finish(js, rv);
  return rv < 0 ? rv : 0;
}

static int sq_stop_key(void *self, const char *key_id, const char *why, int64_t now_ms) {
  struct sqstore *js = self;
  if (exec(js, SQ_TX_IMMEDIATE) != 0) return -EIO;
  /* The jobs first marked, then their queued items and lists ended by that mark, in one transaction. */
  int rv = run(js, prepare(js, SQ_KEY_STOP_JOBS, "sis", why, now_ms, key_id));
  int stopped = rv;
  if (rv >= 0) rv = run(js, prepare(js, SQ_KEY_STOP_ITEMS, "ss", key_id, why));
  if (rv >= 0) rv = run(js, prepare(js, SQ_KEY_STOP_PAGES, "s", key_id));
  if (rv >= 0) rv = run(js, prepare(js, SQ_KEY_STOP_HOOKS, "s", key_id));
  /* A delivery not recorded yet (owed, or to be owed when a running item ends) is recorded given up. */
  if (rv >= 0) rv = run(js, prepare(js, SQ_KEY_GIVE_UP_HOOKS, "is", now_ms, key_id));
  rv = finish(js, rv);
  return rv < 0 ? rv : stopped;
}

const struct jobstore_ops jobstore_sqlite_ops = {
    .version = JOBSTORE_OPS_VERSION,
    .name = "sqlite",
    .selected = sq_selected,
    .open = sq_open,
    .close = sq_close,
    .create = sq_create,
    .get = sq_get,
    .items = sq_items,
    .cancel = sq_cancel,
    .open_jobs = sq_open_jobs,
    .stored_items = sq_stored_items,
    .take = sq_take,
    .done = sq_done,
    .fail = sq_fail,
    .retry = sq_retry,
    .recover = sq_recover,
    .expire = sq_expire,
    .hook_owed = sq_hook_owed,
    .hook_add = sq_hook_add,
    .hook_take = sq_hook_take,
    .hook_end = sq_hook_end,
    .take_page = sq_take_page,
    .stop_key = sq_stop_key,
    .page_done = sq_page_done,
    .page_retry = sq_page_retry,
};
