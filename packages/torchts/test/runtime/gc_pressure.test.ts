// What keeps a fused step's records from reaching V8's old generation (runtime/storage.ts
// PendingList and stand-ins, runtime/memory.ts registry tokens, runtime/v8_tuning.ts): after a
// flush nothing long-lived references the nodes it left pending, those nodes still compute the
// values they were recorded against whatever happens to their inputs later, and the buffers the
// stand-ins took over go back when the collector finds them unreachable.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { PendingList, Storage, pendingSet } from "../../src/runtime/storage.js";
import { trackAlloc, trackFree, type BufferOwner } from "../../src/runtime/memory.js";
import { tuneV8 } from "../../src/runtime/v8_tuning.js";
import { cpu } from "../../src/device/cpu/index.js";

const st = (t: torch.Tensor): Storage => t._storage;

async function collectGarbage(): Promise<void> {
  for (let i = 0; i < 4; i++) {
    globalThis.gc?.();
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** x (long-lived), a = x * 2 (fused into b's kernel, so left pending by the flush), b = a + 1 (materialized). */
function leftPending(): { x: torch.Tensor; a: torch.Tensor; b: torch.Tensor } {
  const x = torch.tensor([1, 2, 3]);
  const a = x.mul(2);
  const b = a.add(1);
  torch.sync();
  return { x, a, b };
}

test("stand-ins: after a flush, a long-lived input lists none of the nodes it left pending; they read a stand-in", () => {
  torch.withEagerMode("fused", () => {
    const { x, a, b } = leftPending();
    assert.ok(st(b).buf, "b was materialized");
    assert.equal(st(a).buf, null, "a was fused into b's kernel and left pending");
    assert.equal(st(x).readers, null, "x forgot its readers");
    const read = st(a).pending!.inputs.map((v) => v.storage);
    assert.ok(!read.includes(st(x)), "a no longer reads x itself");
    const standIn = read.find((s) => s.lender === st(x));
    assert.ok(standIn, "a reads x's buffer through a stand-in");
    assert.equal(standIn.buf, st(x).buf, "the stand-in reads x's buffer");
    assert.ok(st(x).lent());
    assert.equal(pendingSet.size, 0);
  });
});

test("stand-ins: a value left pending keeps the value it was recorded against through in-place writes and dispose()", async () => {
  for (const writeMode of ["fused", "strict"] as const) {
    const { x, a } = torch.withEagerMode("fused", leftPending);
    const standIn = st(a).pending!.inputs.find((v) => v.storage.lender === st(x))!.storage;
    const old = st(x).buf;
    await torch.withEagerMode(writeMode, async () => {
      x.add_(10); // strict: written into x's own buffer unless a stand-in reads it
      assert.deepEqual(await x.tolist(), [11, 12, 13]);
    });
    assert.equal(standIn.lender, null, "the stand-in owns x's old buffer now");
    assert.equal(standIn.buf, old);
    assert.notEqual(st(x).buf, old);
    assert.deepEqual(await torch.withEagerMode("fused", () => a.tolist()), [2, 4, 6], `a recomputed after a ${writeMode} write`);
    x.dispose();
    assert.deepEqual(await a.tolist(), [2, 4, 6], "and after x's dispose()");
  }
  // disposing the lender first (no write): the stand-in takes the buffer over
  const { x, a } = torch.withEagerMode("fused", leftPending);
  x.dispose();
  assert.deepEqual(await torch.withEagerMode("fused", () => a.tolist()), [2, 4, 6]);
});

test("stand-ins: one per buffer, shared by the flushes that leave readers of it pending", () => {
  torch.withEagerMode("fused", () => {
    const x = torch.tensor([1, 2, 3]);
    const a1 = x.mul(2), b1 = a1.add(1);
    torch.sync();
    const a2 = x.mul(3), b2 = a2.add(1);
    torch.sync();
    const s1 = st(a1).pending!.inputs.find((v) => v.storage.lender === st(x))!.storage;
    const s2 = st(a2).pending!.inputs.find((v) => v.storage.lender === st(x))!.storage;
    assert.equal(s1, s2);
    assert.ok(st(b1).buf && st(b2).buf);
  });
});

test("stand-ins: once the nodes left pending are disposed, the lender frees its own buffer (no collection)", async () => {
  torch.withEagerMode("fused", () => {
    const { x, a } = leftPending();
    assert.ok(st(x).lent());
    a.dispose(); // the only node reading the stand-in
    assert.equal(st(x).lent(), false);
    const before = torch.memory.stats().liveBytes;
    const bytes = st(x).buf!.bytes;
    x.dispose();
    assert.equal(torch.memory.stats().liveBytes, before - bytes, "x's buffer went back at once");
  });
  await torch.withEagerMode("fused", async () => {
    const { x, a } = leftPending();
    assert.deepEqual(await a.tolist(), [2, 4, 6]); // a's node runs now: a is materialized
    assert.ok(st(a).buf !== null && st(a).pending === null);
    assert.equal(st(x).lent(), false, "a no longer reads the stand-in once its node ran");
  });
});

test("stand-ins: the buffer a stand-in took over is freed once nothing reads it", async () => {
  await collectGarbage(); // what earlier tests left
  const before = torch.memory.stats().liveBytes;
  await (async () => {
    const { x, a } = torch.withEagerMode("fused", leftPending);
    torch.withEagerMode("fused", () => x.add_(1)); // the stand-in owns x's old buffer now
    torch.sync();
    assert.ok(torch.memory.stats().liveBytes > before);
    void a;
  })();
  for (let i = 0; i < 50 && torch.memory.stats().liveBytes > before; i++) await collectGarbage();
  assert.equal(torch.memory.stats().liveBytes, before);
});

test("stand-ins: a row write (writeRowsInPlace) never writes a lent buffer (the strict add_ above covers copyIntoInPlace)", async () => {
  const { x, a } = torch.withEagerMode("fused", leftPending);
  await torch.withEagerMode("strict", async () => {
    x.indexCopy_(0, torch.tensor([1], { dtype: "int64" }), torch.tensor([100])); // a row write
    assert.deepEqual(await x.tolist(), [1, 100, 3]);
  });
  assert.deepEqual(await torch.withEagerMode("fused", () => a.tolist()), [2, 4, 6]);
});

test("PendingList: entries in order; sweep and clear overwrite the slots they free", () => {
  const l = new PendingList();
  const s = Array.from({ length: 100 }, () => new Storage(cpu, "float32", 1));
  const refs = s.map((x) => new WeakRef(x));
  for (const r of refs) l.add(r); // grows past its first 64 slots
  assert.equal(l.size, 100);
  assert.deepEqual([...l], refs);
  l.sweep((r) => refs.indexOf(r) % 2 === 1);
  assert.equal(l.size, 50);
  assert.deepEqual([...l], refs.filter((_, i) => i % 2 === 0));
  const slots = (l as unknown as { items: unknown[] }).items;
  assert.ok(slots.slice(50).every((v) => v === undefined), "swept slots hold nothing");
  l.clear();
  assert.equal(l.size, 0);
  assert.deepEqual([...l], []);
  assert.ok((l as unknown as { items: unknown[] }).items.every((v) => v === undefined), "cleared slots hold nothing");
});

test("memory: the finalization registry watches a token the owner holds, not the owner", () => {
  const owner: BufferOwner = { _held: null, _gcToken: null };
  const buf = cpu.allocate("float32", 4);
  trackAlloc(owner, cpu, buf);
  const token = owner._gcToken;
  assert.ok(token !== null && typeof token === "object" && token !== owner);
  assert.equal(Object.keys(token).length, 0, "the token references nothing");
  trackFree(owner, cpu, buf);
  assert.equal(owner._gcToken, null);
});

test("v8 tuning: allocation-site pretenuring is turned off unless TORCHTS_V8_PRETENURING=1; elsewhere nothing happens", () => {
  const set: string[] = [];
  const v8 = { setFlagsFromString: (f: string) => void set.push(f) };
  const proc = (env: Record<string, string>) => ({ env, getBuiltinModule: (m: string) => (m === "node:v8" ? v8 : undefined) });
  assert.deepEqual(tuneV8(proc({})), ["--no-allocation-site-pretenuring"]);
  assert.deepEqual(set, ["--no-allocation-site-pretenuring"]);
  assert.deepEqual(tuneV8(proc({ TORCHTS_V8_PRETENURING: "1" })), []);
  assert.deepEqual(tuneV8(undefined), [], "no process (a browser)");
  assert.deepEqual(tuneV8({ env: {} }), [], "no getBuiltinModule");
  assert.deepEqual(tuneV8({ env: {}, getBuiltinModule: () => { throw new Error("locked"); } }), []);
  assert.equal(set.length, 1);
});
