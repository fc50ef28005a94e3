// Per-thread scratch blocks of torchts' native kernels: each pool thread packs and accumulates in
// memory of its own, kept for the thread's life (allocated on its first call, grown when a call
// needs more, freed when the thread exits).
#pragma once
#include <stddef.h>

// one block per kernel
enum { TTS_SCRATCH_GEMM_AVX512, TTS_SCRATCH_GEMM_AVX2, TTS_SCRATCH_ATTN, TTS_SCRATCH_ATTN_DECODE, TTS_SCRATCH_W8A8, TTS_SCRATCH_SLOTS };

// This thread's block `slot`, at least `bytes` long and 64-byte aligned; what it held is not kept
// when it grows. NULL (the old block kept) when the memory cannot be had.
void* tts_thread_scratch(int slot, size_t bytes);
