// nn.init: gains and fans vs PyTorch, distribution bounds/moments of every initialiser, and
// the default initialisation of layers.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";

const init = torch.nn.init;
const nn = torch.nn;

async function moments(t: torch.Tensor) {
  const a = Array.from(await t.data());
  const mean = a.reduce((s, v) => s + v, 0) / a.length;
  const std = Math.sqrt(a.reduce((s, v) => s + (v - mean) ** 2, 0) / (a.length - 1));
  return { mean, std, min: Math.min(...a), max: Math.max(...a) };
}

test("calculateGain and fans match PyTorch", () => {
  // torch.nn.init.calculate_gain for linear, conv2d, sigmoid, tanh, relu, selu, leaky_relu, leaky_relu(0.2)
  const ref = [1, 1, 1, 1.6666666666666667, 1.4142135623730951, 0.75];
  (["linear", "conv2d", "sigmoid", "tanh", "relu", "selu"] as const).forEach((n, i) => assert.equal(init.calculateGain(n), ref[i]));
  assert.ok(Math.abs(init.calculateGain("leaky_relu") - 1.4141428569978354) < 1e-15);
  assert.ok(Math.abs(init.calculateGain("leaky_relu", 0.2) - 1.3867504905630728) < 1e-15);
  assert.deepEqual(init.calculateFanInAndFanOut(torch.empty(8, 3, 5, 5)), [75, 200]);
  assert.throws(() => init.calculateFanInAndFanOut(torch.empty(4)), /Fan in and fan out can not be computed for tensor with fewer than 2 dimensions/);
  assert.throws(() => init.calculateGain("swish" as never), /Unsupported nonlinearity swish/);
});

test("uniform_, normal_, constant_, zeros_, ones_, eye_", async () => {
  torch.manualSeed(1);
  const u = await moments(init.uniform_(torch.empty(20000), -2, 4));
  assert.ok(u.min >= -2 && u.max < 4);
  assert.ok(Math.abs(u.mean - 1) < 0.05 && Math.abs(u.std - Math.sqrt(3)) < 0.05);
  const n = await moments(init.normal_(torch.empty(20000), 3, 0.5));
  assert.ok(Math.abs(n.mean - 3) < 0.02 && Math.abs(n.std - 0.5) < 0.02);
  assert.deepEqual(await init.constant_(torch.empty(3), 0.25).tolist(), [0.25, 0.25, 0.25]);
  assert.deepEqual(await init.zeros_(torch.ones(2)).tolist(), [0, 0]);
  assert.deepEqual(await init.ones_(torch.zeros(2)).tolist(), [1, 1]);
  assert.deepEqual(await init.eye_(torch.empty(2, 3)).tolist(), [[1, 0, 0], [0, 1, 0]]);
  // works on leaf parameters (runs under noGrad) and honours a generator
  const p = new nn.Parameter(torch.empty(4));
  const g1 = new torch.Generator(7);
  const g2 = new torch.Generator(7);
  init.normal_(p, 0, 1, { generator: g1 });
  assert.deepEqual(await p.tolist(), await init.normal_(torch.empty(4), 0, 1, { generator: g2 }).tolist());
});

test("xavier and kaiming follow PyTorch's fan/gain rules", async () => {
  torch.manualSeed(2);
  const w = torch.empty(200, 300);
  // xavier_uniform: a = gain * sqrt(6 / (fan_in + fan_out))
  const a = Math.sqrt(6 / 500);
  const xu = await moments(init.xavierUniform_(w));
  assert.ok(xu.min >= -a && xu.max <= a && xu.max > 0.95 * a);
  const xn = await moments(init.xavierNormal_(w, 2));
  assert.ok(Math.abs(xn.std - 2 * Math.sqrt(2 / 500)) < 0.003);
  // kaiming_uniform(fan_in, leaky_relu a=0): bound = sqrt(2) * sqrt(3 / fan_in)
  const kb = Math.SQRT2 * Math.sqrt(3 / 300);
  const ku = await moments(init.kaimingUniform_(w));
  assert.ok(ku.min >= -kb && ku.max <= kb && ku.max > 0.95 * kb);
  const kn = await moments(init.kaimingNormal_(w, { mode: "fan_out", nonlinearity: "relu" }));
  assert.ok(Math.abs(kn.std - Math.SQRT2 / Math.sqrt(200)) < 0.002);
  assert.ok(Math.abs(kn.mean) < 0.002);
});

test("truncNormal_ stays inside [a, b] with the truncated moments", async () => {
  torch.manualSeed(3);
  const t = await moments(init.truncNormal_(torch.empty(40000)));
  assert.ok(t.min >= -2 && t.max <= 2);
  // std of N(0,1) truncated to [-2, 2] is 0.8796
  assert.ok(Math.abs(t.mean) < 0.02 && Math.abs(t.std - 0.8796) < 0.02, `${t.mean} ${t.std}`);
  const s = await moments(init.trunc_normal_(torch.empty(40000), 1, 0.02, 0.98, 1.02));
  assert.ok(s.min >= 0.98 && s.max <= 1.02 && Math.abs(s.mean - 1) < 0.001);
});

test("layers use PyTorch's default initialisation", async () => {
  torch.manualSeed(4);
  const lin = new nn.Linear(64, 500);
  const b = 1 / Math.sqrt(64); // kaiming_uniform(a=sqrt(5)) == U(-1/sqrt(fan_in), 1/sqrt(fan_in))
  const w = await moments(lin.weight);
  assert.ok(w.min >= -b && w.max <= b && w.max > 0.95 * b && Math.abs(w.std - b / Math.sqrt(3)) < 0.003);
  const bb = await moments(lin.bias!);
  assert.ok(bb.min >= -b && bb.max <= b);
  const conv = new nn.Conv2d(4, 50, 3);
  const cb = 1 / Math.sqrt(36);
  const cw = await moments(conv.weight);
  assert.ok(cw.min >= -cb && cw.max <= cb && cw.max > 0.9 * cb);
  const emb = await moments(new nn.Embedding(1000, 20).weight);
  assert.ok(Math.abs(emb.mean) < 0.03 && Math.abs(emb.std - 1) < 0.03);
  const ln = new nn.LayerNorm(5);
  assert.deepEqual(await ln.weight!.tolist(), [1, 1, 1, 1, 1]);
  assert.deepEqual(await ln.bias!.tolist(), [0, 0, 0, 0, 0]);
  const mha = new nn.MultiheadAttention(16, 4);
  assert.deepEqual(await mha.inProjBias!.tolist(), new Array(48).fill(0));
  assert.deepEqual(await mha.outProj.bias!.tolist(), new Array(16).fill(0));
  const xb = Math.sqrt(6 / (16 + 48));
  const iw = await moments(mha.inProjWeight!);
  assert.ok(iw.min >= -xb && iw.max <= xb);
});
