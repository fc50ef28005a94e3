// torch.autograd.gradcheck (analytic vs central differences, float64) for every differentiable
// op family, plus double backward through elementwise ops and matmul.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import type { Tensor } from "../../src/index.js";

const F = torch.nn.functional;

// Deterministic inputs that do not depend on the library's RNG.
let state = 12345;
function uniform(): number {
  state = (Math.imul(state, 1103515245) + 12345) >>> 0;
  return state / 2 ** 32;
}
/** float64 values in [lo, hi); with `awayFromZero`, |v| in [lo, hi) with a random sign. */
function rnd(shape: number[], lo = -1, hi = 1, opts: { awayFromZero?: boolean; grad?: boolean } = {}): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  const v = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const u = lo + (hi - lo) * uniform();
    v[i] = opts.awayFromZero ? (uniform() < 0.5 ? -u : u) : u;
  }
  const t = torch.tensor(v, { dtype: "float64" }).reshape(shape);
  if (opts.grad ?? true) t.requiresGrad = true;
  return t;
}
const pos = (shape: number[]) => rnd(shape, 0.5, 2);
const nz = (shape: number[]) => rnd(shape, 0.3, 1.3, { awayFromZero: true });
const ints = (values: number[], shape = [values.length]) => torch.tensor(values, { dtype: "int64" }).reshape(shape);

function check(name: string, fn: (...xs: Tensor[]) => Tensor | Tensor[], inputs: () => Tensor[]): void {
  test(`gradcheck ${name}`, () => {
    assert.equal(torch.autograd.gradcheck(fn, inputs(), { eps: 1e-6, atol: 1e-5, rtol: 1e-3 }), true);
  });
}

// ---- elementwise unary ----
const unary: [string, (x: Tensor) => Tensor, (s: number[]) => Tensor][] = [
  ["exp", (x) => x.exp(), (s) => rnd(s)],
  ["log", (x) => x.log(), pos],
  ["log2", (x) => x.log2(), pos],
  ["log10", (x) => x.log10(), pos],
  ["sqrt", (x) => x.sqrt(), pos],
  ["rsqrt", (x) => x.rsqrt(), pos],
  ["sin", (x) => x.sin(), (s) => rnd(s, -3, 3)],
  ["cos", (x) => x.cos(), (s) => rnd(s, -3, 3)],
  ["tan", (x) => x.tan(), (s) => rnd(s)],
  ["tanh", (x) => x.tanh(), (s) => rnd(s, -2, 2)],
  ["sigmoid", (x) => x.sigmoid(), (s) => rnd(s, -3, 3)],
  ["erf", (x) => x.erf(), (s) => rnd(s, -2, 2)],
  ["expm1", (x) => x.expm1(), (s) => rnd(s)],
  ["log1p", (x) => x.log1p(), (s) => rnd(s, -0.5, 2)],
  ["reciprocal", (x) => x.reciprocal(), nz],
  ["abs", (x) => x.abs(), nz],
  ["neg", (x) => x.neg(), (s) => rnd(s)],
  ["square", (x) => x.square(), (s) => rnd(s)],
  ["relu", (x) => x.relu(), nz],
  ["sign (zero gradient)", (x) => x.sign(), nz],
  ["floor (zero gradient)", (x) => torch.floor(x), (s) => rnd(s, 0.1, 0.9)],
  ["atan", (x) => torch.atan(x), (s) => rnd(s, -2, 2)],
  ["asin", (x) => torch.asin(x), (s) => rnd(s, -0.8, 0.8)],
  ["acos", (x) => torch.acos(x), (s) => rnd(s, -0.8, 0.8)],
  ["sinh", (x) => torch.sinh(x), (s) => rnd(s)],
  ["cosh", (x) => torch.cosh(x), (s) => rnd(s)],
  ["asinh", (x) => torch.asinh(x), (s) => rnd(s, -2, 2)],
  ["acosh", (x) => torch.acosh(x), (s) => rnd(s, 1.2, 3)],
  ["atanh", (x) => torch.atanh(x), (s) => rnd(s, -0.8, 0.8)],
  ["exp2", (x) => torch.exp2(x), (s) => rnd(s)],
  ["clamp", (x) => x.clamp(-0.5, 0.5), (s) => rnd(s, 0.6, 1.0, { awayFromZero: true })],
  ["clamp (inside)", (x) => x.clamp(-2, 2), (s) => rnd(s)],
  ["pow scalar 3", (x) => x.pow(3), (s) => rnd(s)],
  ["pow scalar -1.5", (x) => x.pow(-1.5), pos],
  ["pow scalar 0.5", (x) => x.pow(0.5), pos],
];
for (const [name, f, gen] of unary) check(`unary ${name}`, f, () => [gen([2, 3])]);

// ---- elementwise binary, with broadcasting ----
check("binary add broadcast", (a, b) => a.add(b), () => [rnd([2, 1, 3]), rnd([2, 3])]);
check("binary add alpha", (a, b) => torch.add(a, b, { alpha: -2.5 }), () => [rnd([3, 2]), rnd([2])]);
check("binary add 0-d", (a, b) => a.add(b), () => [rnd([3, 2]), rnd([])]);
check("binary sub broadcast", (a, b) => a.sub(b), () => [rnd([3, 1]), rnd([1, 4])]);
check("binary mul broadcast", (a, b) => a.mul(b), () => [rnd([1, 3, 1]), rnd([2, 1, 4])]);
check("binary div broadcast", (a, b) => a.div(b), () => [rnd([3, 4]), nz([3, 1])]);
check("binary pow tensor", (a, b) => torch.pow(a, b), () => [pos([3, 4]), rnd([4])]);
check("binary maximum", (a, b) => torch.maximum(a, b), () => [rnd([3, 4]), rnd([4])]);
check("binary minimum", (a, b) => torch.minimum(a, b), () => [rnd([3, 1]), rnd([1, 4])]);
check("binary atan2", (a, b) => torch.atan2(a, b), () => [nz([3, 1]), nz([4])]);
check("binary scalar ops", (x) => torch.sub(1.5, x).mul(-3).div(4).add(2.5).pow(2), () => [rnd([2, 3])]);
check("binary rdiv and rpow", (x) => torch.div(2, x).add(torch.pow(2, x)), () => [nz([2, 3])]);
check("binary lerp", (a, b) => torch.lerp(a, b, 0.3), () => [rnd([2, 3]), rnd([3])]);
check("where", (a, b) => torch.where(a.gt(0), a, b), () => [nz([3, 4]), rnd([4])]);
check("where broadcast cond", (a, b) => torch.where(torch.tensor([[true, false, true]]), a, b), () => [rnd([2, 1]), rnd([2, 3])]);

// ---- reductions and scans ----
check("sum all", (x) => x.sum(), () => [rnd([3, 4])]);
check("sum dims keepdim", (x) => x.sum([0, 2], true), () => [rnd([2, 3, 2])]);
check("mean dim", (x) => x.mean(-1), () => [rnd([3, 4])]);
check("prod dim (with zeros)", (x) => x.prod(1), () => [torch.tensor([[1.5, -2, 0.5], [0, 1.2, 0.7], [0, 0, 2]], { dtype: "float64", requiresGrad: true })]);
check("prod all", (x) => x.prod(), () => [nz([5])]);
check("max dim (values)", (x) => torch.max(x, 1).values, () => [rnd([3, 5])]);
check("min all", (x) => x.min(), () => [rnd([3, 4])]);
check("amax dims", (x) => torch.amax(x, [1, 2]), () => [rnd([2, 3, 2])]);
check("var unbiased", (x) => x.var(1), () => [rnd([3, 4])]);
check("var correction 0 keepdim", (x) => torch.var(x, 0, { correction: 0, keepdim: true }), () => [rnd([4, 3])]);
check("std", (x) => x.std(), () => [rnd([3, 4])]);
check("logsumexp", (x) => torch.logsumexp(x, 1), () => [rnd([3, 4], -3, 3)]);
check("norm fro", (x) => torch.norm(x), () => [rnd([3, 4])]);
check("norm p1 dim", (x) => torch.norm(x, 1, 1), () => [nz([3, 4])]);
check("norm p3", (x) => torch.norm(x, 3), () => [nz([6])]);
check("norm inf", (x) => torch.norm(x, Infinity, 1), () => [rnd([3, 4])]);
check("cumsum", (x) => torch.cumsum(x, 1), () => [rnd([3, 4])]);
check("cumprod", (x) => torch.cumprod(x, 0), () => [nz([4, 3])]);
check("sort values", (x) => torch.sort(x, -1).values, () => [rnd([3, 5])]);
check("topk values", (x) => torch.topk(x, 2, { dim: 0 }).values, () => [rnd([4, 3])]);

// ---- matmul forms ----
check("matmul 1d@1d", (a, b) => torch.matmul(a, b), () => [rnd([4]), rnd([4])]);
check("matmul 2d@1d", (a, b) => torch.matmul(a, b), () => [rnd([3, 4]), rnd([4])]);
check("matmul 1d@2d", (a, b) => torch.matmul(a, b), () => [rnd([3]), rnd([3, 4])]);
check("matmul 2d@2d", (a, b) => torch.matmul(a, b), () => [rnd([3, 4]), rnd([4, 2])]);
check("matmul broadcast batch", (a, b) => torch.matmul(a, b), () => [rnd([2, 1, 2, 3]), rnd([3, 3, 2])]);
check("matmul 1d@3d", (a, b) => torch.matmul(a, b), () => [rnd([3]), rnd([2, 3, 2])]);
check("bmm", (a, b) => torch.bmm(a, b), () => [rnd([2, 2, 3]), rnd([2, 3, 2])]);
check("linear", (x, w, b) => torch.linear(x, w, b), () => [rnd([2, 3]), rnd([4, 3]), rnd([4])]);
check("outer and dot", (a, b) => torch.outer(a, b).sum().add(torch.dot(a, b)), () => [rnd([3]), rnd([3])]);

// a batched activation times a shared weight: the weight's gradient folds the batch into one 2-D
// matmul (x.reshape(-1, K)^T @ g.reshape(-1, N)) instead of a batched matmul and a sum
check("matmul 3d@2d shared weight", (x, w) => torch.matmul(x, w), () => [rnd([2, 3, 4]), rnd([4, 5])]);
check("matmul 4d@2d shared weight + bias", (x, w, b) => torch.matmul(x, w).add(b), () => [rnd([2, 2, 3, 4]), rnd([4, 5]), rnd([5])]);
check("matmul 3d@transposed weight view", (x, w) => torch.matmul(x, w.t()), () => [rnd([2, 3, 4]), rnd([5, 4])]);
check("matmul 4d@strided weight view + bias", (x, w, b) => torch.matmul(x, w.slice(1, 0, null, 2)).add(b), () => [rnd([2, 1, 3, 4]), rnd([4, 6]), rnd([3])]);
check("matmul transposed 3d activation @2d", (x, w) => torch.matmul(x.transpose(0, 1), w), () => [rnd([3, 2, 4]), rnd([4, 2])]);
check("matmul 3d@[1,K,N] and 3d@[1,1,K,N]", (x, w, v) => torch.matmul(x, w).sum().add(torch.matmul(x, v).pow(2).sum()), () => [rnd([2, 3, 4]), rnd([1, 4, 2]), rnd([1, 1, 4, 2])]);
check("matmul 3d@1d", (x, w) => torch.matmul(x, w), () => [rnd([2, 3, 4]), rnd([4])]);
check("linear 3d and 4d", (x, y, w, b) => torch.linear(x, w, b).sum().add(torch.linear(y, w).pow(2).sum()), () => [rnd([2, 3, 4]), rnd([2, 2, 3, 4]), rnd([5, 4]), rnd([5])]);

test("folded weight gradient of a batched activation @ a shared weight matches the unfolded one", async () => {
  const close = async (got: Tensor, want: Tensor, tol: number, what: string) => {
    assert.deepEqual(got.shape, want.shape, what);
    const g = (await got.reshape(-1).tolist()) as number[], w = (await want.reshape(-1).tolist()) as number[];
    g.forEach((v, i) => assert.ok(Math.abs(v - w[i]!) <= tol * (1 + Math.abs(w[i]!)), `${what}[${i}] ${v} vs ${w[i]}`));
  };
  // view: how the weight enters (plain, transposed, strided); the unfolded reference expands it to the batch
  const views: [string, number[], (w: Tensor) => Tensor][] = [
    ["plain", [8, 6], (w) => w],
    ["transposed", [6, 8], (w) => w.t()],
    ["strided", [8, 12], (w) => w.slice(1, 1, null, 2)],
  ];
  for (const dtype of ["float64", "float32"] as const) {
    const tol = dtype === "float64" ? 1e-12 : 1e-5;
    for (const lead of [[3, 5], [2, 3, 5]]) {
      for (const [vname, wshape, view] of views) {
        for (const withBias of [false, true]) {
          const x = rnd([...lead, 8]).to(dtype).detach().requiresGrad_();
          const w = rnd(wshape).to(dtype).detach().requiresGrad_();
          const b = rnd([6]).to(dtype).detach().requiresGrad_();
          const up = rnd([...lead, 6], -1, 1, { grad: false }).to(dtype);
          const loss = (y: Tensor) => (withBias ? y.add(b) : y).mul(up).sum();
          const folded = torch.autograd.grad(loss(torch.matmul(x, view(w))), withBias ? [x, w, b] : [x, w]);
          const we = view(w).expand([...lead.slice(0, -1), 8, 6]);
          const unfolded = torch.autograd.grad(loss(torch.matmul(x, we)), withBias ? [x, w, b] : [x, w]);
          const what = `${dtype} [${lead}] ${vname}${withBias ? " + bias" : ""}`;
          for (let i = 0; i < folded.length; i++) await close(folded[i]!, unfolded[i]!, tol, `${what} grad ${i}`);
        }
      }
    }
  }
});

// ---- views and movement ----
check("reshape of transposed view", (x) => x.t().reshape(-1), () => [rnd([3, 4])]);
check("view and permute", (x) => x.view(2, 2, 3).permute(2, 0, 1), () => [rnd([4, 3])]);
check("transpose", (x) => x.transpose(0, 2), () => [rnd([2, 3, 2])]);
check("expand", (x) => x.expand(2, -1, 3), () => [rnd([4, 1])]);
check("squeeze/unsqueeze/flatten", (x) => x.squeeze().unsqueeze(-1).flatten(1), () => [rnd([1, 3, 1, 2])]);
check("narrow/select/slice step", (x) => x.narrow(1, 1, 3).select(0, 1).add(x.slice(1, 0, null, 2).sum()), () => [rnd([3, 5])]);
check("flip and roll", (x) => x.flip(0).roll([1, -2], [0, 1]), () => [rnd([3, 4])]);
check("roll flat", (x) => x.roll(3), () => [rnd([3, 4])]);
check("tril/triu", (x) => x.tril(-1).add(x.triu(1).mul(2)), () => [rnd([4, 4])]);
check("repeat", (x) => x.repeat(2, 1, 3), () => [rnd([2, 2])]);
check("repeatInterleave", (x) => x.repeatInterleave(2, 1), () => [rnd([2, 3])]);
check("diagonal", (x) => x.diagonal(1), () => [rnd([3, 4])]);
check("unfold", (x) => x.unfold(1, 3, 2), () => [rnd([2, 7])]);
check("split and chunk", (x) => [...x.split([2, 1], 0), ...x.chunk(2, 1)], () => [rnd([3, 4])]);
check("contiguous of permuted", (x) => x.permute(1, 0, 2).contiguous().view(3, -1), () => [rnd([2, 3, 2])]);
check("cat", (a, b, c) => torch.cat([a, b, c], 1), () => [rnd([2, 1]), rnd([2, 3]), rnd([2, 2])]);
check("stack", (a, b) => torch.stack([a, b], -1), () => [rnd([2, 3]), rnd([2, 3])]);
check("constantPad", (x) => torch.constantPadNd(x, [1, 2], 0.5), () => [rnd([2, 3])]);

// ---- nn.functional ----
check("F.softmax", (x) => F.softmax(x, -1), () => [rnd([3, 4], -3, 3)]);
check("F.logSoftmax", (x) => F.logSoftmax(x, 0), () => [rnd([3, 4], -3, 3)]);
check("F.gelu", (x) => F.gelu(x).add(F.gelu(x, { approximate: "tanh" })), () => [rnd([2, 3], -2, 2)]);
check("F.silu", (x) => F.silu(x), () => [rnd([2, 3], -2, 2)]);
check("F.softplus", (x) => F.softplus(x, { beta: 2, threshold: 10 }), () => [rnd([2, 3], -2, 2)]);
check("F.leakyRelu", (x) => F.leakyRelu(x, 0.1), () => [nz([2, 3])]);
check("F.layerNorm", (x, w, b) => F.layerNorm(x, [4], { weight: w, bias: b, eps: 1e-5 }), () => [rnd([3, 4]), rnd([4]), rnd([4])]);
check("F.groupNorm", (x, w, b) => F.groupNorm(x, 2, { weight: w, bias: b }), () => [rnd([2, 4, 3]), rnd([4]), rnd([4])]);
check(
  "F.batchNorm training",
  (x, w, b) => F.batchNorm(x, null, null, { weight: w, bias: b, training: true }),
  () => [rnd([4, 3]), rnd([3]), rnd([3])],
);
check("F.embedding", (w) => F.embedding(ints([0, 2, 2, 1]), w), () => [rnd([3, 2])]);
check("F.crossEntropy", (x) => F.crossEntropy(x, ints([1, 0, 3])), () => [rnd([3, 4], -2, 2)]);
check(
  "F.crossEntropy label smoothing + ignore",
  (x) => F.crossEntropy(x, ints([1, -100, 3]), { labelSmoothing: 0.2 }),
  () => [rnd([3, 4], -2, 2)],
);
check("F.nllLoss weighted", (x, w) => F.nllLoss(x, ints([1, 0, 2]), { weight: w }), () => [rnd([3, 3]), rnd([3], 0.5, 2, { grad: false })]);
check("F.mseLoss", (a, b) => F.mseLoss(a, b), () => [rnd([2, 3]), rnd([2, 3])]);
check("F.conv1d", (x, w, b) => F.conv1d(x, w, b, { stride: 2, padding: 1, dilation: 2 }), () => [rnd([1, 2, 7]), rnd([3, 2, 2]), rnd([3])]);
check("F.conv2d groups", (x, w, b) => F.conv2d(x, w, b, { padding: 1, groups: 2 }), () => [rnd([1, 2, 3, 3]), rnd([2, 1, 2, 2]), rnd([2])]);
check(
  "F.convTranspose2d",
  (x, w, b) => F.convTranspose2d(x, w, b, { stride: 2, padding: 1, outputPadding: 1 }),
  () => [rnd([1, 2, 2, 2]), rnd([2, 2, 2, 2]), rnd([2])],
);
check("F.maxPool2d", (x) => F.maxPool2d(x, { kernelSize: 2, stride: 1, padding: 1 }), () => [rnd([1, 1, 3, 3])]);
check("F.avgPool2d", (x) => F.avgPool2d(x, { kernelSize: 3, stride: 2, padding: 1, countIncludePad: false }), () => [rnd([1, 1, 4, 4])]);
check("F.adaptiveAvgPool2d", (x) => F.adaptiveAvgPool2d(x, [2, 3]), () => [rnd([1, 1, 3, 4])]);
check("F.pad reflect/replicate", (x) => F.pad(x, [1, 2, 1, 0], { mode: "reflect" }).sum().add(F.pad(x.reshape(1, 3, 4), [2, 1], { mode: "replicate" })), () => [rnd([1, 1, 3, 4])]);
check(
  "F.scaledDotProductAttention causal",
  (q, k, v) => F.scaledDotProductAttention(q, k, v, { isCausal: true }),
  () => [rnd([1, 2, 3, 2]), rnd([1, 2, 3, 2]), rnd([1, 2, 3, 2])],
);

// ---- indexing ----
check("index slices", (x) => x.index("::2", "1:4:2"), () => [rnd([4, 5])]);
check("index advanced", (x) => x.index(ints([2, 0, 2]), ":"), () => [rnd([3, 4])]);
check("index bool mask", (x) => x.index(torch.tensor([[true, false, true], [false, true, true]])), () => [rnd([2, 3])]);
check("gather", (x) => torch.gather(x, 1, ints([0, 2, 2, 1], [2, 2])), () => [rnd([2, 3])]);
check("scatterAdd", (x, s) => torch.scatterAdd(x, 0, ints([0, 1, 0, 0], [2, 2]), s), () => [rnd([2, 2]), rnd([2, 2])]);
check("indexSelect", (x) => torch.indexSelect(x, 1, ints([2, 0, 2])), () => [rnd([2, 3])]);
check("maskedFill", (x) => x.maskedFill(torch.tensor([true, false, true]), 0.5), () => [rnd([2, 3])]);
check("indexPut accumulate", (x, v) => torch.indexPut(x, [ints([1, 1, 0])], v, { accumulate: true }), () => [rnd([3, 2]), rnd([3, 2])]);

// ---- double backward ----
test("double backward through elementwise ops matches the analytic second derivative", async () => {
  const x = rnd([6], -2, 2);
  const f = x.pow(3).mul(x.sin()).sum();
  const [g1] = torch.autograd.grad(f, [x], { createGraph: true });
  assert.ok(g1!.requiresGrad, "first gradient must carry a graph with createGraph");
  const [g2] = torch.autograd.grad(g1!.sum(), [x]);
  const xs = (await x.tolist()) as number[];
  const want1 = xs.map((v) => 3 * v * v * Math.sin(v) + v ** 3 * Math.cos(v));
  const want2 = xs.map((v) => 6 * v * Math.sin(v) + 6 * v * v * Math.cos(v) - v ** 3 * Math.sin(v));
  const got1 = (await g1!.tolist()) as number[];
  const got2 = (await g2!.tolist()) as number[];
  got1.forEach((v, i) => assert.ok(Math.abs(v - want1[i]!) < 1e-12, `g1[${i}] ${v} vs ${want1[i]}`));
  got2.forEach((v, i) => assert.ok(Math.abs(v - want2[i]!) < 1e-12, `g2[${i}] ${v} vs ${want2[i]}`));
});

/** gradgradcheck: gradcheck of the createGraph gradient itself. */
function gradgrad(name: string, f: (...xs: Tensor[]) => Tensor, inputs: () => Tensor[]): void {
  // gradcheck evaluates its finite differences under noGrad; the inner gradient needs a graph
  const firstGrad = (...xs: Tensor[]) =>
    torch.enableGrad(() => torch.autograd.grad(f(...xs), xs, { createGraph: true }).map((g) => g!));
  check(`double backward ${name}`, firstGrad, inputs);
}
gradgrad("exp/tanh/sigmoid/log/div chain", (x, y) => x.exp().mul(y.tanh()).add(x.sigmoid().div(y.abs().add(1).log())).sum(), () => [rnd([2, 3]), nz([2, 3])]);
gradgrad("pow/sqrt/reciprocal", (x) => x.pow(2.5).add(x.sqrt().reciprocal()).sum(), () => [pos([5])]);
gradgrad("matmul", (a, b) => torch.matmul(a, b).tanh().sum(), () => [rnd([2, 3]), rnd([3, 2])]);
gradgrad("batched matmul broadcast", (a, b) => torch.matmul(a, b).pow(2).sum(), () => [rnd([2, 2, 3]), rnd([3, 2])]);
gradgrad("4d activation @ transposed shared weight", (a, b) => torch.matmul(a, b.t()).pow(2).sum(), () => [rnd([2, 2, 2, 3]), rnd([2, 3])]);

test("double backward of matmul matches the analytic Hessian-vector form", async () => {
  // f = sum((A B)^2): dA = 2 A B B^T; the second derivatives of sum(dA) come from PyTorch 1.13 (float64)
  const a = torch.tensor([[1, 2, -1], [0.5, -0.5, 2]], { dtype: "float64", requiresGrad: true });
  const b = torch.tensor([[1, 0], [-1, 2], [0.5, 1]], { dtype: "float64", requiresGrad: true });
  const f = torch.matmul(a, b).pow(2).sum();
  const [ga] = torch.autograd.grad(f, [a], { createGraph: true });
  const [gaa, gab] = torch.autograd.grad(ga!.sum(), [a, b]);
  assert.deepEqual(await ga!.tolist(), [[-3, 15, 4.5], [4, 0, 4]]);
  assert.deepEqual(await gaa!.tolist(), [[1, 11, 6.5], [1, 11, 6.5]]);
  assert.deepEqual(await gab!.tolist(), [[2.5, 17], [2.5, 17], [2, 14]]);
});
