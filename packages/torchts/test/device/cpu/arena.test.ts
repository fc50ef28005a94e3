// The wasm arena's allocator: best fit over freed blocks, splitting, coalescing, the top coming
// back down, and the reclaim hook (a collection before the memory grows). Any freed memory must
// serve any later size, so a workload whose sizes change (a model's initialization, then its
// activations) stays within what it holds at once.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Arena, classSize, RECLAIM_MIN } from "../../../src/device/cpu/wasm/arena.js";

const PAGE = 65536;
const MiB = 1 << 20;
/** The growth in bytes in use (MiB) after which a collection is worth it. */
const WINDOW = RECLAIM_MIN / MiB;
const memory = (pages = 1, maximum = 256) => new WebAssembly.Memory({ initial: pages, maximum });

test("arena: block sizes are 16-byte multiples of at least 64 bytes", () => {
  assert.deepEqual([0, 1, 64, 65, 100, 112, 1000, 1 << 20].map(classSize), [64, 64, 64, 80, 112, 112, 1008, 1 << 20]);
});

test("arena: the best-fitting free block serves a request, split when much larger", () => {
  const a = new Arena(memory(4), 0);
  const small = a.alloc(1024);
  a.alloc(64); // keeps the blocks apart
  const big = a.alloc(8192);
  a.alloc(64);
  a.release(big);
  a.release(small);
  assert.equal(a.alloc(1000), small, "the 1 KiB hole fits 1000 bytes best");
  const p = a.alloc(2048);
  assert.equal(p, big, "the 8 KiB hole is split");
  assert.equal(a.blockBytes(p), 2048);
  assert.equal(a.alloc(4096), big + 2048, "its remainder serves the next request");
  // a hole hardly larger than the request is handed out whole: no sliver is left behind
  const b = new Arena(memory(1), 0);
  const q = b.alloc(1024);
  b.alloc(64);
  b.release(q);
  assert.equal(b.alloc(1024 - 128), q);
  assert.equal(b.blockBytes(q), 1024);
  assert.equal(b.bytesInUse, 1024 + 64);
});

test("arena: freed neighbours coalesce, and the top comes back down", () => {
  const mem = memory(4);
  const a = new Arena(mem, 128);
  const [x, y, z] = [a.alloc(1000), a.alloc(2000), a.alloc(3000)];
  const keep = a.alloc(64);
  a.release(x);
  a.release(z);
  a.release(y); // joins both neighbours
  assert.equal(a.freeBytes, classSize(1000) + classSize(2000) + classSize(3000));
  assert.equal(a.alloc(6000), x, "the three blocks are one hole");
  a.release(x);
  a.release(keep); // the top block: the whole arena is free, and the top is back at the base
  assert.equal(a.freeBytes, 0);
  assert.equal(a.bytesInUse, 0);
  assert.equal(a.alloc(64), 128);
  assert.equal(a.highWater, 128 + classSize(1000) + classSize(2000) + classSize(3000) + 64, "the high-water mark stays");
});

test("arena: random allocations never overlap, and all freed memory serves one block", () => {
  const mem = memory(1, 1024);
  const a = new Arena(mem, 64);
  let seed = 7;
  const rand = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  const live = new Map<number, number>();
  for (let i = 0; i < 3000; i++) {
    if (live.size && rand(100) < 45) {
      const keys = [...live.keys()];
      const p = keys[rand(keys.length)]!;
      assert.equal(a.release(p), true);
      live.delete(p);
    } else {
      const n = 1 + rand(rand(10) < 2 ? 200_000 : 5000);
      const p = a.alloc(n);
      assert.equal(p % 16, 0, "16-byte aligned");
      live.set(p, a.blockBytes(p)!);
    }
    if (i % 250 === 0) {
      const spans = [...live].sort((x, y) => x[0] - y[0]);
      for (let k = 1; k < spans.length; k++) assert.ok(spans[k - 1]![0] + spans[k - 1]![1] <= spans[k]![0], "blocks overlap");
      assert.equal(a.bytesInUse, spans.reduce((s, [, n]) => s + n, 0));
    }
  }
  for (const p of live.keys()) a.release(p);
  assert.equal(a.bytesInUse, 0);
  assert.equal(a.freeBytes, 0, "everything coalesced back into the top");
  const reserved = mem.buffer.byteLength;
  assert.equal(a.alloc(a.highWater - 64 - 64), 64, "one block as large as the high-water mark fits without growing");
  assert.equal(mem.buffer.byteLength, reserved);
});

test("arena: reclaim runs before the memory grows and its releases are reused", () => {
  const mem = memory(1, (4 * RECLAIM_MIN) / PAGE);
  const a = new Arena(mem, 0);
  const dead: number[] = [];
  let calls = 0;
  a.reclaim = () => {
    calls++;
    a.alloc(64); // an allocation inside does not recurse into another reclaim
    for (const p of dead.splice(0)) a.release(p);
  };
  // a window of garbage (a collection is only worth it once the bytes in use grew by RECLAIM_MIN)
  for (let i = 0; i < WINDOW; i++) dead.push(a.alloc(1 << 20));
  const reserved = mem.buffer.byteLength;
  const p = a.alloc(1 << 20);
  assert.equal(calls, 1);
  assert.equal(p, 0, "the collected garbage serves the request");
  assert.equal(mem.buffer.byteLength, reserved, "no growth");
  // the bytes in use did not grow enough since: the next growth does not collect again
  a.alloc(reserved);
  assert.equal(calls, 1);
  assert.ok(mem.buffer.byteLength > reserved);
});

/** A memory that only counts its size (the arena never touches the bytes): big arenas cost nothing. */
function sizeOnly(): { buffer: { byteLength: number }; grow(pages: number): number } {
  const m = { buffer: { byteLength: PAGE }, grow: (p: number) => ((m.buffer = { byteLength: m.buffer.byteLength + p * PAGE }), 0) };
  return m;
}

test("arena: memory that stays live grows with a bounded number of reclaims", () => {
  const a = new Arena(sizeOnly() as unknown as WebAssembly.Memory, 0);
  let calls = 0;
  a.reclaim = () => void calls++; // finds nothing: everything is live
  const live: number[] = [];
  for (let i = 0; i < 1024; i++) live.push(a.alloc(1 << 20)); // 1 GiB, 1 MiB at a time
  // geometric steps: at RECLAIM_MIN, then every 1/8 more while that is larger, else every RECLAIM_MIN
  let expect = 0;
  for (let floor = 0; floor + Math.max(WINDOW, floor / 8) <= 1024; floor += Math.max(WINDOW, floor / 8)) expect++;
  assert.ok(calls >= expect - 1 && calls <= expect + 1, `${calls} reclaims (about ${expect})`);
  // freeing lowers the mark a reclaim is measured from: new garbage is collected again
  for (const q of live.splice(0, 512)) a.release(q);
  const before = calls;
  for (let i = 0; i < 600; i++) a.alloc(1 << 20);
  assert.ok(calls > before, "a reclaim once the bytes in use grew again");
});

test("arena: a reclaim that throws leaves the arena usable", () => {
  const a = new Arena(memory(1, (4 * RECLAIM_MIN) / PAGE), 0);
  a.reclaim = () => {
    throw new Error("boom");
  };
  for (let i = 0; i < WINDOW; i++) a.alloc(1 << 20);
  assert.throws(() => a.alloc(1 << 20), /boom/);
  assert.equal(a.bytesInUse, RECLAIM_MIN);
  a.reclaim = null;
  assert.equal(a.alloc(64), RECLAIM_MIN);
});

test("arena: the memory grows by whole pages, only as far as needed", () => {
  const mem = memory(1, 64);
  const a = new Arena(mem, 0);
  a.alloc(3 * PAGE);
  assert.equal(mem.buffer.byteLength, 4 * PAGE, "3 pages and the 64 bytes of slack past the top");
});
