// The per-thread scratch blocks of thread_scratch.h: one table per thread, freed with its blocks by
// a pthread key's destructor when the thread exits.
#include "thread_scratch.h"
#include <pthread.h>
#include <stdlib.h>

typedef struct {
  void* p[TTS_SCRATCH_SLOTS];
  size_t n[TTS_SCRATCH_SLOTS];
} scratch_t;

static __thread scratch_t* mine;
static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void release(void* v) {
  scratch_t* s = v;
  for (int i = 0; i < TTS_SCRATCH_SLOTS; i++) free(s->p[i]);
  free(s);
}
static void key_init(void) { pthread_key_create(&key, release); }

void* tts_thread_scratch(int slot, size_t bytes) {
  if (slot < 0 || slot >= TTS_SCRATCH_SLOTS) return NULL;
  if (!mine) {
    scratch_t* s = calloc(1, sizeof *s);
    if (!s) return NULL;
    pthread_once(&once, key_init);
    pthread_setspecific(key, s);
    mine = s;
  }
  if (mine->n[slot] < bytes) {
    void* p = aligned_alloc(64, (bytes + 63) / 64 * 64); // a multiple of the alignment, as C11 asks
    if (!p) return NULL;
    free(mine->p[slot]);
    mine->p[slot] = p;
    mine->n[slot] = bytes;
  }
  return mine->p[slot];
}
