// No size can corrupt an allocator: a bad size (NaN, negative, fractional, infinite) is a
// RangeError and a size past the memory an OutOfMemoryError, both raised before any state
// changes, so the process stays exact afterwards. Releases never throw (double frees and
// throwing device frees are counted in memory.stats().releaseErrors), and a public op that
// throws in fused mode can roll back the nodes it recorded (opCheckpoint/opRollback).
// (Once a NaN size made the wasm arena's bump pointer NaN: every later result was wrong, and a
// finalizer later threw "double free of block NaN" and killed the process.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { totalmem } from "node:os";
import * as torch from "../../src/index.js";
import type { DevicePlugin, IRGraph } from "../../src/index.js";
import { Arena, classSize, WASM32_MAX_BYTES } from "../../src/device/cpu/wasm/arena.js";
import { setCpuBackend, wasmRuntime } from "../../src/device/cpu/wasm/runtime.js";
import { BufferPool } from "../../src/device/webgpu/pool.js";
import { withOp } from "../../src/runtime/mode.js";
import { opCheckpoint, opRollback, pendingCount } from "../../src/runtime/dispatch.js";
import { Storage } from "../../src/runtime/storage.js";
import { reportReleaseError, trackAlloc, trackFree, type BufferOwner } from "../../src/runtime/memory.js";

const cpu = torch.getDevice("cpu");
const BAD_SIZES: unknown[] = [NaN, -1, 2.5, Infinity, -Infinity, "8", undefined];

/** The computation that gave 0 once the arena was corrupted: exact when the process is sound. */
async function assertExact(): Promise<void> {
  torch.manualSeed(1);
  const a = torch.randn(64, 64);
  const twice = await a.mul(2).sum().item();
  const once = await a.sum().item();
  assert.equal(twice, 2 * once); // scaling by 2 commutes with rounding
  assert.notEqual(once, 0);
  // integers below 2^24 sum exactly in float32
  assert.equal(await torch.arange(4096, { dtype: "float32" }).mul(2).sum().item(), 4095 * 4096);
  assert.deepEqual(await torch.tensor([1, 2, 3]).add(torch.tensor([10, 20, 30])).tolist(), [11, 22, 33]);
}

async function collectGarbage(): Promise<void> {
  for (let i = 0; i < 4; i++) {
    globalThis.gc?.();
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** assert.throws matcher: the error's message (not "Name: message") matches. */
const message = (re: RegExp) => (e: Error) => {
  assert.match(e.message, re);
  return true;
};

function memoryCounts() {
  const s = torch.memory.stats();
  return { liveBytes: s.liveBytes, liveBuffers: s.liveBuffers };
}

// ---- the wasm arena ----

test("arena: bad sizes are RangeErrors naming the size, and leave the arena unchanged", () => {
  const mem = new WebAssembly.Memory({ initial: 1, maximum: 16 });
  const arena = new Arena(mem, 1024);
  const p1 = arena.alloc(100);
  const inUse = arena.bytesInUse;
  for (const n of BAD_SIZES) {
    assert.throws(() => arena.alloc(n as number), (e: Error) => {
      assert.ok(e instanceof RangeError, `${String(n)}: ${e.name}`);
      assert.match(e.message, /invalid allocation size: wasm arena was asked for .* bytes/);
      assert.ok(e.message.includes(typeof n === "string" ? `"${n}"` : String(n)), e.message);
      return true;
    });
  }
  assert.equal(arena.bytesInUse, inUse);
  // the bump pointer did not move: the next block follows the first one directly
  assert.equal(arena.alloc(100), p1 + classSize(112));
});

test("arena: sizes past the memory are OutOfMemoryErrors and leave the arena usable", () => {
  const mem = new WebAssembly.Memory({ initial: 1, maximum: 2 });
  // declared maximum: refused before trying to grow
  const small = new Arena(mem, 0, 2 * 65536);
  assert.throws(() => small.alloc(200_000), (e: Error) => {
    assert.ok(e instanceof torch.OutOfMemoryError);
    assert.equal(e.name, "OutOfMemoryError");
    assert.match(e.message, /^OutOfMemoryError: tried to allocate 200000 bytes \(wasm arena: /);
    return true;
  });
  assert.equal(small.alloc(64), 0, "the bump pointer did not move");
  // the memory itself refuses to grow (its maximum is below the arena's 4 GiB default)
  const big = new Arena(new WebAssembly.Memory({ initial: 1, maximum: 2 }), 0);
  assert.equal(big.maxBytes, WASM32_MAX_BYTES);
  assert.throws(() => big.alloc(1 << 20), (e: Error) => e instanceof torch.OutOfMemoryError && /could not grow/.test(e.message));
  assert.throws(() => big.alloc(2 ** 33), (e: Error) => e instanceof torch.OutOfMemoryError && /tried to allocate 8589934592 bytes/.test(e.message));
  assert.equal(big.bytesInUse, 0);
  assert.equal(big.alloc(64), 0);
  assert.equal(big.alloc(64), 64);
});

test("arena: a double free is counted and ignored; the free lists stay sound", () => {
  const arena = new Arena(new WebAssembly.Memory({ initial: 1, maximum: 16 }), 0);
  const errors = torch.memory.stats().releaseErrors;
  const p = arena.alloc(100);
  const q = arena.alloc(100);
  assert.equal(arena.release(p), true);
  assert.equal(arena.release(p), false);
  assert.equal(arena.release(NaN), false);
  assert.equal(arena.invalidFrees, 2);
  assert.equal(torch.memory.stats().releaseErrors, errors + 2);
  assert.equal(arena.bytesInUse, classSize(112), "only q is in use");
  // p is on its free list once: two new blocks are two different blocks
  const a = arena.alloc(100);
  const b = arena.alloc(100);
  assert.equal(a, p);
  assert.notEqual(b, p);
  assert.notEqual(b, q);
});

// ---- the cpu device ----

test("cpu: the allocator rejects bad element counts before touching the arena, naming the op", async () => {
  const rt = wasmRuntime();
  const before = rt ? { inUse: rt.arena.bytesInUse, reserved: rt.arena.reservedBytes } : null;
  for (const n of BAD_SIZES) {
    assert.throws(() => cpu.allocate("float32", n as number), RangeError);
    assert.throws(() => withOp("roll", () => cpu.allocate("float32", n as number)), (e: Error) => {
      assert.match(e.message, /^roll\(\): invalid allocation size: cpu was asked for .* elements/);
      return true;
    });
  }
  if (rt) assert.deepEqual({ inUse: rt.arena.bytesInUse, reserved: rt.arena.reservedBytes }, before);
  await assertExact();
  await collectGarbage(); // no finalizer finds a corrupted block
  await assertExact();
});

test("storage: a tensor of a bad size is refused where it is made", () => {
  for (const n of [NaN, -3, 0.5]) {
    assert.throws(() => new Storage(cpu, "float32", n), RangeError);
    assert.throws(() => withOp("roll", () => new Storage(cpu, "float32", n)), message(/^roll\(\): invalid tensor size: .* elements/));
  }
  assert.throws(() => torch.zeros(-1), /negative|invalid/); // refused (by the op or, failing that, here)
});

test("cpu: torch.randn(1e12) raises torch.OutOfMemoryError naming the op and the bytes, and the process stays exact", async () => {
  const before = memoryCounts();
  assert.throws(() => torch.randn(1e12), (e: Error) => {
    assert.ok(e instanceof torch.OutOfMemoryError);
    assert.equal(e.name, "OutOfMemoryError");
    assert.match(e.message, /OutOfMemoryError: tried to allocate 4000000000000 bytes \(cpu: a host array holds at most 4294967296 elements\)/);
    return true;
  });
  assert.throws(() => withOp("randn", () => torch.randn(1e12)), message(/^randn\(\): OutOfMemoryError: tried to allocate 4000000000000 bytes \(/));
  assert.throws(() => torch.zeros(2 ** 31, 3, { dtype: "float64" }), (e: Error) => e instanceof torch.OutOfMemoryError && /tried to allocate 51539607552 bytes/.test(e.message));
  assert.deepEqual(memoryCounts(), before);
  await assertExact();
});

test("cpu: an array larger than the host's memory is an OutOfMemoryError, not an attempt", { skip: totalmem() >= 2 ** 35 ? "the host has 32 GiB or more" : false }, () => {
  assert.throws(() => torch.zeros(2 ** 32, { dtype: "float64" }), (e: Error) => {
    assert.ok(e instanceof torch.OutOfMemoryError);
    assert.match(e.message, /tried to allocate 34359738368 bytes \(cpu: the host has .* of memory\)/);
    return true;
  });
});

test("cpu, JS backend (TORCHTS_CPU_BACKEND=js): the same checks on plain typed arrays", async () => {
  setCpuBackend("js");
  try {
    assert.equal(wasmRuntime(), null);
    for (const n of BAD_SIZES) assert.throws(() => cpu.allocate("float32", n as number), RangeError);
    assert.throws(() => torch.randn(1e12), (e: Error) => e instanceof torch.OutOfMemoryError && /tried to allocate 4000000000000 bytes/.test(e.message));
    await assertExact();
  } finally {
    setCpuBackend("auto");
  }
  await assertExact();
});

test("fused mode: a size no device can hold fails in the op that records it, leaving nothing pending", async () => {
  await torch.withEagerMode("fused", async () => {
    torch.sync();
    const before = memoryCounts();
    const pending = pendingCount();
    // the device's checkSize runs when the storage is made, not at a later flush that names another op
    assert.throws(() => torch.zeros(2 ** 31, 3), (e: Error) => e instanceof torch.OutOfMemoryError && /^zeros\(\): /.test(e.message));
    assert.equal(pendingCount(), pending);
    assert.deepEqual(memoryCounts(), before);
    torch.sync();
    await assertExact();
  });
});

// ---- release paths ----

const throwingFree: DevicePlugin = {
  ...cpu,
  name: "throwing-free",
  free() {
    throw new Error("device free failed");
  },
};

test("release: dispose() with a device free that throws does not throw; it is counted", () => {
  const s0 = torch.memory.stats();
  const st = new Storage(throwingFree, "float32", 4);
  st.allocate();
  assert.equal(torch.memory.stats().liveBuffers, s0.liveBuffers + 1);
  assert.doesNotThrow(() => st.dispose());
  const s1 = torch.memory.stats();
  assert.equal(s1.liveBuffers, s0.liveBuffers);
  assert.equal(s1.liveBytes, s0.liveBytes);
  assert.equal(s1.releaseErrors, s0.releaseErrors + 1);
});

test("release: a finalizer whose device free throws does not kill the process; it is counted", async () => {
  const errors = torch.memory.stats().releaseErrors;
  (() => {
    for (let i = 0; i < 3; i++) new Storage(throwingFree, "float32", 4).allocate();
  })();
  for (let i = 0; i < 50 && torch.memory.stats().releaseErrors < errors + 3; i++) await collectGarbage();
  assert.equal(torch.memory.stats().releaseErrors, errors + 3);
  await assertExact();
});

test("release: freeing a buffer twice is counted and applied once", () => {
  const s0 = torch.memory.stats();
  const owner: BufferOwner = { _held: null, _gcToken: null };
  const buf = cpu.allocate("float32", 16);
  trackAlloc(owner, cpu, buf);
  trackFree(owner, cpu, buf);
  trackFree(owner, cpu, buf);
  const s1 = torch.memory.stats();
  assert.equal(s1.liveBuffers, s0.liveBuffers);
  assert.equal(s1.liveBytes, s0.liveBytes);
  assert.equal(s1.releaseErrors, s0.releaseErrors + 1);
  // the device buffer itself went back once: freeing it again directly does nothing
  assert.doesNotThrow(() => cpu.free(buf));
});

test("release: each kind of problem is warned about once on stderr, every one is counted", () => {
  const warn = console.warn;
  const seen: string[] = [];
  console.warn = (...a: unknown[]) => void seen.push(a.join(" "));
  try {
    const errors = torch.memory.stats().releaseErrors;
    reportReleaseError("test problem", "first");
    reportReleaseError("test problem", "second");
    reportReleaseError("other test problem", new Error("third"));
    assert.equal(torch.memory.stats().releaseErrors, errors + 3);
    assert.equal(seen.length, 2);
    assert.match(seen[0]!, /torchts: test problem: first .*releaseErrors/);
    assert.match(seen[1]!, /other test problem: third/);
  } finally {
    console.warn = warn;
  }
  assert.equal(typeof torch.memory.stats().releaseErrors, "number");
});

test("memory accounting: a device buffer of an impossible size is refused before any statistic changes", () => {
  const nanBytes: DevicePlugin = { ...cpu, name: "nan-bytes", allocate: () => ({ bytes: NaN }), free() {} };
  const s0 = torch.memory.stats();
  const st = new Storage(nanBytes, "float32", 4);
  assert.throws(() => st.allocate(), (e: Error) => e instanceof RangeError && /nan-bytes returned a buffer of NaN bytes/.test(e.message));
  assert.equal(st.buf, null);
  const s1 = torch.memory.stats();
  assert.deepEqual({ ...s1, peakBytes: 0 }, { ...s0, peakBytes: 0 });
  assert.ok(Number.isFinite(s1.liveBytes));
});

// ---- the webgpu pool (a fake device: the checks come before any GPU call) ----

function fakeGpu() {
  (globalThis as Record<string, unknown>).GPUBufferUsage ??= { MAP_READ: 1, COPY_SRC: 4, COPY_DST: 8, UNIFORM: 64, STORAGE: 128 };
  const created: { size: number; destroyed: boolean }[] = [];
  const device = {
    createBuffer({ size }: { size: number }) {
      const b = { size, destroyed: false, destroy() { b.destroyed = true; } };
      created.push(b);
      return b;
    },
  };
  return { device: device as unknown as GPUDevice, created };
}

test("webgpu pool: bad sizes are RangeErrors and sizes past the adapter are OutOfMemoryErrors, state unchanged", () => {
  const { device, created } = fakeGpu();
  const pool = new BufferPool(device, 1 << 30, 1 << 28, (1 << 27) - 4096);
  pool.release(pool.acquire(1000)); // something pooled
  const s0 = { ...pool.s };
  for (const n of BAD_SIZES) assert.throws(() => pool.acquire(n as number), RangeError);
  assert.throws(() => withOp("zeros", () => pool.acquire(NaN)), message(/^zeros\(\): invalid allocation size: webgpu was asked for NaN bytes/));
  assert.throws(() => withOp("randn", () => pool.acquire(4e12)), (e: Error) => {
    assert.ok(e instanceof torch.OutOfMemoryError);
    assert.match(e.message, /^randn\(\): OutOfMemoryError: tried to allocate 4000000000000 bytes \(webgpu: .*128\.00 MiB\)/);
    return true;
  });
  assert.throws(() => pool.acquire((1 << 27) - 8192), torch.OutOfMemoryError); // its 128 MiB bucket is past the adapter
  assert.deepEqual(pool.s, s0);
  assert.equal(created.length, 1);
  const b = pool.acquire(1000);
  assert.equal(b.size, 1024);
  assert.equal(created.length, 1, "the pooled buffer was reused");
});

test("webgpu pool: a buffer released twice is counted and ignored (it is never handed out twice)", () => {
  const { device } = fakeGpu();
  const pool = new BufferPool(device, 1 << 30, 1 << 28, 1 << 27);
  const errors = torch.memory.stats().releaseErrors;
  const a = pool.acquire(4096);
  pool.release(a);
  pool.release(a);
  assert.equal(pool.s.pooledBuffers, 1);
  assert.equal(pool.s.liveBuffers, 0);
  assert.equal(pool.s.liveBytes, 0);
  assert.equal(torch.memory.stats().releaseErrors, errors + 1);
  const x = pool.acquire(4096);
  const y = pool.acquire(4096);
  assert.equal(x, a);
  assert.notEqual(y, a);
  pool.release(x); // released again after being handed out again: a normal release
  assert.equal(torch.memory.stats().releaseErrors, errors + 1);
});

// ---- fused eager: opCheckpoint / opRollback ----

/** Kernels a torch.sync() runs (names from the profiler) and what it leaves allocated. */
function syncKernels(): { kernels: string[]; buffers: number; bytes: number } {
  const m0 = memoryCounts();
  const prof = torch.profiler.profile();
  torch.sync();
  prof.stop();
  const m1 = memoryCounts();
  return { kernels: prof.events.map((e) => e.name), buffers: m1.liveBuffers - m0.liveBuffers, bytes: m1.liveBytes - m0.liveBytes };
}

test("opRollback drops the nodes recorded since opCheckpoint: the flush runs only the earlier ones", async () => {
  await torch.withEagerMode("fused", async () => {
    const x = torch.arange(8, { dtype: "float32" });
    torch.sync();
    // control: the earlier ops alone
    let b = x.mul(2).add(1).relu();
    const control = syncKernels();
    assert.deepEqual(await b.tolist(), [1, 3, 5, 7, 9, 11, 13, 15]);

    b = x.mul(2).add(1).relu();
    const pending0 = pendingCount();
    const mem0 = memoryCounts();
    const token = opCheckpoint();
    const c = b.mul(b).exp(); // tensor operands only: a number would add a cached constant tensor
    const d = x.sub(b).sum();
    const e = c.add(d);
    assert.ok(pendingCount() > pending0);
    opRollback(token);
    assert.equal(pendingCount(), pending0);
    assert.deepEqual(memoryCounts(), mem0);
    const run = syncKernels();
    assert.deepEqual(run, control, "the flush ran exactly what the earlier ops alone run");
    assert.deepEqual(await b.tolist(), [1, 3, 5, 7, 9, 11, 13, 15]);
    assert.equal(e.storage.buf, null, "the rolled-back nodes did not run");
    // a value something still holds stays computable on demand (nothing is poisoned)
    assert.equal(await d.item(), 28 - 64);
  });
});

test("opRollback when nothing was recorded (or with a foreign token) is a no-op", async () => {
  await torch.withEagerMode("fused", async () => {
    const x = torch.arange(4, { dtype: "float32" });
    torch.sync();
    const y = x.mul(3).add(1);
    const pending0 = pendingCount();
    const token = opCheckpoint();
    opRollback(token);
    for (const t of [undefined, null, "3", NaN, {}, Infinity]) opRollback(t);
    assert.equal(pendingCount(), pending0);
    const run = syncKernels();
    assert.ok(run.kernels.length > 0, "the earlier nodes still run");
    assert.deepEqual(await y.tolist(), [1, 4, 7, 10]);
  });
  // strict mode: nothing is pending, rollback does nothing
  const token = opCheckpoint();
  const z = torch.tensor([1, 2]).mul(2);
  opRollback(token);
  assert.deepEqual(await z.tolist(), [2, 4]);
});

test("opRollback gives back a buffer a failed flush left half-made (no garbage value, no leak)", async () => {
  await torch.withEagerMode("fused", async () => {
    const x = torch.arange(4, { dtype: "float32" });
    torch.sync();
    const a = x.mul(2);
    const mem0 = memoryCounts();
    const token = opCheckpoint();
    const b = a.add(1);
    b.storage.allocate(); // what an allocation-then-failed kernel leaves: a buffer and a pending node
    assert.equal(memoryCounts().liveBuffers, mem0.liveBuffers + 1);
    opRollback(token);
    assert.deepEqual(memoryCounts(), mem0);
    assert.equal(b.storage.buf, null);
    assert.deepEqual(await b.tolist(), [1, 3, 5, 7]); // recomputed, not read from the garbage buffer
  });
});

let failBinary = false;
const flaky: DevicePlugin = {
  ...cpu,
  name: "flaky",
  compile(g: IRGraph) {
    const exe = cpu.compile(g);
    const binary = g.nodes.some((n) => n.prim === "binary");
    return {
      run(ins, outs, scalars) {
        if (failBinary && binary) throw new Error("flaky: kernel failed");
        exe.run(ins, outs, scalars);
      },
    };
  },
};
torch.registerDevice("flaky", flaky);

test("a flush whose kernel throws leaves no half-made buffer behind (flushAll and realize)", async () => {
  await torch.withEagerMode("fused", async () => {
    const x = torch.arange(4, { dtype: "float32", device: "flaky" });
    torch.sync();
    const y = x.mul(2);
    const z = x.add(5);
    const mem0 = memoryCounts(); // after recording (numbers are cached constant tensors)
    failBinary = true;
    try {
      assert.throws(() => torch.sync(), /flaky: kernel failed/);
      assert.equal(y.storage.buf, null, "no buffer of garbage stands for y");
      assert.deepEqual(memoryCounts(), mem0);
      await assert.rejects(z.tolist(), /flaky: kernel failed/);
      assert.equal(z.storage.buf, null);
      assert.deepEqual(memoryCounts(), mem0);
    } finally {
      failBinary = false;
    }
    assert.deepEqual(await y.tolist(), [0, 2, 4, 6]);
    assert.deepEqual(await x.add(5).tolist(), [5, 6, 7, 8]);
  });
});
