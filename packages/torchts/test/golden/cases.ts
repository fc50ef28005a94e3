// The torchts translation of every golden op case's python `code` (fixtures/golden_ops/manifest.json).
// Keyword arguments become option objects; tuple results (values, indices) become arrays in
// PyTorch's output order.
import type * as TorchModule from "../../src/index.js";
import type { Tensor } from "../../src/index.js";

export type Torch = typeof TorchModule;
export type CaseFn = (inputs: Record<string, Tensor>, torch: Torch) => Tensor | Tensor[];

const F = (t: Torch) => t.nn.functional;
const pair = (r: { values: Tensor; indices: Tensor }): Tensor[] => [r.values, r.indices];

// ---- the manifest's python helpers ----
function rmsNorm(t: Torch, x: Tensor, w: Tensor, eps: number): Tensor {
  return x.mul(t.rsqrt(x.pow(2).mean(-1, true).add(eps))).mul(w);
}
function sdpaExplicit(t: Torch, q: Tensor, k: Tensor, v: Tensor, causal: boolean, scale?: number): Tensor {
  const L = q.shape[q.ndim - 2]!;
  const S = k.shape[k.ndim - 2]!;
  const s = scale ?? 1 / Math.sqrt(q.shape[q.ndim - 1]!);
  let scores = t.matmul(q, k.transpose(-2, -1)).mul(s);
  if (causal) {
    const keep = t.ones(L, S, { dtype: t.bool }).tril(S - L);
    scores = scores.maskedFill(t.bitwiseNot(keep), -Infinity);
  }
  return t.matmul(F(t).softmax(scores, -1), v);
}
function sdpaMasked(t: Torch, q: Tensor, k: Tensor, v: Tensor, keep: Tensor): Tensor {
  const scale = 1 / Math.sqrt(q.shape[q.ndim - 1]!);
  const scores = t.matmul(q, k.transpose(-2, -1)).mul(scale).maskedFill(t.bitwiseNot(keep), -Infinity);
  return t.matmul(F(t).softmax(scores, -1), v);
}
function sdpaGqa(t: Torch, q: Tensor, k: Tensor, v: Tensor, nRep: number): Tensor {
  return sdpaExplicit(t, q, k.repeatInterleave(nRep, 1), v.repeatInterleave(nRep, 1), true);
}
function batchNormTrain(t: Torch, x: Tensor, runningMean: Tensor, runningVar: Tensor, w: Tensor, b: Tensor): Tensor[] {
  const rm = runningMean.clone();
  const rv = runningVar.clone();
  const y = F(t).batchNorm(x, rm, rv, { weight: w, bias: b, training: true, momentum: 0.1, eps: 1e-5 });
  return [y, rm, rv];
}

export const CASES: Record<string, CaseFn> = {
  // ---- unary ----
  exp: ({ x }, t) => t.exp(x),
  log: ({ x }, t) => t.log(x),
  sqrt: ({ x }, t) => t.sqrt(x),
  rsqrt: ({ x }, t) => t.rsqrt(x),
  sin: ({ x }, t) => t.sin(x),
  cos: ({ x }, t) => t.cos(x),
  tanh: ({ x }, t) => t.tanh(x),
  sigmoid: ({ x }, t) => t.sigmoid(x),
  relu: ({ x }, t) => t.relu(x),
  gelu__none: ({ x }, t) => F(t).gelu(x),
  gelu__tanh: ({ x }, t) => F(t).gelu(x, { approximate: "tanh" }),
  silu: ({ x }, t) => F(t).silu(x),
  softplus: ({ x }, t) => F(t).softplus(x),
  softplus__beta2: ({ x }, t) => F(t).softplus(x, { beta: 2.0, threshold: 10.0 }),
  abs: ({ x }, t) => t.abs(x),
  neg: ({ x }, t) => t.neg(x),
  sign: ({ x }, t) => t.sign(x),
  floor: ({ x }, t) => t.floor(x),
  ceil: ({ x }, t) => t.ceil(x),
  round: ({ x }, t) => t.round(x),
  reciprocal: ({ x }, t) => t.reciprocal(x),
  erf: ({ x }, t) => t.erf(x),
  clamp: ({ x }, t) => t.clamp(x, -0.5, 0.5),
  clamp__min_only: ({ x }, t) => t.clamp(x, 0.1),
  pow_scalar__2: ({ x }, t) => t.pow(x, 2),
  pow_scalar__3: ({ x }) => x.pow(3),
  pow_scalar__0_5: ({ x }) => x.pow(0.5),
  pow_scalar__neg1_5: ({ x }) => x.pow(-1.5),
  leaky_relu: ({ x }, t) => F(t).leakyRelu(x, 0.1),
  square: ({ x }, t) => t.square(x),
  log1p: ({ x }, t) => t.log1p(x),
  expm1: ({ x }, t) => t.expm1(x),

  // ---- binary ----
  add__same: ({ a, b }) => a.add(b),
  add__broadcast3d: ({ a, b }, t) => t.add(a, b),
  add__0d: ({ a, b }) => a.add(b),
  add__alpha: ({ a, b }, t) => t.add(a, b, { alpha: -2.5 }),
  sub__broadcast: ({ a, b }) => a.sub(b),
  mul__broadcast: ({ a, b }) => a.mul(b),
  mul__leading1: ({ a, b }) => a.mul(b),
  div__broadcast: ({ a, b }) => a.div(b),
  div__same: ({ a, b }, t) => t.div(a, b),
  pow__tensor: ({ a, b }, t) => t.pow(a, b),
  pow__negbase_intexp: ({ a, b }, t) => t.pow(a, b),
  maximum: ({ a, b }, t) => t.maximum(a, b),
  maximum__broadcast: ({ a, b }, t) => t.maximum(a, b),
  minimum: ({ a, b }, t) => t.minimum(a, b),
  atan2: ({ y, x }, t) => t.atan2(y, x),
  atan2__broadcast: ({ y, x }, t) => t.atan2(y, x),
  eq: ({ a, b }, t) => t.eq(a, b),
  eq__broadcast: ({ a, b }) => a.eq(b),
  lt: ({ a, b }, t) => t.lt(a, b),
  lt__broadcast: ({ a, b }) => a.lt(b),
  ge: ({ a, b }, t) => t.ge(a, b),
  ge__scalar: ({ x }) => x.ge(0.25),
  where: ({ cond, x, y }, t) => t.where(cond, x, y),
  where__broadcast_cond: ({ cond, x, y }, t) => t.where(cond, x, y),
  where__scalar: ({ x }, t) => t.where(x.gt(0), x, t.zerosLike(x)),
  add_scalar: ({ x }) => x.add(2.5),
  mul_scalar: ({ x }) => x.mul(-3.0),
  rsub_scalar: ({ x }, t) => t.sub(1.0, x),
  div_scalar: ({ x }) => x.div(4.0),
  rdiv_scalar: ({ x }, t) => t.div(2.0, x),
  rpow_scalar: ({ x }, t) => t.pow(2.0, x),

  // ---- reductions ----
  sum__all: ({ x }) => x.sum(),
  sum__dim1: ({ x }) => x.sum(1),
  sum__dims02_keepdim: ({ x }) => x.sum([0, 2], true),
  sum__large: ({ x }) => x.sum(-1),
  mean__all: ({ x }) => x.mean(),
  mean__dim_neg1_keepdim: ({ x }) => x.mean(-1, true),
  mean__dims01: ({ x }, t) => t.mean(x, [0, 1]),
  max__all: ({ x }) => x.max(),
  max__dim1: ({ x }, t) => pair(t.max(x, 1)),
  max__dim_keepdim: ({ x }, t) => pair(t.max(x, -1, true)),
  min__dim0: ({ x }, t) => pair(t.min(x, 0)),
  min__all: ({ x }) => x.min(),
  amax__dims: ({ x }, t) => t.amax(x, [1, 2]),
  argmax__all: ({ x }) => x.argmax(),
  argmax__dim1_keepdim: ({ x }) => x.argmax(1, true),
  argmin__dim0: ({ x }, t) => t.argmin(x, 0),
  prod__dim1: ({ x }) => x.prod(1),
  prod__all: ({ x }) => x.prod(),
  var__dim1: ({ x }) => x.var(1),
  var__dim1_biased: ({ x }) => x.var(1, false),
  var__correction0_keepdim: ({ x }, t) => t.var(x, 0, { correction: 0, keepdim: true }),
  var__correction2: ({ x }, t) => t.var(x, -1, { correction: 2 }),
  var__all: ({ x }) => x.var(),
  std__dim_keepdim: ({ x }) => x.std(-1, { keepdim: true }),
  std__dim0_biased: ({ x }) => x.std(0, false),
  std__correction0: ({ x }, t) => t.std(x, 1, { correction: 0 }),
  std__all: ({ x }) => x.std(),
  logsumexp__dim1: ({ x }, t) => t.logsumexp(x, 1),
  logsumexp__dim0_keepdim: ({ x }, t) => t.logsumexp(x, 0, true),
  norm__fro: ({ x }, t) => t.norm(x),
  norm__p1_dim: ({ x }, t) => t.norm(x, 1, 1),
  norm__p2_dim_keepdim: ({ x }) => x.norm(2, -1, true),
  norm__inf_dim: ({ x }, t) => t.norm(x, Infinity, 1),
  norm__p3: ({ x }, t) => t.norm(x, 3),
  cumsum__dim0: ({ x }, t) => t.cumsum(x, 0),
  cumsum__dim_neg1: ({ x }) => x.cumsum(-1),
  cumprod__dim1: ({ x }, t) => t.cumprod(x, 1),

  // ---- softmax family ----
  softmax__last: ({ x }, t) => F(t).softmax(x, -1),
  softmax__dim0: ({ x }, t) => F(t).softmax(x, 0),
  softmax__3d_dim1: ({ x }, t) => F(t).softmax(x, 1),
  log_softmax__last: ({ x }, t) => F(t).logSoftmax(x, -1),
  log_softmax__dim1_3d: ({ x }, t) => F(t).logSoftmax(x, 1),

  // ---- matmul ----
  matmul__1d_1d: ({ a, b }, t) => t.matmul(a, b),
  matmul__2d_1d: ({ a, b }) => a.matmul(b),
  matmul__1d_2d: ({ a, b }) => a.matmul(b),
  matmul__2d_2d: ({ a, b }, t) => t.matmul(a, b),
  matmul__batched: ({ a, b }, t) => t.matmul(a, b),
  matmul__broadcast_batch: ({ a, b }, t) => t.matmul(a, b),
  matmul__3d_2d: ({ a, b }) => a.matmul(b),
  matmul__1d_3d: ({ a, b }, t) => t.matmul(a, b),
  matmul__3d_1d: ({ a, b }, t) => t.matmul(a, b),
  bmm: ({ a, b }, t) => t.bmm(a, b),
  linear__bias: ({ x, w, b }, t) => F(t).linear(x, w, b),
  linear__nobias_3d: ({ x, w }, t) => F(t).linear(x, w),

  // ---- normalization ----
  layer_norm__last: ({ x, w, b }, t) => F(t).layerNorm(x, [8], { weight: w, bias: b, eps: 1e-5 }),
  layer_norm__2dims: ({ x, w, b }, t) => F(t).layerNorm(x, [3, 8], { weight: w, bias: b, eps: 1e-5 }),
  layer_norm__noaffine: ({ x }, t) => F(t).layerNorm(x, [6], { eps: 1e-6 }),
  rms_norm: ({ x, w }, t) => rmsNorm(t, x, w, 1e-6),
  "rms_norm__eps1e-5": ({ x, w }, t) => rmsNorm(t, x, w, 1e-5),

  // ---- embedding and losses ----
  embedding: ({ idx, w }, t) => F(t).embedding(idx, w),
  embedding__padding_idx: ({ idx, w }, t) => F(t).embedding(idx, w, { paddingIdx: 0 }),
  cross_entropy: ({ logits, target }, t) => F(t).crossEntropy(logits, target),
  cross_entropy__ignore_index: ({ logits, target }, t) => F(t).crossEntropy(logits, target),
  cross_entropy__ignore_index2: ({ logits, target }, t) => F(t).crossEntropy(logits, target, { ignoreIndex: 2 }),
  cross_entropy__label_smoothing: ({ logits, target }, t) => F(t).crossEntropy(logits, target, { labelSmoothing: 0.1 }),
  cross_entropy__label_smoothing_ignore: ({ logits, target }, t) =>
    F(t).crossEntropy(logits, target, { ignoreIndex: -100, labelSmoothing: 0.2 }),
  cross_entropy__sum: ({ logits, target }, t) => F(t).crossEntropy(logits, target, { reduction: "sum" }),
  cross_entropy__none: ({ logits, target }, t) => F(t).crossEntropy(logits, target, { reduction: "none" }),
  cross_entropy__3d: ({ logits, target }, t) => F(t).crossEntropy(logits, target),
  cross_entropy__weight: ({ logits, target, cw }, t) => F(t).crossEntropy(logits, target, { weight: cw }),
  cross_entropy__probs: ({ logits, probs }, t) => F(t).crossEntropy(logits, probs),
  nll_loss: ({ logp, target }, t) => F(t).nllLoss(logp, target),
  nll_loss__ignore_index: ({ logp, target }, t) => F(t).nllLoss(logp, target, { ignoreIndex: -100 }),
  nll_loss__weight: ({ logp, target, cw }, t) => F(t).nllLoss(logp, target, { weight: cw }),
  nll_loss__sum: ({ logp, target }, t) => F(t).nllLoss(logp, target, { reduction: "sum" }),
  mse_loss: ({ a, b }, t) => F(t).mseLoss(a, b),
  mse_loss__sum: ({ a, b }, t) => F(t).mseLoss(a, b, { reduction: "sum" }),
  mse_loss__none: ({ a, b }, t) => F(t).mseLoss(a, b, { reduction: "none" }),

  // ---- convolution and pooling ----
  conv1d: ({ x, w, b }, t) => F(t).conv1d(x, w, b),
  conv1d__stride_pad_dil: ({ x, w, b }, t) => F(t).conv1d(x, w, b, { stride: 2, padding: 2, dilation: 2 }),
  conv1d__groups: ({ x, w }, t) => F(t).conv1d(x, w, null, { padding: 1, groups: 2 }),
  conv2d: ({ x, w, b }, t) => F(t).conv2d(x, w, b),
  conv2d__stride2_pad1: ({ x, w, b }, t) => F(t).conv2d(x, w, b, { stride: 2, padding: 1 }),
  conv2d__asym: ({ x, w, b }, t) => F(t).conv2d(x, w, b, { stride: [2, 1], padding: [1, 0], dilation: [2, 1] }),
  conv2d__groups: ({ x, w, b }, t) => F(t).conv2d(x, w, b, { padding: 1, groups: 2 }),
  conv2d__depthwise: ({ x, w }, t) => F(t).conv2d(x, w, null, { padding: 1, groups: 3 }),
  conv2d__same: ({ x, w, b }, t) => F(t).conv2d(x, w, b, { padding: "same", dilation: 2 }),
  conv_transpose2d: ({ x, w, b }, t) => F(t).convTranspose2d(x, w, b, { stride: 2, padding: 1, outputPadding: 1 }),
  conv_transpose2d__groups_dil: ({ x, w, b }, t) =>
    F(t).convTranspose2d(x, w, b, { stride: 1, padding: 0, groups: 2, dilation: 2 }),
  conv_transpose2d__simple: ({ x, w }, t) => F(t).convTranspose2d(x, w),
  max_pool2d__k2: ({ x }, t) => F(t).maxPool2d(x, { kernelSize: 2 }),
  max_pool2d__k3s2p1: ({ x }, t) => F(t).maxPool2d(x, { kernelSize: 3, stride: 2, padding: 1 }),
  max_pool2d__ceil: ({ x }, t) => F(t).maxPool2d(x, { kernelSize: 2, stride: 2, ceilMode: true }),
  avg_pool2d__k2: ({ x }, t) => F(t).avgPool2d(x, { kernelSize: 2 }),
  avg_pool2d__pad_include: ({ x }, t) => F(t).avgPool2d(x, { kernelSize: 3, stride: 2, padding: 1 }),
  avg_pool2d__pad_exclude: ({ x }, t) => F(t).avgPool2d(x, { kernelSize: 3, stride: 2, padding: 1, countIncludePad: false }),
  adaptive_avg_pool2d__1x1: ({ x }, t) => F(t).adaptiveAvgPool2d(x, 1),
  adaptive_avg_pool2d__nondiv: ({ x }, t) => F(t).adaptiveAvgPool2d(x, [3, 2]),
  batch_norm__train: ({ x, running_mean, running_var, w, b }, t) => batchNormTrain(t, x, running_mean, running_var, w, b),
  batch_norm__eval: ({ x, running_mean, running_var, w, b }, t) =>
    F(t).batchNorm(x, running_mean, running_var, { weight: w, bias: b, training: false, eps: 1e-5 }),
  batch_norm__train_2d: ({ x, running_mean, running_var, w, b }, t) => batchNormTrain(t, x, running_mean, running_var, w, b),
  group_norm: ({ x, w, b }, t) => F(t).groupNorm(x, 3, { weight: w, bias: b, eps: 1e-5 }),
  group_norm__3d: ({ x, w, b }, t) => F(t).groupNorm(x, 2, { weight: w, bias: b, eps: 1e-5 }),
  dropout__p0: ({ x }, t) => F(t).dropout(x, { p: 0.0, training: true }),

  // ---- indexing ----
  gather__dim1: ({ x, idx }, t) => t.gather(x, 1, idx),
  gather__dim0: ({ x, idx }) => x.gather(0, idx),
  scatter_add__dim0: ({ x, idx, src }) => x.scatterAdd(0, idx, src),
  scatter_add__dim1: ({ x, idx, src }, t) => t.scatterAdd(x, 1, idx, src),
  index_select__dim0: ({ x, idx }, t) => t.indexSelect(x, 0, idx),
  index_select__dim1: ({ x, idx }) => x.indexSelect(1, idx),
  slice__steps: ({ x }) => x.index("::2, 1:7:3"),
  slice__negative: ({ x }) => x.index("-3:", -1),
  slice__mixed3d: ({ x }) => x.index(":", 1, "::2"),
  slice__ellipsis_none: ({ x }) => x.index("...", null, "1:3"),
  slice__narrow: ({ x }, t) => t.narrow(x, 1, 2, 3),
  masked_fill: ({ x, mask }) => x.maskedFill(mask, -1e4),
  masked_fill__broadcast: ({ x, mask }) => x.maskedFill(mask, 0.5),
  masked_fill__neginf: ({ x, mask }, t) => F(t).softmax(x.maskedFill(mask, -Infinity), -1),
  adv_index__1d: ({ x, idx }) => x.index(idx),
  adv_index__pairs: ({ x, i, j }) => x.index(i, j),
  adv_index__cols: ({ x, idx }) => x.index(":", idx),
  adv_index__bool: ({ x, mask }) => x.index(mask),
  adv_index__bool_rows: ({ x, mask }) => x.index(mask),
  adv_index__negative: ({ x, idx }) => x.index(idx),
  adv_index__broadcast: ({ x, i, j }) => x.index(i.index(":", null), j.index(null, ":")),
  index_put__accumulate: ({ x, idx, v }, t) => t.indexPut(x, [idx], v, { accumulate: true }),

  // ---- views and movement ----
  reshape: ({ x }) => x.reshape(2, 3, 4),
  reshape__infer: ({ x }) => x.reshape(-1, 8),
  reshape__noncontig: ({ x }) => x.t().reshape(-1),
  view: ({ x }) => x.view(4, 2, 3),
  flatten: ({ x }, t) => t.flatten(x, 1),
  permute: ({ x }) => x.permute(2, 0, 1),
  transpose: ({ x }) => x.transpose(0, 2),
  transpose__neg: ({ x }, t) => t.transpose(x, -1, -2),
  expand: ({ x }) => x.expand(3, 4),
  expand__newdims: ({ x }) => x.expand(2, -1, 3),
  repeat: ({ x }) => x.repeat(2, 1, 3),
  cat__dim0: ({ a, b, c }, t) => t.cat([a, b, c], 0),
  cat__dim1: ({ a, b }, t) => t.cat([a, b], 1),
  stack__dim0: ({ a, b, c }, t) => t.stack([a, b, c]),
  stack__dim_neg1: ({ a, b }, t) => t.stack([a, b], -1),
  split__sizes: ({ x }, t) => t.split(x, [2, 4, 1], 0),
  split__int: ({ x }) => x.split(3, 0),
  chunk__dim0: ({ x }) => x.chunk(3, 0),
  chunk__dim1: ({ x }, t) => t.chunk(x, 3, 1),
  squeeze__all: ({ x }) => x.squeeze(),
  squeeze__dim: ({ x }) => x.squeeze(2),
  squeeze__noop: ({ x }) => x.squeeze(1),
  unsqueeze: ({ x }) => x.unsqueeze(1),
  unsqueeze__neg: ({ x }) => x.unsqueeze(-1),
  flip: ({ x }) => x.flip(0),
  flip__multi: ({ x }, t) => t.flip(x, [0, 2]),
  roll: ({ x }) => x.roll(2, 1),
  roll__multi: ({ x }, t) => t.roll(x, [1, -2], [0, 1]),
  roll__flat: ({ x }) => x.roll(3),
  tril: ({ x }) => x.tril(),
  tril__neg1: ({ x }, t) => t.tril(x, -1),
  triu__1: ({ x }) => x.triu(1),
  triu__neg2_batched: ({ x }, t) => t.triu(x, -2),
  pad__constant_1d: ({ x }, t) => F(t).pad(x, [1, 2], { value: 0.5 }),
  pad__constant_2d: ({ x }, t) => F(t).pad(x, [1, 1, 2, 0]),
  pad__constant_negative: ({ x }, t) => F(t).pad(x, [-1, 2]),
  pad__reflect_1d: ({ x }, t) => F(t).pad(x, [2, 3], { mode: "reflect" }),
  pad__reflect_2d: ({ x }, t) => F(t).pad(x, [1, 2, 2, 1], { mode: "reflect" }),
  pad__replicate_2d: ({ x }, t) => F(t).pad(x, [2, 1, 0, 2], { mode: "replicate" }),
  contiguous__permuted: ({ x }) => x.permute(1, 0, 2).contiguous().view(3, -1),

  // ---- sorting ----
  topk: ({ x }, t) => pair(t.topk(x, 3, { dim: 1 })),
  topk__smallest_dim0: ({ x }) => pair(x.topk(2, { dim: 0, largest: false })),
  sort: ({ x }, t) => pair(t.sort(x, -1)),
  sort__desc_dim0: ({ x }) => pair(x.sort({ dim: 0, descending: true })),
  argsort: ({ x }, t) => t.argsort(x, 1),

  // ---- attention ----
  sdpa__causal: ({ q, k, v }, t) => sdpaExplicit(t, q, k, v, true),
  sdpa__full: ({ q, k, v }, t) => sdpaExplicit(t, q, k, v, false),
  sdpa__causal_offset: ({ q, k, v }, t) => sdpaExplicit(t, q, k, v, true),
  sdpa__bool_mask: ({ q, k, v, keep }, t) => sdpaMasked(t, q, k, v, keep),
  sdpa__gqa: ({ q, k, v }, t) => sdpaGqa(t, q, k, v, 2),

  // ---- integer and bool arithmetic ----
  int__add_broadcast: ({ a, b }) => a.add(b),
  int__sub_mul: ({ a, b }) => a.sub(b).mul(a),
  int__floor_divide: ({ a, b }, t) => t.div(a, b, { roundingMode: "floor" }),
  int__trunc_divide: ({ a, b }, t) => t.div(a, b, { roundingMode: "trunc" }),
  int__floordiv_operator: ({ a, b }, t) => t.floorDivide(a, b),
  int__true_divide: ({ a, b }) => a.div(b),
  int__remainder: ({ a, b }, t) => t.remainder(a, b),
  int__fmod: ({ a, b }, t) => t.fmod(a, b),
  int__sum: ({ a }) => a.sum(1),
  int32__sum_promotes: ({ a }) => a.sum(),
  int32__add: ({ a, b }) => a.add(b),
  int32__add_int64: ({ a, b }) => a.add(b),
  int__float_promote: ({ a, x }) => a.add(x),
  int__mul_pyfloat: ({ a }) => a.mul(2.5),
  int__mul_pyint: ({ a }) => a.mul(3),
  int__cumsum: ({ a }, t) => t.cumsum(a, 0),
  int__argmax_ties: ({ a }, t) => t.argmax(a, 1),
  int__max_dim: ({ a }, t) => pair(t.max(a, 0)),
  int__compare: ({ a, b }, t) => t.stack([a.eq(b), a.ne(b), a.gt(b), a.le(b)]),
  int__abs_neg: ({ a }, t) => t.stack([t.abs(a), a.neg(), t.sign(a)]),
  int__clamp: ({ a }, t) => t.clamp(a, -5, 5),
  int__where: ({ c, a, b }, t) => t.where(c, a, b),
  int__pow: ({ a }) => a.pow(2),
  bool__logic: ({ a, b }, t) =>
    t.stack([t.bitwiseAnd(a, b), t.bitwiseOr(a, b), t.bitwiseXor(a, b), t.bitwiseNot(a), t.logicalAnd(a, b), t.logicalNot(b)]),
  bool__sum: ({ m }) => m.sum(),
  bool__any_all: ({ m }, t) => t.stack([m.any(1), m.all(1)]),
  bool__from_compare_count: ({ x }) => x.gt(0).sum(0),
  bool__mul_float: ({ m, x }) => m.mul(x),

  // ---- casts ----
  cast__float_to_int: ({ x }, t) => x.to(t.int64),
  cast__float_to_int32: ({ x }, t) => x.to(t.int32),
  cast__int_to_float: ({ a }, t) => a.to(t.float32),
  cast__float_to_bool: ({ x }, t) => x.to(t.bool),
  cast__bool_to_float: ({ m }) => m.float(),
  cast__to_float16: ({ x }, t) => x.to(t.float16),
  cast__to_bfloat16: ({ x }, t) => x.to(t.bfloat16),
  cast__to_float64: ({ x }, t) => x.to(t.float64),
  float64__arith: ({ x }) => x.double().div(3.0).exp().sub(1.0),
  cast__float16_roundtrip: ({ x }, t) => x.to(t.float16).to(t.float32),

  // ---- special values ----
  special__log: ({ x }, t) => t.log(x),
  special__sqrt: ({ x }, t) => t.sqrt(x),
  special__div: ({ a, b }) => a.div(b),
  special__exp_overflow: ({ x }, t) => t.exp(x),
  special__sigmoid_tanh: ({ x }, t) => t.stack([t.sigmoid(x), t.tanh(x)]),
  special__softmax_neginf: ({ x }, t) => F(t).softmax(x, -1),
  special__nan_propagation: ({ x }, t) => t.stack([x.add(1), x.mul(0), t.relu(x), t.maximum(x, t.zerosLike(x))]),
  special__max_nan: ({ x }, t) => t.stack([x.max(), x.min(), x.sum()]),
  special__logsumexp_inf: ({ x }, t) => t.logsumexp(x, -1),
};
