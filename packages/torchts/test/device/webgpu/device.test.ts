// PyTorch device semantics on webgpu: placement, moves, mixed-device errors, async reads,
// synchronize/memoryStats, the out-of-memory path and the int64/float64 policy.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import { skip } from "./setup.js";

test("isAvailable, device placement and .to('webgpu')", { skip }, async () => {
  assert.equal(await torch.webgpu.isAvailable(), true);
  assert.equal(torch.webgpu.isInitialized(), true);
  const x = torch.tensor([[1, 2], [3, 4]], { dtype: "float32" });
  const g = x.to("webgpu");
  assert.equal(g.device, "webgpu");
  assert.equal(torch.zeros(2, { device: "webgpu" }).device, "webgpu");
  assert.deepEqual(await g.mul(2).tolist(), [[2, 4], [6, 8]]);
  assert.equal(await g.sum().item(), 10);
  const back = await g.add(1).cpuAsync();
  assert.equal(back.device, "cpu");
  assert.deepEqual(await back.tolist(), [[2, 3], [4, 5]]);
  assert.deepEqual(await (await g.toAsync("cpu")).tolist(), [[1, 2], [3, 4]]);
});

test("sync reads of webgpu tensors raise a clear error (use the async forms)", { skip }, () => {
  const g = torch.ones(2, { device: "webgpu" });
  assert.throws(() => g.cpu(), /webgpu tensors cannot be read synchronously: use await t\.data\(\).*cpuAsync/);
  assert.match(String(g), /webgpu/); // printing does not read device memory
});

test("ops mixing devices raise PyTorch's error", { skip }, () => {
  const a = torch.ones(2, { device: "webgpu" });
  const b = torch.ones(2);
  assert.throws(() => a.add(b), /Expected all tensors to be on the same device, but found at least two devices, (webgpu and cpu|cpu and webgpu)!/);
  assert.throws(() => torch.matmul(torch.ones(2, 2), torch.ones(2, 2, { device: "webgpu" })), /Expected all tensors to be on the same device/);
});

test("module.to('webgpu') moves parameters; gradients flow on the device", { skip }, async () => {
  torch.manualSeed(0);
  const cpuLin = new torch.nn.Linear(3, 2);
  const gpuLin = new torch.nn.Linear(3, 2);
  gpuLin.loadStateDict(cpuLin.stateDict());
  gpuLin.to("webgpu");
  for (const p of gpuLin.parameters()) {
    assert.equal(p.device, "webgpu");
    assert.ok(p.isLeaf && p.requiresGrad);
  }
  const x = torch.tensor([[1, -2, 3], [0.5, 0, -1]], { dtype: "float32" });
  cpuLin.forward(x).pow(2).sum().backward();
  gpuLin.forward(x.to("webgpu")).pow(2).sum().backward();
  const want = await cpuLin.weight.grad!.data();
  const got = await gpuLin.weight.grad!.data();
  for (let i = 0; i < want.length; i++) assert.ok(Math.abs(got[i]! - want[i]!) < 1e-5, `grad[${i}] ${got[i]} vs ${want[i]}`);
});

test("synchronize and memoryStats; the pool recycles freed buffers", { skip }, async () => {
  await torch.webgpu.synchronize();
  const before = torch.webgpu.memoryStats();
  for (let i = 0; i < 5; i++) {
    const o = torch.ones(1000, { device: "webgpu" });
    const t = o.mul(2);
    o.dispose();
    t.dispose();
  }
  await torch.webgpu.synchronize();
  const after = torch.webgpu.memoryStats();
  assert.ok(after.poolHits > before.poolHits, "freed buffers are reused");
  assert.ok(after.liveBytes <= before.liveBytes + 8192);
  for (const k of ["liveBytes", "pooledBytes", "peakBytes", "pipelines", "dispatches", "submits"] as const)
    assert.equal(typeof after[k], "number");
});

test("out of memory: the pool is emptied and the allocation retried once, then a clear error", { skip }, async () => {
  await torch.webgpu.synchronize();
  torch.webgpu.emptyCache();
  const s0 = torch.webgpu.memoryStats();
  const MB = 1 << 20;
  torch.webgpu.setMemoryLimit(s0.liveBytes + 3 * MB + 64 * 1024); // slack for small scalars
  try {
    const a = torch.zeros(MB / 4, { device: "webgpu" }); // 1 MiB
    const b = torch.zeros(MB / 4, { device: "webgpu" });
    b.dispose(); // pooled, still counted against the limit
    assert.equal(torch.webgpu.memoryStats().pooledBytes, MB);
    const retries = torch.webgpu.memoryStats().oomRetries;
    const c = torch.zeros((2 * MB) / 4, { device: "webgpu" }); // fits only once the pool is emptied
    const s = torch.webgpu.memoryStats();
    assert.equal(s.oomRetries, retries + 1);
    assert.equal(s.pooledBytes, 0);
    assert.throws(() => torch.zeros(MB / 4, { device: "webgpu" }), (e: Error) => {
      assert.equal(e.name, "OutOfMemoryError");
      assert.match(e.message, /webgpu: out of memory: tried to allocate 1\.00 MiB with .* in use and a limit of .*retried/);
      return true;
    });
    assert.equal(await c.sum().item(), 0);
    a.dispose();
  } finally {
    torch.webgpu.setMemoryLimit(Infinity);
  }
});

test("int64/float64 policy: int64 is int32 on the device (out-of-range raises), float64 computes in float32", { skip }, async () => {
  const i = torch.tensor([1, -2, 2147483647], { device: "webgpu" });
  assert.equal(i.dtype, "int64");
  assert.deepEqual(await i.tolist(), [1, -2, 2147483647]);
  assert.throws(() => torch.tensor([2 ** 40], { device: "webgpu" }), /value 1099511627776 does not fit the device's 32-bit integer storage for int64/);
  assert.throws(() => torch.full([2], 2 ** 33, { dtype: "int64", device: "webgpu" }), /does not fit the device's 32-bit integer storage/);
  const d = torch.tensor([1 / 3], { dtype: "float64", device: "webgpu" });
  assert.equal(d.dtype, "float64");
  const v = (await d.data())[0]!;
  assert.equal(v, Math.fround(1 / 3), "float64 values are float32-rounded on webgpu");
  assert.ok((await d.data()) instanceof Float64Array);
});

test("debug mode submits each op and reports device errors at the next sync point", { skip }, async () => {
  await torch.withEagerMode("debug", async () => {
    torch.setDetectAnomaly(true);
    try {
      const x = torch.tensor([-1, 4], { dtype: "float32", device: "webgpu" });
      const y = x.sqrt();
      await assert.rejects(y.data(), /Function 'sqrt' returned nan values in its output \(element 0\) on webgpu/);
      assert.deepEqual(await x.abs().sqrt().tolist(), [1, 2]);
    } finally {
      torch.setDetectAnomaly(false);
    }
  });
});

test("a missing op raises NotImplementedError; with setCpuFallback(true) it runs on cpu, warning once", { skip }, async (t) => {
  torch.webgpu.setDisabledPrimitives(["argsort", "scan"]);
  const warn = t.mock.method(console, "warn", () => {});
  try {
    const x = torch.tensor([3, 1, 2, 5, 4], { dtype: "float32", device: "webgpu" });
    assert.throws(() => x.argsort(), (e: Error) => {
      assert.equal(e.name, "NotImplementedError");
      assert.match(e.message, /The operator 'argsort' \(primitive 'argsort'\) is not currently implemented for the webgpu device\. Call torch\.setCpuFallback\(true\)/);
      return true;
    });
    torch.setCpuFallback(true);
    // device work before and after the fallback keeps program order
    const y = x.mul(2).argsort();
    const z = x.cumsum(0).add(1);
    assert.equal(y.device, "webgpu");
    assert.deepEqual(await y.tolist(), [1, 2, 0, 4, 3]);
    assert.deepEqual(await z.tolist(), [4, 5, 7, 12, 16]);
    assert.deepEqual(await x.argsort({ descending: true }).add(0).tolist(), [3, 4, 0, 2, 1]);
    const names = warn.mock.calls.map((c) => String(c.arguments[0]));
    assert.equal(names.filter((m) => m.includes("'argsort'")).length, 1, "one warning per op");
    assert.equal(names.filter((m) => m.includes("'cumsum'")).length, 1);
    assert.match(names[0]!, /is not currently supported on the webgpu device, and is falling back to run on the cpu/);
  } finally {
    torch.setCpuFallback(false);
    torch.webgpu.setDisabledPrimitives([]);
    warn.mock.restore();
  }
});

test("writes through views (one strided-scatter pass over the base) match cpu, gradients included", { skip }, async () => {
  const run = async (device: "cpu" | "webgpu") => {
    const base = torch.arange(24, { dtype: "float32" }).reshape(2, 3, 4).to(device);
    base.select(1, 2).fill_(-1);
    base.transpose(1, 2).narrow(1, 1, 2).add_(100); // a strided view
    base.narrow(2, 3, 1).copy_(torch.full([2, 3, 1], 7, { dtype: "float32" }).to(device));
    const x = torch.ones(2, 5).to(device).requiresGrad_();
    const z = torch.full([2, 2], 3, { dtype: "float32" }).to(device).requiresGrad_();
    const y = x.mul(2);
    y.narrow(1, 1, 2).copy_(z.mul(z));
    y.mul(torch.arange(10, { dtype: "float32" }).reshape(2, 5).to(device)).sum().backward();
    return [await base.data(), await x.grad!.data(), await z.grad!.data()].map((a) => Array.from(a));
  };
  assert.deepEqual(await run("webgpu"), await run("cpu"));
  const [, gx, gz] = await run("cpu");
  assert.deepEqual(gx, [0, 0, 0, 6, 8, 10, 0, 0, 16, 18]); // the written region gets no gradient
  assert.deepEqual(gz, [6, 12, 36, 42]); // 2 z * position
});
