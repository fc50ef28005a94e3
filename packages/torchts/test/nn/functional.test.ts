// torch.nn.functional behaviour beyond the numbers: dropout streams, running-stat updates,
// Tensor methods, gradients at the padding row, and PyTorch-style errors naming op and shapes.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";

const F = torch.nn.functional;

test("dropout draws its mask from the default generator and scales by 1/(1-p)", async () => {
  torch.manualSeed(7);
  const u = (await torch.rand([4, 6]).data()) as ArrayLike<number>;
  torch.manualSeed(7);
  const x = torch.ones([4, 6], { requiresGrad: true });
  const y = F.dropout(x, { p: 0.25 });
  const got = Array.from(await y.data());
  assert.deepEqual(got, Array.from(u, (v) => (v < 0.75 ? 1 / 0.75 : 0)).map((v) => Math.fround(v)));
  y.sum().backward();
  assert.deepEqual(Array.from(await x.grad!.data()), got);
});

test("dropout: identity when not training or p = 0, zeros for p = 1, range check", async () => {
  const x = torch.tensor([1, 2, 3], { dtype: "float32" });
  assert.equal(F.dropout(x, { p: 0.5, training: false }), x);
  assert.equal(F.dropout(x, { p: 0 }), x);
  assert.deepEqual(await F.dropout(x, { p: 1 }).tolist(), [0, 0, 0]);
  assert.throws(() => F.dropout(x, { p: 1.5 }), /dropout probability has to be between 0 and 1, but got 1.5/);
});

test("batchNorm training updates running stats in place without autograd; eval leaves them", async () => {
  const x = torch.tensor([[1, 2], [3, 6], [5, 10]], { dtype: "float32", requiresGrad: true });
  const rm = torch.zeros([2]);
  const rv = torch.ones([2]);
  const v0 = rm._version;
  F.batchNorm(x, rm, rv, { training: true, momentum: 0.5 });
  assert.ok(rm._version > v0);
  assert.equal(rm.requiresGrad, false);
  assert.equal(rv.requiresGrad, false);
  // mean [3, 6]; unbiased var [4, 16]
  assert.deepEqual(await rm.tolist(), [1.5, 3]);
  assert.deepEqual(await rv.tolist(), [2.5, 8.5]);
  F.batchNorm(x, rm, rv, { training: false });
  assert.deepEqual(await rm.tolist(), [1.5, 3]);
  assert.throws(() => F.batchNorm(torch.ones([1, 2]), rm, rv, { training: true }), /batchNorm\(\): Expected more than 1 value per channel when training, got input size \[1, 2\]/);
});

test("Tensor.softmax / Tensor.logSoftmax and dim checks", async () => {
  const x = torch.tensor([[0, Math.log(3)]], { dtype: "float32" });
  const s = (await x.softmax(-1).tolist()) as number[][];
  assert.ok(Math.abs(s[0]![0]! - 0.25) < 1e-6 && Math.abs(s[0]![1]! - 0.75) < 1e-6);
  const l = (await x.logSoftmax(1).tolist()) as number[][];
  assert.ok(Math.abs(l[0]![1]! - Math.log(0.75)) < 1e-6);
  assert.throws(() => F.softmax(x, 2), /softmax|Dimension out of range/);
  assert.throws(() => F.softmax(torch.tensor([1, 2]), 0), /softmax\(\): expected input to have a floating point dtype, but got int64/);
  // softmax of a row of -inf is nan, as PyTorch
  const n = (await F.softmax(torch.tensor([-Infinity, -Infinity]), 0).tolist()) as number[];
  assert.ok(n.every(Number.isNaN));
});

test("softplus / elu / logsigmoid keep gradients finite for large inputs", async () => {
  const x = torch.tensor([-200, -50, 0, 50, 200], { dtype: "float32", requiresGrad: true });
  torch.add(torch.add(F.softplus(x).sum(), F.elu(x).sum()), F.logsigmoid(x).sum()).backward();
  const g = Array.from(await x.grad!.data());
  assert.ok(g.every(Number.isFinite), `grad ${g}`);
});

test("embedding: no gradient into the padding row, accumulation for repeats", async () => {
  const w = torch.ones([4, 2], { requiresGrad: true });
  const idx = torch.tensor([[1, 1], [3, 0]]);
  F.embedding(idx, w, { paddingIdx: 3 }).sum().backward();
  assert.deepEqual(await w.grad!.tolist(), [[1, 1], [2, 2], [0, 0], [0, 0]]);
  assert.throws(() => F.embedding(torch.tensor([0.5]), w), /embedding\(\): expected indices to have an integer dtype \(int64\), but got float32/);
});

test("oneHot of a 0-dim index and crossEntropy of an unbatched input", async () => {
  assert.deepEqual(await F.oneHot(torch.tensor(2), 4).tolist(), [0, 0, 1, 0]);
  const l = await F.crossEntropy(torch.tensor([0, 0], { dtype: "float32" }), torch.tensor(1)).item();
  assert.ok(Math.abs(l - Math.LN2) < 1e-6);
});

test("errors name the op and the shapes", () => {
  const x = torch.zeros([2, 3, 8]);
  assert.throws(() => F.layerNorm(x, [7]), /layerNorm\(\): Given normalized_shape=\[7\], expected input with shape \[\*, 7\], but got input of size\[2, 3, 8\]/);
  assert.throws(() => F.groupNorm(torch.zeros([2, 6, 4]), 4), /groupNorm\(\): Expected number of channels in input to be divisible by num_groups, but got input of shape \[2, 6, 4\] and num_groups=4/);
  assert.throws(
    () => F.conv2d(torch.zeros([1, 3, 5, 5]), torch.zeros([4, 2, 3, 3])),
    /conv2d\(\): Given groups=1, weight of size \[4, 2, 3, 3\], expected input\[1, 3, 5, 5\] to have 2 channels, but got 3 channels instead/,
  );
  assert.throws(() => F.conv2d(torch.zeros([1, 2, 2, 2]), torch.zeros([1, 2, 3, 3])), /conv2d\(\): Calculated padded input size per channel: \(2 x 2\)/);
  assert.throws(() => F.conv2d(torch.zeros([1, 2, 5, 5]), torch.zeros([1, 2, 3, 3]), null, { padding: "same", stride: 2 }), /padding='same' is not supported for strided convolutions/);
  assert.throws(
    () => F.crossEntropy(torch.zeros([4, 3]), torch.zeros([5], { dtype: "int64" })),
    /crossEntropy\(\): Expected input batch_size \(4\) to match target batch_size \(5\)/,
  );
  assert.throws(() => F.nllLoss(torch.zeros([4, 3]), torch.zeros([4])), /nllLoss\(\): expected target to have an integer dtype \(int64\), but got float32/);
  assert.throws(() => F.pad(torch.zeros([1, 2, 3]), [3, 0], { mode: "reflect" }), /pad\(\): Argument #4: Padding size should be less than the corresponding input dimension, but got: padding \(3, 0\) at dimension 2 of input \[1, 2, 3\]/);
  assert.throws(() => F.maxPool2d(torch.zeros([1, 1, 4, 4]), 2, { padding: 2 }), /maxPool2d\(\): pad should be at most half of kernel size, but got pad=2 and kernel_size=2/);
  const q = torch.zeros([1, 2, 4]);
  assert.throws(() => F.scaledDotProductAttention(q, q, q, { isCausal: true, attnMask: torch.ones([2, 2], { dtype: "bool" }) }), /Explicit attn_mask should not be set when is_causal=True/);
  assert.throws(() => F.scaledDotProductAttention(q, torch.zeros([1, 2, 5]), q), /query and key must have the same embedding dim, got query \[1, 2, 4\] and key \[1, 2, 5\]/);
  assert.throws(() => F.mseLoss(torch.zeros([2, 3]), torch.zeros([4, 3])), /mseLoss/);
  assert.throws(() => F.crossEntropy(torch.zeros([2, 3]), torch.zeros([2], { dtype: "int64" }), { reduction: "avg" as "mean" }), /crossEntropy\(\): avg is not a valid value for reduction/);
});

test("maxPool2dWithIndices gives flat spatial indices of the first maximum", async () => {
  const x = torch.tensor([[[[1, 5, 2, 2], [3, 4, 2, 9]]]], { dtype: "float32" });
  const [v, i] = F.maxPool2dWithIndices(x, 2);
  assert.deepEqual(await v.tolist(), [[[[5, 9]]]]);
  assert.deepEqual(await i.tolist(), [[[[1, 7]]]]);
});

test("gelu keeps only its input for backward; gradients and double backward match the decomposition's", async () => {
  for (const approximate of ["none", "tanh"] as const) {
    torch.manualSeed(1);
    const x = torch.randn(512, 512).mul(2).requiresGrad_(); // 1 MiB
    const live = () => torch.memory.stats().liveBytes;
    const before = live();
    const y = F.gelu(x, { approximate });
    // y itself (1 MiB); the decomposition's autograd kept 5-6 more tensors of x's size
    assert.ok(live() - before < 1.25 * 2 ** 20, `${approximate}: gelu holds ${live() - before} bytes`);
    const ref = (v: torch.Tensor) =>
      approximate === "none"
        ? v.mul(0.5).mul(v.mul(Math.SQRT1_2).erf().add(1))
        : v.mul(0.5).mul(v.add(v.mul(v).mul(v).mul(0.044715)).mul(Math.sqrt(2 / Math.PI)).tanh().add(1));
    assert.ok((await y.sub(ref(x)).abs().max().item()) < 1e-6);
    const [g] = torch.autograd.grad(y.sum(), x, { createGraph: true }) as [torch.Tensor];
    const [gr] = torch.autograd.grad(ref(x).sum(), x, { createGraph: true }) as [torch.Tensor];
    assert.ok((await g.sub(gr).abs().max().item()) < 1e-5, `${approximate}: first derivative`);
    const [gg] = torch.autograd.grad(g.sum(), x) as [torch.Tensor];
    const [ggr] = torch.autograd.grad(gr.sum(), x) as [torch.Tensor];
    assert.ok((await gg.sub(ggr).abs().max().item()) < 1e-4, `${approximate}: second derivative`);
  }
});

test("layerNorm saves x, mean and 1/std only; gradients (x, weight, bias) and double backward match the decomposition's", async () => {
  torch.manualSeed(2);
  const x = torch.randn(4, 64, 256).requiresGrad_(); // 256 KiB
  const w = torch.randn(256).requiresGrad_();
  const b = torch.randn(256).requiresGrad_();
  const live = () => torch.memory.stats().liveBytes;
  const before = live();
  const y = F.layerNorm(x, [256], { weight: w, bias: b });
  // y (256 KiB) plus mean and 1/std (1 KiB each); the decomposition kept ~4 more of x's size
  assert.ok(live() - before < 300 * 1024, `layerNorm holds ${live() - before} bytes`);
  const ref = (v: torch.Tensor) => {
    const mu = v.mean(-1, true);
    const d = v.sub(mu);
    return d.mul(d.mul(d).mean(-1, true).add(1e-5).rsqrt()).mul(w).add(b);
  };
  assert.ok((await y.sub(ref(x)).abs().max().item()) < 1e-5);
  const gy = torch.randn(4, 64, 256);
  const got = torch.autograd.grad(y, [x, w, b], { gradOutputs: gy, createGraph: true }) as torch.Tensor[];
  const want = torch.autograd.grad(ref(x), [x, w, b], { gradOutputs: gy, createGraph: true }) as torch.Tensor[];
  for (let i = 0; i < 3; i++) assert.ok((await got[i]!.sub(want[i]!).abs().max().item()) < 1e-4, `gradient ${i}`);
  const [gg] = torch.autograd.grad(got[0]!.pow(2).sum(), x) as [torch.Tensor];
  const [ggr] = torch.autograd.grad(want[0]!.pow(2).sum(), x) as [torch.Tensor];
  assert.ok((await gg.sub(ggr).abs().max().item()) < 1e-3 * (1 + (await ggr.abs().max().item())));
});
