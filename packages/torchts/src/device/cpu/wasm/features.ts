// What the JS runtime offers: wasm SIMD, relaxed SIMD (fused multiply-add), shared memory,
// worker threads. Relaxed SIMD is behind a V8 flag in Node 20; setting it before the first
// compile is harmless for other code (it only enables extra opcodes), TORCHTS_WASM_RELAXED=0 opts out.

export interface Features {
  simd: boolean;
  relaxedSimd: boolean;
  sharedMemory: boolean;
  workers: boolean;
  cores: number;
  spawn: ((src: string, data: object) => { terminate(): unknown; unref?(): void }) | null;
}

// (func (param v128 v128 v128) (result v128) local.get 0 local.get 1 local.get 2 OP)
function probe(op: number[]): Uint8Array {
  const body = [0x00, 0x20, 0x00, 0x20, 0x01, 0x20, 0x02, ...op, 0x0b];
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    0x01, 0x08, 0x01, 0x60, 0x03, 0x7b, 0x7b, 0x7b, 0x01, 0x7b,
    0x03, 0x02, 0x01, 0x00,
    0x0a, body.length + 2, 0x01, body.length, ...body,
  ]);
}
const SIMD_PROBE = probe([0xfd, 0xe4, 0x01, 0xfd, 0xe6, 0x01]); // f32x4.add(a, f32x4.mul(b, c))
const RELAXED_PROBE = probe([0xfd, 0x85, 0x02]); // f32x4.relaxed_madd

type NodeProcess = { env?: Record<string, string | undefined>; getBuiltinModule?: (m: string) => unknown };

function nodeModule<T>(name: string): T | null {
  const p = (globalThis as { process?: NodeProcess }).process;
  try {
    return (p?.getBuiltinModule?.(name) as T) ?? null;
  } catch {
    return null;
  }
}

let cached: Features | undefined;

export function detect(): Features {
  if (cached) return cached;
  const validate = (b: Uint8Array) => {
    try {
      return WebAssembly.validate(b as BufferSource);
    } catch {
      return false;
    }
  };
  const simd = typeof WebAssembly === "object" && validate(SIMD_PROBE);
  let relaxedSimd = simd && validate(RELAXED_PROBE);
  const p = (globalThis as { process?: NodeProcess }).process;
  if (simd && !relaxedSimd && p?.env?.TORCHTS_WASM_RELAXED !== "0") {
    const v8 = nodeModule<{ setFlagsFromString(f: string): void }>("node:v8");
    v8?.setFlagsFromString("--experimental-wasm-relaxed-simd");
    relaxedSimd = validate(RELAXED_PROBE);
  }
  let sharedMemory: boolean;
  try {
    sharedMemory = new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true }).buffer instanceof SharedArrayBuffer;
  } catch {
    sharedMemory = false;
  }
  const wt = nodeModule<{
    Worker: new (src: string, o: object) => { terminate(): unknown; unref(): void };
  }>("node:worker_threads");
  const os = nodeModule<{ availableParallelism?: () => number; cpus(): unknown[] }>("node:os");
  const nav = (globalThis as { navigator?: { hardwareConcurrency?: number } }).navigator;
  const cores = os ? (os.availableParallelism?.() ?? os.cpus().length) : (nav?.hardwareConcurrency ?? 1);
  const spawn = wt ? (src: string, data: object) => new wt.Worker(src, { eval: true, workerData: data }) : null;
  cached = { simd, relaxedSimd, sharedMemory, workers: sharedMemory && spawn !== null, cores, spawn };
  return cached;
}
