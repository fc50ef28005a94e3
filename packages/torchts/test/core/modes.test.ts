// Eager modes: debug, strict and fused compute the same values; fused defers work until a
// value is needed; strict compiles once per (op, shapes, dtypes), never per scalar value.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import * as torch from "../../src/index.js";

const MODES = ["debug", "strict", "fused"] as const;
const pkgRoot = fileURLToPath(new URL("../..", import.meta.url));

/** A little of everything: broadcasting, views, reductions, matmul, in-place, RNG and backward. */
async function workload() {
  torch.manualSeed(7);
  const x = torch.randn(4, 3);
  const w = torch.linspace(-1, 1, 6).view(3, 2).requiresGrad_();
  const h = x
    .matmul(w)
    .tanh()
    .add(torch.tensor([0.5, -0.25]));
  const p = h.sub(h.logsumexp(-1, true)).exp();
  const loss = p
    .select(1, 0)
    .mul(x.t().narrow(0, 0, 1).squeeze(0))
    .sum()
    .add(h.pow(2).mean());
  loss.backward();
  const buf = torch.zeros(2, 3);
  buf.select(0, 1).add_(x.sum(0));
  return {
    loss: await loss.item(),
    p: await p.tolist(),
    grad: await w.grad!.tolist(),
    buf: await buf.tolist(),
    argmax: await x.argmax(1).tolist(),
  };
}

test("modes: the same computation gives identical results in debug, strict and fused", async () => {
  const results = [];
  for (const m of MODES) results.push(await torch.withEagerMode(m, workload));
  assert.deepEqual(results[1], results[0]);
  assert.deepEqual(results[2], results[0]);
  assert.ok(Number.isFinite(results[0]!.loss));
});

test("modes: fused mode defers all kernels until a value is read", async () => {
  torch.compiler.resetCache();
  await torch.withEagerMode("fused", async () => {
    const x = torch.arange(6, { dtype: "float32" }).view(2, 3);
    const y = x.mul(2).add(1).exp().sum(1);
    const before = torch.compiler.cacheStats();
    assert.equal(before.hits + before.misses, 0, "nothing compiled or run before the read");
    // exp(1)+exp(3)+exp(5) and exp(7)+exp(9)+exp(11), rounded to float32 (PyTorch: 171.2170, 69073.8594)
    const v = (await y.tolist()) as number[];
    assert.ok(Math.abs(v[0]! - 171.21698) < 1e-3 && Math.abs(v[1]! - 69073.859) < 1e-1, String(v));
    assert.ok(torch.compiler.cacheStats().misses > 0, "the read ran the pending kernels");
  });
});

test("modes: fused mode flushes on item, tolist, printing and torch.sync", async () => {
  await torch.withEagerMode("fused", async () => {
    // kernels run so far (the profiler records each one; a flush whose plan is reused looks no
    // executable up in the compile cache, so the cache's counters would not show it)
    const prof = torch.profiler.profile();
    try {
      const ran = () => prof.events.length;
      const make = () =>
        torch
          .ones(3)
          .mul(4)
          .add(torch.tensor(-1, { dtype: "float32" }));
      make(); // the first flush of this graph builds its kernels: the ones below only run them

      let n = ran();
      const a = make();
      assert.equal(ran(), n);
      assert.equal(await a.sum().item(), 9);
      assert.ok(ran() > n, "item flushed");

      n = ran();
      const b = make();
      assert.equal(ran(), n);
      assert.deepEqual(await b.tolist(), [3, 3, 3]);
      assert.ok(ran() > n, "tolist flushed");

      n = ran();
      const c = make();
      assert.equal(String(c), "tensor([3., 3., 3.])");
      assert.ok(ran() > n, "printing flushed");

      n = ran();
      const d = make();
      assert.equal(ran(), n);
      torch.sync();
      const afterSync = ran();
      assert.ok(afterSync > n, "sync flushed");
      assert.deepEqual(await d.tolist(), [3, 3, 3]);
      assert.equal(ran(), afterSync, "nothing left to run after sync");
    } finally {
      prof.stop(); // a failed assertion must not leave the profiler recording for later tests
    }
  });
});

test("modes: strict mode does not recompile for different scalar values", async () => {
  await torch.withEagerMode("strict", async () => {
    const x = torch.arange(8, { dtype: "float32" });
    const f = (s: number) =>
      x
        .mul(s)
        .add(s)
        .clamp(-s, 4 * s)
        .sum();
    assert.equal(await f(1).item(), 26);
    const misses = torch.compiler.cacheStats().misses;
    const results = [];
    for (const s of [2, 3.5, 0.25, 100]) results.push(await f(s).item());
    assert.equal(torch.compiler.cacheStats().misses, misses, "no new compilations");
    assert.deepEqual(results, [52, 91, 6.5, 2600]); // PyTorch's values
    torch.full([8], 3.25);
    torch.full([8], -9);
    assert.equal(torch.compiler.cacheStats().misses, misses + 2, "full compiles once per dtype, not per value");
  });
});

test("modes: setEagerMode, getEagerMode and withEagerMode (sync and async)", async () => {
  const start = torch.getEagerMode();
  assert.equal(start, "strict", "strict is the default");
  torch.setEagerMode("debug");
  assert.equal(torch.getEagerMode(), "debug");
  assert.equal(
    torch.withEagerMode("fused", () => torch.getEagerMode()),
    "fused",
  );
  assert.equal(torch.getEagerMode(), "debug");
  assert.throws(
    () =>
      torch.withEagerMode("fused", () => {
        throw new Error("boom");
      }),
    /boom/,
  );
  assert.equal(torch.getEagerMode(), "debug", "restored after a throw");
  const p = torch.withEagerMode("fused", async () => {
    await new Promise((r) => setTimeout(r, 1));
    return torch.getEagerMode();
  });
  assert.equal(await p, "fused");
  assert.equal(torch.getEagerMode(), "debug", "restored after the promise settles");
  assert.throws(() => torch.setEagerMode("turbo" as never), /debug.*strict.*fused/);
  torch.setEagerMode(start);
});

function runChild(env: Record<string, string>, code: string) {
  return spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], {
    cwd: pkgRoot,
    env: { ...process.env, ...env },
    encoding: "utf8",
  });
}

test("modes: TORCHTS_EAGER_MODE selects the initial mode", () => {
  const code = `import * as torch from "./src/index.ts"; console.log(torch.getEagerMode(), await torch.ones(2).add(1).sum().item());`;
  for (const m of MODES) {
    const r = runChild({ TORCHTS_EAGER_MODE: m }, code);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), `${m} 4`);
  }
  const bad = runChild({ TORCHTS_EAGER_MODE: "bogus" }, code);
  assert.notEqual(bad.status, 0);
  assert.match(bad.stderr, /TORCHTS_EAGER_MODE must be one of debug, strict, fused \(got 'bogus'\)/);
});

test("modes: debug mode with anomaly detection raises on NaN, naming the op and the call site", () => {
  torch.withEagerMode("debug", () => {
    torch.setDetectAnomaly(true);
    try {
      const x = torch.tensor([-1, 4], { dtype: "float32" });
      assert.throws(
        () => x.log(),
        (e: Error) => {
          assert.match(e.message, /Function 'log' returned nan values in its output/);
          assert.match(e.message, /modes\.test\.ts:\d+/, "names the user's call site");
          return true;
        },
      );
      assert.throws(() => x.sqrt(), /'sqrt' returned nan/);
      // finite results pass, and anomaly detection off lets NaN through
      assert.deepEqual(x.abs().sqrt()._tolistSync(), [1, 2]);
    } finally {
      torch.setDetectAnomaly(false);
    }
    assert.equal(torch.isAnomalyEnabled(), false);
    const y = torch.tensor([-1], { dtype: "float32" }).log();
    assert.ok(Number.isNaN((y._tolistSync() as number[])[0]));
  });
});
