/* LD_PRELOAD shim: a thread that calls malloc_trim(0) every N seconds.
 *
 * N is read from TFF_FEDWIN_MALLOC_TRIM_SECONDS when the library loads; unset,
 * zero or not a positive integer: no thread. glibc returns freed memory to the
 * system only from the top of a heap; buffers a TFF worker frees in the middle
 * of its heaps stay resident, and its RSS creeps up over a long run.
 * malloc_trim(0) releases every free page of every arena (madvise DONTNEED),
 * so the worker's RSS stays at what it actually holds. Calling it every few
 * seconds costs almost nothing; trimming on every free (MALLOC_TRIM_THRESHOLD_)
 * costs 15-30% round time (results/performance_history.md sec. 9).
 * tff_fedwin.runtime.worker_memory preloads it into TFF's worker_binary.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

static void *trim_loop(void *arg) {
  unsigned int seconds = (unsigned int)(uintptr_t)arg;
  for (;;) {
    sleep(seconds);
    malloc_trim(0);
  }
  return NULL;
}

__attribute__((constructor)) static void start_trim_thread(void) {
  const char *text = getenv("TFF_FEDWIN_MALLOC_TRIM_SECONDS");
  char *end = NULL;
  long seconds;
  pthread_attr_t attr;
  pthread_t thread;
  if (text == NULL || *text == '\0') return;
  seconds = strtol(text, &end, 10);
  if (*end != '\0' || seconds <= 0 || seconds > 86400) return;
  if (pthread_attr_init(&attr) != 0) return;
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&thread, &attr, trim_loop,
                     (void *)(uintptr_t)seconds) == 0) {
    pthread_setname_np(thread, "fedwin-trim");
  }
  pthread_attr_destroy(&attr);
}
