// torch.nn.functional ops outside the golden set, against PyTorch 1.13 numbers
// (functional_oracle.json, made by functional_oracle.py): outputs and the gradients of
// sum(out * gw) w.r.t. every listed input, run in float32 in each eager mode.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as torch from "../../src/index.js";
import type { Tensor } from "../../src/index.js";
import { assertClose, flat } from "./functional_golden.js";

const F = torch.nn.functional;
type V = number | string;
interface OracleCase {
  name: string;
  inputs: Record<string, { shape: number[]; dtype: string; data: V[]; grad: boolean }>;
  outputs: { shape: number[]; dtype: string; data: V[]; gw: V[] | null }[];
  grads: Record<string, V[] | null>;
}
const oracle = JSON.parse(readFileSync(new URL("./functional_oracle.json", import.meta.url), "utf8")) as { cases: OracleCase[] };
const num = (v: V): number => (typeof v === "number" ? v : v === "nan" ? NaN : v === "inf" ? Infinity : -Infinity);
const DT: Record<string, torch.DType> = { float64: "float32", float32: "float32", int64: "int64", bool: "bool" };

type T = Record<string, Tensor>;
const CASES: Record<string, (i: T) => Tensor | Tensor[]> = {
  relu6: ({ x }) => F.relu6(x!.mul(2)),
  elu: ({ x }) => F.elu(x!, 1.5),
  celu: ({ x }) => F.celu(x!, 0.7),
  selu: ({ x }) => F.selu(x!),
  mish: ({ x }) => F.mish(x!),
  hardtanh: ({ x }) => F.hardtanh(x!, -0.5, 1.0),
  sigmoid: ({ x }) => F.sigmoid(x!),
  tanh: ({ x }) => F.tanh(x!),
  logsigmoid: ({ x }) => F.logsigmoid(x!),
  hardswish: ({ x }) => F.hardswish(x!),
  hardsigmoid: ({ x }) => F.hardsigmoid(x!),
  softsign: ({ x }) => F.softsign(x!),
  tanhshrink: ({ x }) => F.tanhshrink(x!),
  threshold: ({ x }) => F.threshold(x!, 0.5, -2.0),
  relu: ({ x }) => F.relu(x!),
  leaky_relu_default: ({ x }) => F.leakyRelu(x!),
  gelu_edge: ({ x }) => F.gelu(x!),
  softplus_edge: ({ x }) => F.softplus(x!),
  glu: ({ x }) => F.glu(x!, 1),
  softmin: ({ x }) => F.softmin(x!, 1),
  softmax_big: ({ x }) => F.softmax(x!, -1),
  log_softmax_big: ({ x }) => F.logSoftmax(x!, -1),
  l1_loss: ({ a, b }) => F.l1Loss(a!, b!),
  l1_loss_sum: ({ a, b }) => F.l1Loss(a!, b!, { reduction: "sum" }),
  smooth_l1_loss: ({ a, b }) => F.smoothL1Loss(a!, b!, { beta: 0.5 }),
  smooth_l1_loss_none: ({ a, b }) => F.smoothL1Loss(a!, b!, { reduction: "none" }),
  huber_loss: ({ a, b }) => F.huberLoss(a!, b!, { delta: 0.7 }),
  bce: ({ p, t }) => F.binaryCrossEntropy(p!, t!),
  bce_weight_sum: ({ p, t, w }) => F.binaryCrossEntropy(p!, t!, { weight: w, reduction: "sum" }),
  bce_logits: ({ z, t }) => F.binaryCrossEntropyWithLogits(z!, t!),
  bce_logits_pw: ({ z, t, w, pw }) => F.binaryCrossEntropyWithLogits(z!, t!, { weight: w, posWeight: pw, reduction: "none" }),
  kl_div_batchmean: ({ lp, tp }) => F.klDiv(lp!, tp!, { reduction: "batchmean" }),
  ce_weight_ls_ignore: ({ x, t, w }) => F.crossEntropy(x!, t!, { weight: w, labelSmoothing: 0.3 }),
  ce_weight_ls_none: ({ x, t, w }) => F.crossEntropy(x!, t!, { weight: w, labelSmoothing: 0.3, reduction: "none" }),
  ce_probs_ls_weight: ({ x, t, w }) => F.crossEntropy(x!, t!, { weight: w, labelSmoothing: 0.2 }),
  ce_unbatched: ({ x, t }) => F.crossEntropy(x!, t!),
  nll_3d_none: ({ x, t }) => F.nllLoss(x!, t!, { reduction: "none", ignoreIndex: 1 }),
  conv1d_same: ({ x, w, b }) => F.conv1d(x!, w!, b, { padding: "same" }),
  conv2d_valid_unbatched: ({ x, w }) => F.conv2d(x!, w!, null, { padding: "valid", stride: [1, 2] }),
  conv3d: ({ x, w, b }) => F.conv3d(x!, w!, b, { padding: 1, stride: 2 }),
  conv_transpose1d: ({ x, w, b }) => F.convTranspose1d(x!, w!, b, { stride: 3, padding: 1, outputPadding: 2 }),
  conv_transpose2d_asym: ({ x, w }) => F.convTranspose2d(x!, w!, null, { stride: [2, 1], padding: [1, 0], groups: 2, dilation: [1, 2] }),
  max_pool1d: ({ x }) => F.maxPool1d(x!, 3, { stride: 2, padding: 1 }),
  avg_pool1d_ceil: ({ x }) => F.avgPool1d(x!, 3, { stride: 2, ceilMode: true }),
  max_pool2d_dil: ({ x }) => F.maxPool2d(x!, 2, { stride: 1, dilation: 2 }),
  max_pool2d_indices: ({ x }) => F.maxPool2dWithIndices(x!, 3, { stride: 2, padding: 1 }),
  avg_pool2d_ceil_excl: ({ x }) => F.avgPool2d(x!, 3, { stride: 2, padding: 1, ceilMode: true, countIncludePad: false }),
  avg_pool2d_ceil_incl: ({ x }) => F.avgPool2d(x!, 2, { stride: 2, padding: 1, ceilMode: true }),
  avg_pool2d_divisor: ({ x }) => F.avgPool2d(x!, 2, { divisorOverride: 3 }),
  adaptive_avg_pool1d: ({ x }) => F.adaptiveAvgPool1d(x!, 3),
  adaptive_avg_pool2d_up: ({ x }) => F.adaptiveAvgPool2d(x!, [5, 2]),
  batch_norm_3d_noaffine: ({ x, rm, rv }) => {
    const m = rm!.clone();
    const v = rv!.clone();
    return [F.batchNorm(x!, m, v, { training: true, momentum: 0.3, eps: 1e-3 }), m, v];
  },
  group_norm_noaffine: ({ x }) => F.groupNorm(x!, 2, { eps: 1e-4 }),
  instance_norm: ({ x, w, b }) => F.instanceNorm(x!, { weight: w, bias: b }),
  layer_norm_noweight: ({ x, b }) => F.layerNorm(x!, [4], { bias: b }),
  normalize: ({ x }) => F.normalize(x!, { p: 2, dim: 1 }),
  normalize_zero_row: ({ x }) => F.normalize(x!.mul(torch.tensor([[1], [0], [1]], { dtype: "float32" })), { p: 3, dim: 1, eps: 1e-3 }),
  normalize_p1_dim0: ({ x }) => F.normalize(x!, { p: 1, dim: 0 }),
  cosine_similarity: ({ a, b }) => F.cosineSimilarity(a!, b!, { dim: 1 }),
  cosine_similarity_bcast: ({ a, b }) => F.cosineSimilarity(a!, b!, { dim: -1 }),
  pairwise_distance: ({ a, b }) => F.pairwiseDistance(a!, b!),
  pad_circular: ({ x }) => F.pad(x!, [1, 2, 2, 1], { mode: "circular" }),
  pad_replicate_1d: ({ x }) => F.pad(x!, [3, 1], { mode: "replicate" }),
  pad_reflect_3d: ({ x }) => F.pad(x!, [1, 1, 1, 0, 0, 2], { mode: "reflect" }),
  pad_constant_3dims: ({ x }) => F.pad(x!, [1, 0, 0, 1, 2, 0], { value: -1.5 }),
  interp_nearest_x2: ({ x }) => F.interpolate(x!, { scaleFactor: 2, mode: "nearest" }),
  interp_nearest_size: ({ x }) => F.interpolate(x!, { size: [5, 3] }),
  interp_nearest_1d: ({ x }) => F.upsample(x!, { size: 7 }),
  interp_bilinear: ({ x }) => F.interpolate(x!, { size: [5, 7], mode: "bilinear", alignCorners: false }),
  interp_bilinear_ac: ({ x }) => F.interpolate(x!, { scaleFactor: 2, mode: "bilinear", alignCorners: true }),
  interp_linear_down: ({ x }) => F.interpolate(x!, { size: 3, mode: "linear" }),
  one_hot: ({ t }) => F.oneHot(t!, 5),
  one_hot_auto: ({ t }) => F.oneHot(t!),
  embedding_neg_pad: ({ i, w }) => F.embedding(i!, w!, { paddingIdx: -1 }),
  linear: ({ x, w, b }) => F.linear(x!, w!, b),
  sdpa_float_mask_scale: ({ q, k, v, m }) => F.scaledDotProductAttention(q!, k!, v!, { attnMask: m, scale: 0.3 }),
  sdpa_gqa_noncausal: ({ q, k, v }) => F.scaledDotProductAttention(q!, k!, v!, { enableGqa: true }),
};

async function run(c: OracleCase): Promise<void> {
  const fn = CASES[c.name] ?? assert.fail(`no translation for ${c.name}`);
  const inputs: T = {};
  for (const [k, s] of Object.entries(c.inputs)) {
    inputs[k] = torch.tensor(s.data.map(num), { dtype: DT[s.dtype]! }).reshape(s.shape);
    if (s.grad) inputs[k]!.requiresGrad = true;
  }
  const res = fn(inputs);
  const outs = Array.isArray(res) ? res : [res];
  assert.equal(outs.length, c.outputs.length, `${c.name}: number of outputs`);
  let loss: Tensor | null = null;
  for (let i = 0; i < outs.length; i++) {
    const o = outs[i]!;
    const want = c.outputs[i]!;
    assert.deepEqual(o.shape, want.shape, `${c.name}: output ${i} shape`);
    assert.equal(o.dtype, DT[want.dtype], `${c.name}: output ${i} dtype`);
    if (want.dtype === "int64") assert.deepEqual(await flat(o), want.data.map(num), `${c.name}: output ${i}`);
    else assertClose(`${c.name}: output ${i}`, await flat(o), [want.data.map(num)], 2e-5, 2e-4);
    if (want.gw && o.requiresGrad) {
      const term = torch.sum(torch.mul(o, torch.tensor(want.gw.map(num)).reshape(want.shape)));
      loss = loss ? torch.add(loss, term) : term;
    }
  }
  const names = Object.keys(c.grads);
  if (!names.length) return;
  assert.ok(loss, `${c.name}: output does not require grad`);
  loss.backward();
  for (const k of names) {
    const g = inputs[k]!.grad;
    const want = c.grads[k];
    if (!want) continue;
    assert.ok(g, `${c.name}: no gradient for ${k}`);
    assertClose(`${c.name}: grad of ${k}`, await flat(g), [want.map(num)], 2e-5, 2e-4);
  }
}

test("every oracle case has a translation", () => {
  assert.deepEqual(oracle.cases.map((c) => c.name).filter((n) => !CASES[n]), []);
});
for (const mode of ["debug", "strict", "fused"] as const)
  for (const c of oracle.cases) test(`${mode} ${c.name}`, () => torch.withEagerMode(mode, () => run(c)));
