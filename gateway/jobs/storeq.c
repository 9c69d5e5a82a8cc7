/*
 * The job store's thread and its queue of calls (see storeq.h). Two lists under one mutex: the calls to run, which
 * the thread waits for on a condition, and the calls it has run, which the loop drains when the thread wakes it with
 * uv_async_send (libuv coalesces wake-ups, so the loop takes one call at a time until the list is empty). The depth
 * is counted on the loop alone: up when a call is made, down when its done has run.
 */
#include "gateway/jobs/storeq.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

struct call {
  struct call *next;
  storeq_work_fn work;
  storeq_done_fn done;
  void *arg;
};

struct storeq {
  uv_async_t async; /* its data is the queue; freed in its close callback */
  pthread_t thread;
  pthread_mutex_t lock; /* guards what follows up to the loop's own fields */
  pthread_cond_t wake;  /* a call queued, the store opened, or stopping */
  struct call *todo_head, *todo_tail;
  struct call *done_head, *done_tail;
  bool stopping; /* the thread ends once todo is empty */
  bool opened;   /* the thread's open has returned: open_rv says how */
  int open_rv;
  char open_err[256];
  struct jobstore *js; /* the thread's alone once opened */
  struct vts_config cfg;
  int timeout_ms;
  /* The loop's alone. */
  bool closing;
  size_t depth;
};

static void push(struct call **head, struct call **tail, struct call *c) {
  c->next = NULL;
  if (*tail != NULL)
    (*tail)->next = c;
  else
    *head = c;
  *tail = c;
}

static struct call *pop(struct call **head, struct call **tail) {
  struct call *c = *head;
  if (c == NULL) return NULL;
  *head = c->next;
  if (*head == NULL) *tail = NULL;
  return c;
}

/* The store's thread: opens the store, then runs calls until told to stop with none left. */
static void *run(void *arg) {
  struct storeq *q = arg;
  /* Named apart from its process's loop: the store's own CPU time shows in top -H and /proc/<pid>/task. */
  prctl(PR_SET_NAME, "vts-jobstore");
  struct jobstore *js = NULL;
  char err[sizeof(q->open_err)] = "";
  int rv = jobstore_open_config(&q->cfg, q->timeout_ms, &js, err, sizeof(err));
  pthread_mutex_lock(&q->lock);
  q->opened = true;
  q->open_rv = rv;
  q->js = js;
  memcpy(q->open_err, err, sizeof(err));
  pthread_cond_broadcast(&q->wake);
  if (rv != 0) {
    pthread_mutex_unlock(&q->lock);
    return NULL;
  }
  for (;;) {
    while (q->todo_head == NULL && !q->stopping) pthread_cond_wait(&q->wake, &q->lock);
    struct call *c = pop(&q->todo_head, &q->todo_tail);
    if (c == NULL) break;
    pthread_mutex_unlock(&q->lock);
    c->work(js, c->arg);
    pthread_mutex_lock(&q->lock);
    push(&q->done_head, &q->done_tail, c);
    /* Sent under the lock: storeq_close cannot close the handle between the push and the send. */
    uv_async_send(&q->async);
  }
  pthread_mutex_unlock(&q->lock);
  jobstore_close(js);
  return NULL;
}

/* The loop: runs the done of every call the thread has answered, in order. */
static void drain(struct storeq *q) {
  for (;;) {
    pthread_mutex_lock(&q->lock);
    struct call *c = pop(&q->done_head, &q->done_tail);
    pthread_mutex_unlock(&q->lock);
    if (c == NULL) return;
    q->depth--;
    if (c->done != NULL) c->done(c->arg);
    free(c);
  }
}

static void async_cb(uv_async_t *handle) { drain(handle->data); }

static void free_cb(uv_handle_t *handle) {
  struct storeq *q = handle->data;
  pthread_cond_destroy(&q->wake);
  pthread_mutex_destroy(&q->lock);
  free(q);
}

int storeq_open(uv_loop_t *loop, const struct vts_config *cfg, int timeout_ms, struct storeq **out, char *err,
                size_t errlen) {
  struct storeq *q = calloc(1, sizeof(*q));
  if (q == NULL) return -ENOMEM;
  q->cfg = *cfg;
  q->timeout_ms = timeout_ms;
  q->async.data = q;
  pthread_mutex_init(&q->lock, NULL);
  pthread_cond_init(&q->wake, NULL);
  int rv = uv_async_init(loop, &q->async, async_cb);
  if (rv != 0) {
    snprintf(err, errlen, "job store queue: %s", uv_strerror(rv));
    pthread_cond_destroy(&q->wake);
    pthread_mutex_destroy(&q->lock);
    free(q);
    return rv;
  }
  /* Signals stay with the process's loops: the store's thread takes none. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  rv = -pthread_create(&q->thread, NULL, run, q);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rv != 0) {
    snprintf(err, errlen, "job store thread: %s", strerror(-rv));
    uv_close((uv_handle_t *)&q->async, free_cb);
    return rv;
  }
  pthread_mutex_lock(&q->lock);
  while (!q->opened) pthread_cond_wait(&q->wake, &q->lock);
  rv = q->open_rv;
  pthread_mutex_unlock(&q->lock);
  if (rv != 0) {
    snprintf(err, errlen, "%s", q->open_err);
    pthread_join(q->thread, NULL);
    uv_close((uv_handle_t *)&q->async, free_cb);
    return rv;
  }
  *out = q;
  return 0;
}

int storeq_call(struct storeq *q, storeq_work_fn work, storeq_done_fn done, void *arg) {
  if (q->closing) return -ESHUTDOWN;
  struct call *c = malloc(sizeof(*c));
  if (c == NULL) return -ENOMEM;
  c->work = work;
  c->done = done;
  c->arg = arg;
  q->depth++;
  pthread_mutex_lock(&q->lock);
  push(&q->todo_head, &q->todo_tail, c);
  pthread_cond_signal(&q->wake);
  pthread_mutex_unlock(&q->lock);
  return 0;
}

size_t storeq_depth(const struct storeq *q) { return q->depth; }

const struct jobstore *storeq_store(const struct storeq *q) { return q->js; }

void storeq_close(struct storeq *q) {
  if (q == NULL || q->closing) return;
  q->closing = true;
  pthread_mutex_lock(&q->lock);
  q->stopping = true;
  pthread_cond_signal(&q->wake);
  pthread_mutex_unlock(&q->lock);
  pthread_join(q->thread, NULL);
  drain(q);
  uv_close((uv_handle_t *)&q->async, free_cb);
}
