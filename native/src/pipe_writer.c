/*
 * A paced FIFO writer for Pipe mode: one thread per open FIFO that copies queued buffers into
 * the pipe with writev(2), and sleeps while the reader drains the pipe instead of waking on
 * every read the reader makes.
 *
 * Why. A writer that waits for the pipe to become writable (epoll EPOLLOUT, or a blocking
 * write) is woken by the kernel whenever a read frees a page of a FULL pipe: with a reader
 * that reads 32 KiB at a time (sha256sum, Python's default buffering) that is one wake-up, one
 * event-loop turn and one 32 KiB write per reader read, ~9,400 writes per 512 MiB measured
 * with libuv's stream writer. Here, after a write that filled the pipe, the thread sleeps for
 * the time the reader needs to drain it down to half (PW_LOW_FRACTION), from the drain
 * rate it measured (FIONREAD before and after each sleep), then writes the whole free room
 * in one call: about one wake-up per half of the pipe buffer, whatever the reader's read size.
 *
 * Rate control. rate = bytes drained / time slept. A sleep after which the pipe was EMPTY
 * may have starved the reader, so its rate is a lower bound: the estimate is doubled (the next
 * sleep halves). A sleep in which nothing drained means the reader paused (the training step
 * is busy): then the thread blocks in poll(POLLOUT) until the reader frees room (no CPU while
 * it waits), and measures the rate again with one short probe sleep (PW_PROBE_NS).
 *
 * Bytes. write(2) copies into the pipe's own pages, so a buffer may be reused as soon as its
 * bytes are reported written. Buffers are written in push order; the JS side keeps every
 * pushed buffer referenced until the written total passes its end, or until the writer
 * reports that it finished, and only then reuses it.
 * Why not vmsplice(2) (tried 2026-12-05, BENCHMARKS.md "t11-growth"): the pipe would hold
 * references to a receive slab's pages, and not only while the bytes sit in this pipe: a
 * reader that splices the FIFO onward (pv, tee, a socket) passes them on where FIONREAD cannot
 * see them, so a slab could only be refilled safely after dropping its pages (MADV_DONTNEED)
 * and faulting in new ones. Measured in the daemon (scripts/bulk-receive-bench.mjs --pipe-only
 * --pipe-warm, 4 runs of 3 rounds, variants alternated), that refault costs what the copy
 * saves: daemon CPU s/GB (new process / warm) 0.63-0.75 / 0.47-0.50 copying, 0.78-0.93 /
 * 0.50-0.75 splicing, 0.61-0.71 / 0.47-0.48 splicing with the dropped pages mapped again at
 * once on the writer's thread; the reader's CPU the same. Measured alone (a one-off probe, in
 * git history as scripts/pipe-splice.c; docs/decisions/0014-pipe-floor.md), splicing does win,
 * since its refills come at once, in pages just freed.
 *
 * Life. pipeWriterOpen(fd, pipeSize, onProgress) takes over `fd` (O_NONBLOCK, write end): the
 * thread closes it when it exits, after end() once the queue is written, at once after
 * cancel(), or on a write error (EPIPE: the reader left). onProgress(written, finished, errno)
 * runs on the JS thread whenever a pushed buffer completed, and once with finished = true.
 * The state is freed when both the thread and the JS handle (GC) let go of it; a handle
 * collected while the thread runs cancels it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <node_api.h>

#include "sluice_pipe_writer.h"

/* Buffers gathered into one writev: Pipe hands parts of 8 MiB, RecordIO adds a header and padding per record. */
#define PW_IOV_MAX 64
/*
 * Sleep until the pipe still holds half of its size: the reader has data for as long again
 * while we are scheduled, wake and write. Waking at a quarter starved a 30-100 MB/s reader
 * in about a third of the sleeps on a 2-core machine at load 20 (the thread's wake-up came
 * late), and the Pipe ran 0.7-0.8x the old writer's MB/s there.
 */
#define PW_LOW_FRACTION 2
/* Shortest paced sleep (20 us): below it the wake-up costs more than waiting for the pipe would. */
#define PW_MIN_SLEEP_NS 20000LL
/* Longest paced sleep (50 ms): a slow reader is re-measured at least this often. */
#define PW_MAX_SLEEP_NS 50000000LL
/* Probe sleep (1 ms) that measures the drain rate when none is known (start, after a pause). */
#define PW_PROBE_NS 1000000LL

typedef struct {
  const uint8_t *data;
  size_t len;
} pw_item;

/* Counters, for the logs and tests (how many calls and wake-ups a GB costs). */
enum { ST_WRITES, ST_FULL, ST_SLEEPS, ST_STARVED, ST_IDLE_WAITS, ST_COUNT };

typedef struct {
  int fd;
  int wake_fd; /* eventfd: cancel() wakes a sleeping or polling thread */
  size_t pipe_size;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* Ring of queued buffers; items[head] is partly written (head_done bytes). Under mu. */
  pw_item *items;
  size_t cap, head, count, head_done;
  double written; /* bytes written so far (under mu) */
  int closing, cancelled, finished, err; /* under mu */
  int notify_pending;                    /* a progress call is queued (under mu) */
  int js_refd;                           /* tsfn keeps the loop alive (JS thread only) */
  double stats[ST_COUNT];                /* under mu */
  napi_threadsafe_function tsfn;
  atomic_int owners; /* the thread and the JS handle */
} pw_t;

static void pw_drop(pw_t *w) {
  if (atomic_fetch_sub(&w->owners, 1) != 1) return;
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
  close(w->wake_fd);
  free(w->items);
  free(w);
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int queued_bytes(int fd) {
  int q = 0;
  return ioctl(fd, FIONREAD, &q) < 0 ? -1 : q;
}

static int is_cancelled(pw_t *w) {
  pthread_mutex_lock(&w->mu);
  int c = w->cancelled;
  pthread_mutex_unlock(&w->mu);
  return c;
}

/* Sleep `ns` unless cancelled; -1 when cancelled. */
static int pw_sleep(pw_t *w, int64_t ns) {
  struct pollfd p = {.fd = w->wake_fd, .events = POLLIN};
  struct timespec ts = {.tv_sec = ns / 1000000000LL, .tv_nsec = ns % 1000000000LL};
  int rc = ppoll(&p, 1, &ts, NULL);
  if (rc > 0 || is_cancelled(w)) return -1;
  return 0;
}

/* Block until the pipe has room (or the reader left: POLLERR); -1 when cancelled. */
static int pw_wait_room(pw_t *w) {
  struct pollfd p[2] = {{.fd = w->fd, .events = POLLOUT}, {.fd = w->wake_fd, .events = POLLIN}};
  for (;;) {
    int rc = poll(p, 2, -1);
    if (rc < 0 && errno == EINTR) continue;
    if (p[1].revents != 0 || is_cancelled(w)) return -1;
    return 0; /* room, or an error the next write reports */
  }
}

static void pw_count(pw_t *w, int which) {
  pthread_mutex_lock(&w->mu);
  w->stats[which] += 1;
  pthread_mutex_unlock(&w->mu);
}

/*
 * The pipe is full: wait until it is worth writing again (see the module comment).
 * *rate is bytes per ns, 0 when unknown. -1 when cancelled.
 */
static int pw_wait(pw_t *w, double *rate) {
  int q0 = queued_bytes(w->fd);
  if (q0 < 0) return pw_wait_room(w); /* no FIONREAD: plain wait for room */
  int64_t ns = PW_PROBE_NS;
  if (*rate > 0) {
    double low = (double)w->pipe_size / PW_LOW_FRACTION;
    double want = ((double)q0 - low) / *rate;
    ns = want < PW_MIN_SLEEP_NS ? PW_MIN_SLEEP_NS : want > PW_MAX_SLEEP_NS ? PW_MAX_SLEEP_NS : (int64_t)want;
  }
  int64_t t0 = now_ns();
  if (pw_sleep(w, ns) < 0) return -1;
  int q1 = queued_bytes(w->fd);
  int64_t elapsed = now_ns() - t0;
  pw_count(w, ST_SLEEPS);
  if (q1 >= 0 && q1 < q0 && elapsed > 0) {
    double r = (double)(q0 - q1) / (double)elapsed;
    if (q1 == 0) {
      pw_count(w, ST_STARVED);
      *rate = (r > *rate ? r : *rate) * 2; /* a lower bound: the reader may have waited */
    } else {
      *rate = r;
    }
    return 0;
  }
  /* Nothing drained: the reader paused. Wait for it without spinning, then measure afresh. */
  *rate = 0;
  pw_count(w, ST_IDLE_WAITS);
  return pw_wait_room(w);
}

/* Record `got` bytes written: advance the queue. Under mu. Returns how many buffers completed. */
static int pw_advance(pw_t *w, size_t got) {
  int completed = 0;
  w->written += (double)got;
  while (got > 0 && w->count > 0) {
    pw_item *it = &w->items[w->head];
    size_t left = it->len - w->head_done;
    if (got < left) {
      w->head_done += got;
      return completed;
    }
    got -= left;
    w->head_done = 0;
    w->head = (w->head + 1) % w->cap;
    w->count--;
    completed++;
  }
  return completed;
}

static void pw_notify(pw_t *w, napi_threadsafe_function_call_mode mode) {
  pthread_mutex_lock(&w->mu);
  int post = !w->notify_pending;
  w->notify_pending = 1;
  pthread_mutex_unlock(&w->mu);
  if (post) napi_call_threadsafe_function(w->tsfn, NULL, mode);
}

static void *pw_thread(void *arg) {
  pw_t *w = arg;
  struct iovec iov[PW_IOV_MAX];
  double rate = 0;
  for (;;) {
    pthread_mutex_lock(&w->mu);
    while (w->count == 0 && !w->closing && !w->cancelled) pthread_cond_wait(&w->cv, &w->mu);
    if (w->cancelled || w->count == 0) {
      pthread_mutex_unlock(&w->mu);
      break; /* cancelled, or end() and everything is written */
    }
    int n = 0;
    size_t want = 0;
    for (size_t i = 0; i < w->count && n < PW_IOV_MAX; i++) {
      pw_item *it = &w->items[(w->head + i) % w->cap];
      size_t off = i == 0 ? w->head_done : 0;
      iov[n].iov_base = (void *)(it->data + off);
      iov[n].iov_len = it->len - off;
      want += iov[n].iov_len;
      n++;
    }
    pthread_mutex_unlock(&w->mu);
    ssize_t got = writev(w->fd, iov, n);
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pw_count(w, ST_FULL);
        if (pw_wait(w, &rate) < 0) break;
        continue;
      }
      pthread_mutex_lock(&w->mu);
      w->err = errno;
      pthread_mutex_unlock(&w->mu);
      break;
    }
    pthread_mutex_lock(&w->mu);
    w->stats[ST_WRITES] += 1;
    int completed = pw_advance(w, (size_t)got);
    pthread_mutex_unlock(&w->mu);
    if (completed > 0) pw_notify(w, napi_tsfn_nonblocking);
    if ((size_t)got < want) {
      pw_count(w, ST_FULL);
      if (pw_wait(w, &rate) < 0) break;
    }
  }
  close(w->fd);
  pthread_mutex_lock(&w->mu);
  w->finished = 1;
  w->notify_pending = 1;
  pthread_mutex_unlock(&w->mu);
  napi_call_threadsafe_function(w->tsfn, NULL, napi_tsfn_blocking);
  napi_release_threadsafe_function(w->tsfn, napi_tsfn_release);
  pw_drop(w);
  return NULL;
}

/* On the JS thread: report progress to onProgress(written, finished, errno). */
static void pw_call_js(napi_env env, napi_value cb, void *context, void *data) {
  (void)data;
  pw_t *w = context;
  if (env == NULL || cb == NULL) return; /* the environment is going away */
  pthread_mutex_lock(&w->mu);
  double written = w->written;
  /* Idle: nothing queued and no close asked for. After end(), the ref taken there must last
     until the thread reports the fd closed, even if the queue drains first; else the process
     may exit between the reader's EOF and that report, and end() never resolves. */
  int finished = w->finished, err = w->err, idle = w->count == 0 && !w->closing;
  w->notify_pending = 0;
  pthread_mutex_unlock(&w->mu);
  if ((idle || finished) && w->js_refd) {
    napi_unref_threadsafe_function(env, w->tsfn); /* nothing pending: do not hold the process */
    w->js_refd = 0;
  }
  napi_value argv[3], undefined;
  if (napi_create_double(env, written, &argv[0]) != napi_ok || napi_get_boolean(env, finished, &argv[1]) != napi_ok ||
      napi_create_int32(env, err, &argv[2]) != napi_ok || napi_get_undefined(env, &undefined) != napi_ok) {
    return;
  }
  napi_call_function(env, undefined, cb, 3, argv, NULL);
}

static void pw_handle_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  pw_t *w = data;
  pthread_mutex_lock(&w->mu);
  w->cancelled = 1; /* nobody can push or end any more */
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  uint64_t one = 1;
  (void)!write(w->wake_fd, &one, sizeof one);
  pw_drop(w);
}

static pw_t *get_handle(napi_env env, napi_value v) {
  void *data = NULL;
  napi_valuetype type;
  if (napi_typeof(env, v, &type) != napi_ok || type != napi_external || napi_get_value_external(env, v, &data) != napi_ok) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "not a pipe writer handle");
    return NULL;
  }
  return data;
}

/* The handle that is a call's only argument (NULL when missing, or after throwing when it is not one). */
static pw_t *handle_arg(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1) return NULL;
  return get_handle(env, argv[0]);
}

/* pipeWriterOpen(fd, pipeSize, onProgress): a handle; the thread owns fd from now on. */
static napi_value js_open(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3) {
    napi_throw_type_error(env, "ERR_MISSING_ARGS", "pipeWriterOpen(fd, pipeSize, onProgress) needs three arguments");
    return NULL;
  }
  int32_t fd = -1, pipe_size = 0;
  if (napi_get_value_int32(env, argv[0], &fd) != napi_ok || napi_get_value_int32(env, argv[1], &pipe_size) != napi_ok || fd < 0 ||
      pipe_size <= 0) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "fd and pipeSize must be positive numbers");
    return NULL;
  }
  pw_t *w = calloc(1, sizeof *w);
  if (w == NULL) {
    napi_throw_error(env, "ENOMEM", "out of memory");
    return NULL;
  }
  w->fd = fd;
  w->pipe_size = (size_t)pipe_size;
  w->cap = 16;
  w->items = calloc(w->cap, sizeof *w->items);
  w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (w->items == NULL || w->wake_fd < 0) {
    if (w->wake_fd >= 0) close(w->wake_fd);
    free(w->items);
    free(w);
    napi_throw_error(env, "EMFILE", "cannot create the pipe writer's wake-up eventfd");
    return NULL;
  }
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  atomic_init(&w->owners, 2);
  napi_value name, handle;
  napi_create_string_utf8(env, "sluice pipe writer", NAPI_AUTO_LENGTH, &name);
  if (napi_create_threadsafe_function(env, argv[2], NULL, name, 0, 1, NULL, NULL, w, pw_call_js, &w->tsfn) != napi_ok) {
    atomic_store(&w->owners, 1);
    pw_drop(w);
    napi_throw_error(env, "SLUICE_NATIVE", "cannot create the pipe writer's callback");
    return NULL;
  }
  napi_unref_threadsafe_function(env, w->tsfn);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024); /* plenty: no recursion, one iovec array */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old); /* signals stay with the JS thread; EPIPE comes back as an errno */
  pthread_t thread;
  int rc = pthread_create(&thread, &attr, pw_thread, w);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    napi_release_threadsafe_function(w->tsfn, napi_tsfn_abort);
    atomic_store(&w->owners, 1);
    pw_drop(w);
    napi_throw_error(env, "EAGAIN", "cannot start the pipe writer thread");
    return NULL;
  }
  if (napi_create_external(env, w, pw_handle_finalize, NULL, &handle) != napi_ok) {
    napi_throw_error(env, "SLUICE_NATIVE", "cannot create the pipe writer handle");
    return NULL;
  }
  return handle;
}

/* pipeWriterPush(handle, buffer): queue the buffer's bytes (kept referenced by the caller until written). false once finished. */
static napi_value js_push(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2], result;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2) return NULL;
  pw_t *w = get_handle(env, argv[0]);
  if (w == NULL) return NULL;
  void *data = NULL;
  size_t len = 0;
  bool is_buffer = false;
  if (napi_is_buffer(env, argv[1], &is_buffer) != napi_ok || !is_buffer || napi_get_buffer_info(env, argv[1], &data, &len) != napi_ok) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "pipeWriterPush needs a Buffer");
    return NULL;
  }
  pthread_mutex_lock(&w->mu);
  int ok = !w->finished && !w->cancelled && !w->closing && w->err == 0;
  if (ok && len > 0) {
    if (w->count == w->cap) {
      size_t cap = w->cap * 2;
      pw_item *items = malloc(cap * sizeof *items);
      if (items == NULL) {
        pthread_mutex_unlock(&w->mu);
        napi_throw_error(env, "ENOMEM", "out of memory");
        return NULL;
      }
      for (size_t i = 0; i < w->count; i++) items[i] = w->items[(w->head + i) % w->cap];
      free(w->items);
      w->items = items;
      w->cap = cap;
      w->head = 0;
    }
    w->items[(w->head + w->count) % w->cap] = (pw_item){.data = data, .len = len};
    w->count++;
    pthread_cond_signal(&w->cv);
  }
  pthread_mutex_unlock(&w->mu);
  if (ok && len > 0 && !w->js_refd) {
    napi_ref_threadsafe_function(env, w->tsfn); /* bytes pending: keep the process alive until written */
    w->js_refd = 1;
  }
  napi_get_boolean(env, ok, &result);
  return result;
}

/* pipeWriterEnd(handle): close the write end once everything queued is written. */
static napi_value js_end(napi_env env, napi_callback_info info) {
  pw_t *w = handle_arg(env, info);
  if (w == NULL) return NULL;
  pthread_mutex_lock(&w->mu);
  w->closing = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  if (!w->js_refd) {
    napi_ref_threadsafe_function(env, w->tsfn); /* until the thread reports it closed the fd */
    w->js_refd = 1;
  }
  return NULL;
}

/* pipeWriterCancel(handle): stop now, dropping what is not written; the thread closes fd and reports finished. */
static napi_value js_cancel(napi_env env, napi_callback_info info) {
  pw_t *w = handle_arg(env, info);
  if (w == NULL) return NULL;
  pthread_mutex_lock(&w->mu);
  w->cancelled = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  uint64_t one = 1;
  (void)!write(w->wake_fd, &one, sizeof one);
  return NULL;
}

/* pipeWriterStats(handle): [writes, full, sleeps, starved, idleWaits, written]. */
static napi_value js_stats(napi_env env, napi_callback_info info) {
  napi_value result, v;
  pw_t *w = handle_arg(env, info);
  if (w == NULL) return NULL;
  double s[ST_COUNT + 1];
  pthread_mutex_lock(&w->mu);
  memcpy(s, w->stats, sizeof w->stats);
  s[ST_COUNT] = w->written;
  pthread_mutex_unlock(&w->mu);
  napi_create_array_with_length(env, ST_COUNT + 1, &result);
  for (uint32_t i = 0; i <= ST_COUNT; i++) {
    napi_create_double(env, s[i], &v);
    napi_set_element(env, result, i, v);
  }
  return result;
}

napi_status sluice_pipe_writer_init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"pipeWriterOpen", NULL, js_open, NULL, NULL, NULL, napi_enumerable, NULL},
      {"pipeWriterPush", NULL, js_push, NULL, NULL, NULL, napi_enumerable, NULL},
      {"pipeWriterEnd", NULL, js_end, NULL, NULL, NULL, napi_enumerable, NULL},
      {"pipeWriterCancel", NULL, js_cancel, NULL, NULL, NULL, napi_enumerable, NULL},
      {"pipeWriterStats", NULL, js_stats, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  return napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
}
