// When torchts forces a full garbage collection (runtime/memory.ts): the wasm arena collects
// before it grows, once its reclaim window filled (device/cpu/wasm/arena.ts), and the host read
// that ends a step collects again only when that step made the garbage itself. Its own process
// (node's test runner runs each file in one): the arena starts small, so the window fills.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { collectionCounts } from "../../src/runtime/memory.js";
import { RECLAIM_MIN } from "../../src/device/cpu/wasm/arena.js";

const MiB = 2 ** 20;

test("collections: steps smaller than the arena's reclaim window are collected once per window, not again at the next host read", async () => {
  assert.ok(globalThis.gc, "run with --expose-gc");
  globalThis.gc();
  await new Promise((r) => setTimeout(r, 0));
  const base = torch.memory.stats().liveBytes;
  const x = torch.randn(1024, 1024); // 4 MiB
  // 12 MiB of garbage a step, unreferenced once its loss is read: the window (128 MiB) fills every ~10 steps
  const step = () => {
    let h = x;
    for (let i = 0; i < 3; i++) h = h.mul(1.0001);
    return h.sum();
  };
  torch.memory.resetPeakStats();
  const c0 = collectionCounts();
  const steps = Math.ceil((3.5 * RECLAIM_MIN) / (12 * MiB));
  for (let i = 0; i < steps; i++) await step().item();
  const c1 = collectionCounts();
  const byArena = c1.total - c0.total - (c1.atYield - c0.atYield);
  assert.ok(byArena >= 3, `the arena collected before growing (${byArena} times in ${steps} steps)`);
  assert.equal(c1.atYield - c0.atYield, 0, "no host read collected again after a window of several steps' garbage");
  // what the skipped collections would have freed waits for the next window: memory stays bounded by it
  const peak = torch.memory.stats().peakBytes - base;
  assert.ok(peak < RECLAIM_MIN + 3 * 12 * MiB + 8 * MiB, `peak ${(peak / MiB).toFixed(1)} MiB`);
});

test("collections: a step that makes more garbage than the window is collected again by the host read that ends it", async () => {
  const base = torch.memory.stats().liveBytes;
  const x = torch.randn(1024, 1024);
  const step = () => {
    let h = x;
    for (let i = 0; i < (2 * RECLAIM_MIN) / (4 * MiB); i++) h = h.mul(1.0001); // two windows
    return h.sum();
  };
  const c0 = collectionCounts();
  await step().item();
  const c1 = collectionCounts();
  assert.ok(c1.total - c0.total - (c1.atYield - c0.atYield) >= 1, "the arena collected during the step");
  assert.equal(c1.atYield - c0.atYield, 1, "and the host read collected what the step left");
  const left = torch.memory.stats().liveBytes - base;
  assert.ok(left < 8 * MiB, `${(left / MiB).toFixed(1)} MiB left live after the step's host read`);
});
