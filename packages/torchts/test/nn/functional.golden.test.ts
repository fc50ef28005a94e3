// torch.nn.functional against the golden PyTorch cases (outputs and input gradients), in
// every eager mode.
import { test } from "node:test";
import * as torch from "../../src/index.js";
import { runGolden, type Translation } from "./functional_golden.js";

const F = torch.nn.functional;

const CASES: Record<string, Translation> = {
  softmax__last: ({ x }) => F.softmax(x!, -1),
  softmax__dim0: ({ x }) => F.softmax(x!, 0),
  softmax__3d_dim1: ({ x }) => x!.softmax(1),
  log_softmax__last: ({ x }) => F.logSoftmax(x!, -1),
  log_softmax__dim1_3d: ({ x }) => x!.logSoftmax(1),
  gelu__none: ({ x }) => F.gelu(x!),
  gelu__tanh: ({ x }) => F.gelu(x!, { approximate: "tanh" }),
  silu: ({ x }) => F.silu(x!),
  softplus: ({ x }) => F.softplus(x!),
  softplus__beta2: ({ x }) => F.softplus(x!, { beta: 2, threshold: 10 }),
  leaky_relu: ({ x }) => F.leakyRelu(x!, 0.1),
  layer_norm__last: ({ x, w, b }) => F.layerNorm(x!, [8], { weight: w, bias: b, eps: 1e-5 }),
  layer_norm__2dims: ({ x, w, b }) => F.layerNorm(x!, [3, 8], { weight: w, bias: b, eps: 1e-5 }),
  layer_norm__noaffine: ({ x }) => F.layerNorm(x!, [6], { eps: 1e-6 }),
  rms_norm: ({ x, w }) => F.rmsNorm(x!, [16], { weight: w, eps: 1e-6 }),
  "rms_norm__eps1e-5": ({ x, w }) => F.rmsNorm(x!, [24], { weight: w, eps: 1e-5 }),
  embedding: ({ idx, w }) => F.embedding(idx!, w!),
  embedding__padding_idx: ({ idx, w }) => F.embedding(idx!, w!, { paddingIdx: 0 }),
  cross_entropy: ({ logits, target }) => F.crossEntropy(logits!, target!),
  cross_entropy__ignore_index: ({ logits, target }) => F.crossEntropy(logits!, target!),
  cross_entropy__ignore_index2: ({ logits, target }) => F.crossEntropy(logits!, target!, { ignoreIndex: 2 }),
  cross_entropy__label_smoothing: ({ logits, target }) => F.crossEntropy(logits!, target!, { labelSmoothing: 0.1 }),
  cross_entropy__label_smoothing_ignore: ({ logits, target }) =>
    F.crossEntropy(logits!, target!, { ignoreIndex: -100, labelSmoothing: 0.2 }),
  cross_entropy__sum: ({ logits, target }) => F.crossEntropy(logits!, target!, { reduction: "sum" }),
  cross_entropy__none: ({ logits, target }) => F.crossEntropy(logits!, target!, { reduction: "none" }),
  cross_entropy__3d: ({ logits, target }) => F.crossEntropy(logits!, target!),
  cross_entropy__weight: ({ logits, target, cw }) => F.crossEntropy(logits!, target!, { weight: cw }),
  cross_entropy__probs: ({ logits, probs }) => F.crossEntropy(logits!, probs!),
  nll_loss: ({ logp, target }) => F.nllLoss(logp!, target!),
  nll_loss__ignore_index: ({ logp, target }) => F.nllLoss(logp!, target!, { ignoreIndex: -100 }),
  nll_loss__weight: ({ logp, target, cw }) => F.nllLoss(logp!, target!, { weight: cw }),
  nll_loss__sum: ({ logp, target }) => F.nllLoss(logp!, target!, { reduction: "sum" }),
  mse_loss: ({ a, b }) => F.mseLoss(a!, b!),
  mse_loss__sum: ({ a, b }) => F.mseLoss(a!, b!, { reduction: "sum" }),
  mse_loss__none: ({ a, b }) => F.mseLoss(a!, b!, { reduction: "none" }),
  conv1d: ({ x, w, b }) => F.conv1d(x!, w!, b),
  conv1d__stride_pad_dil: ({ x, w, b }) => F.conv1d(x!, w!, b, { stride: 2, padding: 2, dilation: 2 }),
  conv1d__groups: ({ x, w }) => F.conv1d(x!, w!, null, { padding: 1, groups: 2 }),
  conv2d: ({ x, w, b }) => F.conv2d(x!, w!, b),
  conv2d__stride2_pad1: ({ x, w, b }) => F.conv2d(x!, w!, b, { stride: 2, padding: 1 }),
  conv2d__asym: ({ x, w, b }) => F.conv2d(x!, w!, b, { stride: [2, 1], padding: [1, 0], dilation: [2, 1] }),
  conv2d__groups: ({ x, w, b }) => F.conv2d(x!, w!, b, { padding: 1, groups: 2 }),
  conv2d__depthwise: ({ x, w }) => F.conv2d(x!, w!, null, { padding: 1, groups: 3 }),
  conv2d__same: ({ x, w, b }) => F.conv2d(x!, w!, b, { padding: "same", dilation: 2 }),
  conv_transpose2d: ({ x, w, b }) => F.convTranspose2d(x!, w!, b, { stride: 2, padding: 1, outputPadding: 1 }),
  conv_transpose2d__groups_dil: ({ x, w, b }) => F.convTranspose2d(x!, w!, b, { stride: 1, padding: 0, groups: 2, dilation: 2 }),
  conv_transpose2d__simple: ({ x, w }) => F.convTranspose2d(x!, w!),
  max_pool2d__k2: ({ x }) => F.maxPool2d(x!, 2),
  max_pool2d__k3s2p1: ({ x }) => F.maxPool2d(x!, 3, { stride: 2, padding: 1 }),
  max_pool2d__ceil: ({ x }) => F.maxPool2d(x!, { kernelSize: 2, stride: 2, ceilMode: true }),
  avg_pool2d__k2: ({ x }) => F.avgPool2d(x!, 2),
  avg_pool2d__pad_include: ({ x }) => F.avgPool2d(x!, 3, { stride: 2, padding: 1 }),
  avg_pool2d__pad_exclude: ({ x }) => F.avgPool2d(x!, { kernelSize: 3, stride: 2, padding: 1, countIncludePad: false }),
  adaptive_avg_pool2d__1x1: ({ x }) => F.adaptiveAvgPool2d(x!, 1),
  adaptive_avg_pool2d__nondiv: ({ x }) => F.adaptiveAvgPool2d(x!, [3, 2]),
  batch_norm__train: ({ x, running_mean, running_var, w, b }) => {
    const rm = running_mean!.clone();
    const rv = running_var!.clone();
    const y = F.batchNorm(x!, rm, rv, { weight: w, bias: b, training: true, momentum: 0.1, eps: 1e-5 });
    return [y, rm, rv];
  },
  batch_norm__train_2d: ({ x, running_mean, running_var, w, b }) => {
    const rm = running_mean!.clone();
    const rv = running_var!.clone();
    return [F.batchNorm(x!, rm, rv, { weight: w, bias: b, training: true }), rm, rv];
  },
  batch_norm__eval: ({ x, running_mean, running_var, w, b }) =>
    F.batchNorm(x!, running_mean!, running_var!, { weight: w, bias: b, training: false, eps: 1e-5 }),
  group_norm: ({ x, w, b }) => F.groupNorm(x!, 3, { weight: w, bias: b, eps: 1e-5 }),
  group_norm__3d: ({ x, w, b }) => F.groupNorm(x!, 2, { weight: w, bias: b, eps: 1e-5 }),
  dropout__p0: ({ x }) => F.dropout(x!, { p: 0, training: true }),
  pad__constant_1d: ({ x }) => F.pad(x!, [1, 2], { value: 0.5 }),
  pad__constant_2d: ({ x }) => F.pad(x!, [1, 1, 2, 0]),
  pad__constant_negative: ({ x }) => F.pad(x!, [-1, 2]),
  pad__reflect_1d: ({ x }) => F.pad(x!, [2, 3], { mode: "reflect" }),
  pad__reflect_2d: ({ x }) => F.pad(x!, [1, 2, 2, 1], { mode: "reflect" }),
  pad__replicate_2d: ({ x }) => F.pad(x!, [2, 1, 0, 2], { mode: "replicate" }),
  sdpa__causal: ({ q, k, v }) => F.scaledDotProductAttention(q!, k!, v!, { isCausal: true }),
  sdpa__full: ({ q, k, v }) => F.scaledDotProductAttention(q!, k!, v!),
  sdpa__causal_offset: ({ q, k, v }) => F.scaledDotProductAttention(q!, k!, v!, { isCausal: true }),
  sdpa__bool_mask: ({ q, k, v, keep }) => F.scaledDotProductAttention(q!, k!, v!, { attnMask: keep }),
  sdpa__gqa: ({ q, k, v }) => F.scaledDotProductAttention(q!, k!, v!, { isCausal: true, enableGqa: true }),
};

for (const mode of ["debug", "strict", "fused"] as const)
  for (const [name, fn] of Object.entries(CASES))
    test(`${mode} ${name}`, () => torch.withEagerMode(mode, () => runGolden(name, fn)));
