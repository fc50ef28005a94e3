// nn layers: forward shapes, and values vs PyTorch 1.13 with the same weights copied in
// (modules_oracle.ts, made by modules_oracle.py: every parameter, in namedParameters order,
// is filled with vals(numel, 10 + i) so both sides hold identical weights).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { LAYERS } from "./modules_oracle.js";

const nn = torch.nn;
type T = torch.Tensor;
const vals = (n: number, k: number) => Array.from({ length: n }, (_, i) => Math.round(Math.sin(i * 0.37 + k) * 0.5 * 1e6) / 1e6);
const Tv = (shape: number[], k: number) => torch.tensor(vals(shape.reduce((a, b) => a * b, 1), k)).reshape(shape);
function setp(m: InstanceType<typeof nn.Module>, k0 = 10) {
  let i = 0;
  torch.noGrad(() => {
    for (const p of m.parameters()) p.copy_(Tv(p.shape, k0 + i++));
  });
}
async function close(t: T, ref: number[], tol = 2e-5, what = "") {
  const a = Array.from(await t.data());
  assert.equal(a.length, ref.length, `${what}: numel ${a.length} vs ${ref.length}`);
  a.forEach((v, i) => assert.ok(Math.abs(v - ref[i]!) <= tol * (1 + Math.abs(ref[i]!)), `${what}[${i}]: ${v} vs ${ref[i]}`));
}

test("Linear matches PyTorch and has PyTorch's parameter shapes", async () => {
  const m = new nn.Linear(4, 3);
  assert.deepEqual(m.weight.shape, [3, 4]);
  assert.deepEqual(m.bias!.shape, [3]);
  setp(m);
  const y = m.call(Tv([2, 5, 4], 1));
  assert.deepEqual(y.shape, [2, 5, 3]);
  await close(y, LAYERS.linear, 2e-5, "linear");
  assert.equal(new nn.Linear(2, 2, { bias: false }).bias, null);
  assert.equal(String(new nn.Linear(2, 3)), "Linear(in_features=2, out_features=3, bias=True)");
});

test("Conv2d / Conv1d / ConvTranspose2d match PyTorch", async () => {
  const c = new nn.Conv2d(2, 3, 3, { stride: 2, padding: 1 });
  assert.deepEqual(c.weight.shape, [3, 2, 3, 3]);
  setp(c);
  const y = c.call(Tv([2, 2, 5, 6], 2));
  assert.deepEqual(y.shape, LAYERS.conv2d_shape);
  await close(y, LAYERS.conv2d, 2e-5, "conv2d");
  const cs = new nn.Conv2d(4, 4, [2, 3], { padding: "same", groups: 2, dilation: [1, 2] });
  assert.deepEqual(cs.weight.shape, [4, 2, 2, 3]);
  setp(cs);
  await close(cs.call(Tv([1, 4, 4, 5], 2.5)), LAYERS.conv2d_same, 2e-5, "conv2d same");
  const c1 = new nn.Conv1d(2, 4, 3, { padding: 1 });
  setp(c1);
  await close(c1.call(Tv([2, 2, 5], 10.5)), LAYERS.conv1d, 2e-5, "conv1d");
  const ct = new nn.ConvTranspose2d(2, 3, 3, { stride: 2, padding: 1, outputPadding: 1 });
  assert.deepEqual(ct.weight.shape, [2, 3, 3, 3]);
  setp(ct);
  const yt = ct.call(Tv([1, 2, 3, 3], 9.5));
  assert.deepEqual(yt.shape, LAYERS.convT_shape);
  await close(yt, LAYERS.convT, 2e-5, "convT");
});

test("LayerNorm / GroupNorm match PyTorch; RMSNorm normalises by the rms", async () => {
  const ln = new nn.LayerNorm([3, 4]);
  setp(ln);
  await close(ln.call(Tv([2, 3, 4], 3).mul(3)), LAYERS.layernorm, 2e-5, "layernorm");
  const gn = new nn.GroupNorm(2, 4);
  setp(gn);
  await close(gn.call(Tv([2, 4, 3], 9)), LAYERS.groupnorm, 2e-5, "groupnorm");
  const rn = new nn.RMSNorm(4, { eps: 1e-6 });
  const x = torch.tensor([[1, 2, 3, 4]], { dtype: "float32" });
  const rms = Math.sqrt((1 + 4 + 9 + 16) / 4 + 1e-6);
  await close(rn.call(x), [1, 2, 3, 4].map((v) => v / rms), 1e-6, "rmsnorm");
  assert.deepEqual([...rn.stateDict().keys()], ["weight"]);
});

test("BatchNorm2d train (running stats, numBatchesTracked) and eval match PyTorch", async () => {
  const bn = new nn.BatchNorm2d(3, { momentum: 0.2 });
  setp(bn);
  assert.deepEqual([...bn.stateDict().keys()], ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]);
  const x = Tv([4, 3, 2, 2], 4).mul(2).add(0.3);
  await close(bn.call(x), LAYERS.bn_train, 2e-5, "bn train");
  await close(bn.call(x.mul(0.5).add(1)), LAYERS.bn_train2, 2e-5, "bn train 2");
  await close(bn.runningMean!, LAYERS.bn_rm, 2e-6, "running_mean");
  await close(bn.runningVar!, LAYERS.bn_rv, 2e-6, "running_var");
  assert.equal(await bn.numBatchesTracked!.item(), LAYERS.bn_nbt);
  bn.eval();
  await close(bn.call(x), LAYERS.bn_eval, 2e-5, "bn eval");
  assert.equal(await bn.numBatchesTracked!.item(), LAYERS.bn_nbt, "eval does not count batches");

  const b1 = new nn.BatchNorm1d(3, { momentum: null });
  const x1 = Tv([5, 3], 4.5);
  b1.call(x1);
  b1.call(x1.mul(2));
  await close(b1.runningMean!, LAYERS.bn1d_cma_rm, 2e-6, "cma mean");
  await close(b1.runningVar!, LAYERS.bn1d_cma_rv, 2e-6, "cma var");
  assert.throws(() => b1.call(torch.zeros(2, 3, 4, 5)), /expected 2D or 3D input \(got 4D input\)/);
});

test("MultiheadAttention (batchFirst, key padding mask, causal mask, per-head weights) matches PyTorch", async () => {
  const m = new nn.MultiheadAttention(8, 2, { batchFirst: true });
  assert.deepEqual([...m.namedParameters()].map(([n, p]) => `${n}:${p.shape}`), [
    "in_proj_weight:24,8", "in_proj_bias:24", "out_proj.weight:8,8", "out_proj.bias:8",
  ]);
  setp(m);
  const q = Tv([2, 3, 8], 5), k = Tv([2, 4, 8], 6), v = Tv([2, 4, 8], 7);
  const kpm = torch.tensor([[false, false, false, true], [false, false, false, false]]);
  const [out, w] = m.call(q, k, v, { keyPaddingMask: kpm });
  assert.deepEqual(out.shape, [2, 3, 8]);
  assert.deepEqual(w!.shape, [2, 3, 4]);
  await close(out, LAYERS.mha_out, 2e-5, "mha out");
  await close(w!, LAYERS.mha_w, 2e-5, "mha weights");
  const am = torch.triu(torch.ones([3, 3], { dtype: "bool" }), 1);
  const [o2, w2] = m.call(q, q, q, { attnMask: am, averageAttnWeights: false });
  assert.deepEqual(w2!.shape, [2, 2, 3, 3]);
  await close(o2, LAYERS.mha_self_causal, 2e-5, "mha causal");
  await close(w2!, LAYERS.mha_self_causal_w, 2e-5, "mha causal weights");
  const [o3] = m.call(q, q, q, { isCausal: true, needWeights: false });
  await close(o3, LAYERS.mha_self_causal, 2e-5, "mha isCausal");
  // sequence-first layout gives the same numbers transposed
  const m2 = new nn.MultiheadAttention(8, 2);
  m2.loadStateDict(m.stateDict());
  const [o4] = m2.call(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), { keyPaddingMask: kpm });
  await close(o4.transpose(0, 1).contiguous(), LAYERS.mha_out, 2e-5, "mha seq-first");
});

test("TransformerEncoderLayer post-norm/relu and normFirst/gelu match PyTorch", async () => {
  for (const [nf, act] of [[false, "relu"], [true, "gelu"]] as const) {
    const m = new nn.TransformerEncoderLayer(8, 2, { dimFeedforward: 16, dropout: 0, activation: act, normFirst: nf, batchFirst: true });
    assert.deepEqual([...m.namedParameters()].map(([n]) => n), LAYERS.tel_names);
    setp(m, 20);
    const y = m.call(Tv([2, 3, 8], 8));
    assert.deepEqual(y.shape, [2, 3, 8]);
    await close(y, LAYERS[`tel_${nf ? "True" : "False"}_${act}`], 3e-5, `tel ${nf} ${act}`);
  }
});

test("Bilinear, Embedding, EmbeddingBag (sum/mean/max, offsets, per-sample weights) match PyTorch", async () => {
  const b = new nn.Bilinear(3, 2, 4);
  assert.deepEqual(b.weight.shape, [4, 3, 2]);
  setp(b);
  await close(b.call(Tv([5, 3], 1.5), Tv([5, 2], 2.5)), LAYERS.bilinear, 2e-5, "bilinear");

  const e = new nn.Embedding(5, 3, { paddingIdx: 1 });
  assert.deepEqual(await e.weight.select(0, 1).tolist(), [0, 0, 0]);
  const idx = torch.tensor([[0, 1], [4, 4]]);
  const y = e.call(idx);
  assert.deepEqual(y.shape, [2, 2, 3]);
  await close(y.select(0, 1).select(0, 0), Array.from(await e.weight.select(0, 4).data()), 0, "embedding row");

  const eb = new nn.EmbeddingBag(6, 3, { mode: "sum" });
  setp(eb);
  const inp = torch.tensor([1, 2, 4, 5, 4, 3, 2, 0]);
  const off = torch.tensor([0, 2, 2, 5]);
  await close(eb.call(inp, off), LAYERS.ebag_sum, 2e-6, "ebag sum");
  await close(eb.call(inp, off, Tv([8], 3.3)), LAYERS.ebag_sum_psw, 2e-6, "ebag psw");
  eb.mode = "mean";
  await close(eb.call(inp, off), LAYERS.ebag_mean, 2e-6, "ebag mean");
  eb.mode = "max";
  await close(eb.call(inp, off), LAYERS.ebag_max, 2e-6, "ebag max");
  eb.mode = "sum";
  assert.deepEqual(eb.call(torch.tensor([[0, 1], [2, 3], [4, 5]])).shape, [3, 3]);
});

test("losses as modules match PyTorch", async () => {
  const x = Tv([4, 5], 11).mul(3);
  const t = torch.tensor([1, 0, 4, 2]);
  const y2 = Tv([4, 5], 12);
  const near = async (v: T, ref: number) => assert.ok(Math.abs((await v.item()) - ref) < 2e-5 * (1 + Math.abs(ref)), `${await v.item()} vs ${ref}`);
  await near(new nn.CrossEntropyLoss({ labelSmoothing: 0.1 }).call(x, t), LAYERS.ce);
  await near(new nn.NLLLoss({ reduction: "sum" }).call(torch.nn.functional.logSoftmax(x, 1), t), LAYERS.nll);
  await near(new nn.MSELoss().call(x, y2), LAYERS.mse);
  await near(new nn.L1Loss().call(x, y2), LAYERS.l1);
  const tgt = Tv([4, 5], 13).gt(0).float();
  await near(new nn.BCEWithLogitsLoss({ posWeight: torch.tensor([1, 2, 3, 0.5, 1]) }).call(x, tgt), LAYERS.bce);
});

test("activation, shape, pooling and container layers: forward shapes and values", async () => {
  const x = torch.tensor([[-2, -0.5, 0, 1.5]]);
  assert.deepEqual(await new nn.ReLU().call(x).tolist(), [[0, 0, 0, 1.5]]);
  assert.deepEqual(await new nn.LeakyReLU(0.1).call(x).tolist(), [[-0.2, -0.05, 0, 1.5].map(Math.fround)]);
  await close(new nn.Tanh().call(x), [-2, -0.5, 0, 1.5].map(Math.tanh), 1e-6);
  await close(new nn.Sigmoid().call(x), [-2, -0.5, 0, 1.5].map((v) => 1 / (1 + Math.exp(-v))), 1e-6);
  await close(new nn.SiLU().call(x), [-2, -0.5, 0, 1.5].map((v) => v / (1 + Math.exp(-v))), 1e-6);
  await close(new nn.GELU().call(x), [-0.0455001, -0.15426879, 0, 1.39978909], 1e-6); // torch.nn.GELU()(x)
  await close(new nn.Softmax(1).call(x).sum(1), [1], 1e-6);
  await close(new nn.LogSoftmax(1).call(x).exp().sum(1), [1], 1e-6);
  assert.equal(new nn.Identity().call(x), x);
  assert.deepEqual(new nn.Flatten().call(torch.zeros(2, 3, 4, 5)).shape, [2, 60]);
  assert.deepEqual(new nn.Unflatten(1, [3, 4]).call(torch.zeros(2, 12)).shape, [2, 3, 4]);
  const img = torch.arange(32, { dtype: "float32" }).reshape(1, 2, 4, 4);
  assert.deepEqual(await new nn.MaxPool2d(2).call(img).tolist(), [[[[5, 7], [13, 15]], [[21, 23], [29, 31]]]]);
  assert.deepEqual(await new nn.AvgPool2d(2).call(img).tolist(), [[[[2.5, 4.5], [10.5, 12.5]], [[18.5, 20.5], [26.5, 28.5]]]]);
  assert.deepEqual(await new nn.AdaptiveAvgPool2d(1).call(img).flatten().tolist(), [7.5, 23.5]);
  assert.deepEqual(new nn.Upsample({ scaleFactor: 2 }).call(img).shape, [1, 2, 8, 8]);
  const d = new nn.Dropout(0.5);
  d.eval();
  assert.equal(d.call(x), x);
  d.train();
  const dy = await d.call(torch.ones(1000)).data();
  assert.ok(Array.from(dy).every((v) => v === 0 || v === 2));

  const seq = new nn.Sequential(new nn.Linear(4, 8), new nn.ReLU(), new nn.Linear(8, 2));
  assert.deepEqual(seq.call(torch.zeros(3, 4)).shape, [3, 2]);
  assert.ok(seq[0] instanceof nn.Linear);
  assert.equal(seq.length, 3);
  assert.deepEqual([...seq.stateDict().keys()], ["0.weight", "0.bias", "2.weight", "2.bias"]);
  const ml = new nn.ModuleList([new nn.Linear(1, 1)]).append(new nn.Linear(1, 2));
  assert.equal(ml.length, 2);
  assert.equal([...ml.parameters()].length, 4);
  assert.ok(ml.get(-1) instanceof nn.Linear);
  const md = new nn.ModuleDict({ a: new nn.Linear(1, 1), b: new nn.ReLU() });
  assert.deepEqual(md.keys(), ["a", "b"]);
  assert.deepEqual([...md.namedParameters()].map(([n]) => n), ["a.weight", "a.bias"]);
});

test("clipGradNorm_ (2-norm and inf-norm) and clipGradValue_ match PyTorch", async () => {
  const a = Tv([3, 4], 14).requiresGrad_();
  const b = Tv([5], 15).requiresGrad_();
  a.mul(3).pow(2).sum().backward();
  b.mul(7).sum().backward();
  const total = nn.utils.clipGradNorm_([a, b], 1.5);
  assert.ok(Math.abs((await total.item()) - LAYERS.clip_total) < 1e-4);
  await close(a.grad!, LAYERS.clip_a, 1e-5, "clip a");
  await close(b.grad!, LAYERS.clip_b, 1e-5, "clip b");
  a.grad = null;
  a.mul(3).pow(2).sum().backward();
  const ti = nn.utils.clipGradNorm_([a], 2, { normType: "inf" });
  assert.ok(Math.abs((await ti.item()) - LAYERS.clip_inf_total) < 1e-5);
  await close(a.grad!, LAYERS.clip_inf_a, 1e-5, "clip inf a");
  nn.utils.clipGradValue_([b], 0.1);
  assert.ok(Array.from(await b.grad!.data()).every((v) => Math.abs(v) <= 0.1 + 1e-7));
});
