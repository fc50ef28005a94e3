// Shared helpers for the benchmark suites: timing (best of several runs, since the machine may
// be shared), result rows (JSON lines on stdout, collected by run.ts) and the workload list.

export const QUICK = process.argv.includes("--quick");

/** The number after a command-line flag (`--threads 2`), or null when the flag is absent. */
/** `--name N`: a count (a non-negative integer), null when absent; anything else is an error naming the flag. */
export function numberArg(name: string): number | null {
  const i = process.argv.indexOf(name);
  if (i <= 0) return null;
  const raw = process.argv[i + 1];
  const v = raw === undefined || raw.trim() === "" ? NaN : Number(raw);
  if (!Number.isSafeInteger(v) || v < 0) throw new Error(`${name} must be a non-negative integer, got '${raw ?? ""}'`);
  return v;
}

export interface Row {
  suite: string; // "torchts", "tfjs-wasm", "onnxruntime-node", "jax-js", "probe"
  workload: string; // e.g. "matmul 1024"
  variant?: string; // e.g. "strict", "kernel", "js fallback"
  ms?: number; // best time per run
  medianMs?: number;
  /** Mean over the measured repetitions, where a suite reports it (small_step: GC pauses land here). */
  meanMs?: number;
  /** small_step: the PyTorch peer's median in the same pass as this row, what its ratio divides by. */
  peerMs?: number;
  gflops?: number;
  gbs?: number;
  /** A ratio the row stands for (bench/transformers' torchts / llama.cpp rows, bench/memory's arena rows): what acceptance.ts judges. */
  ratio?: number;
  note?: string;
  error?: string;
}

export function emit(r: Row): void {
  console.log("ROW " + JSON.stringify(r));
}

/** Runs fn until `budgetMs` or `maxReps` (after `warmup` runs); returns best and median ms. */
export async function time(
  fn: () => unknown | Promise<unknown>,
  { warmup = 1, budgetMs = QUICK ? 600 : 2000, maxReps = QUICK ? 5 : 20, minReps = 3 } = {},
): Promise<{ best: number; median: number }> {
  for (let i = 0; i < warmup; i++) await fn();
  const ts: number[] = [];
  const start = performance.now();
  while (ts.length < minReps || (ts.length < maxReps && performance.now() - start < budgetMs)) {
    const t0 = performance.now();
    await fn();
    ts.push(performance.now() - t0);
  }
  ts.sort((a, b) => a - b);
  return { best: ts[0]!, median: ts[ts.length >> 1]! };
}

export const MATMUL_SIZES = QUICK ? [256, 512, 1024] : [256, 512, 1024, 2048];
export const CONV = { n: 1, c: 64, h: 56, w: 56, k: 3 }; // 3x3 64->64, pad 1
export const CONV_FLOPS = 2 * CONV.n * CONV.h * CONV.w * CONV.c * CONV.c * CONV.k * CONV.k;
export const SOFTMAX = { rows: 4096, cols: 1024 };
export const TANH_N = 16 * 1024 * 1024;
export const TANH_A = 0.75;
export const TANH_B = 0.1;

/** Deterministic pseudo-random float32 data (same inputs for every library). */
export function randomF32(n: number, seed = 1, scale = 1): Float32Array<ArrayBuffer> {
  const a = new Float32Array(n);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    a[i] = ((s >>> 0) / 4294967296 - 0.5) * 2 * scale;
  }
  return a;
}

/** One shared emitter for all workloads: ms -> row with GFLOP/s or GB/s. */
export function report(suite: string, workload: string, variant: string, t: { best: number; median: number }, flops?: number, bytes?: number, note?: string): void {
  emit({
    suite, workload, variant, ms: round(t.best), medianMs: round(t.median),
    gflops: flops ? round(flops / t.best / 1e6) : undefined,
    gbs: bytes ? round(bytes / t.best / 1e6) : undefined,
    note,
  });
}

export function round(x: number): number {
  return Math.round(x * 100) / 100;
}

export async function guard(suite: string, workload: string, fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch (e) {
    emit({ suite, workload, error: String((e as Error)?.message ?? e).slice(0, 200) });
  }
}
