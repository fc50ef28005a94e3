// Every public op is in the op table: the functions torch exports, torch.nn.functional's, and
// Tensor's methods. What is not an op (runtime controls, callback wrappers, the JS protocol
// methods) is listed here by name with the reason, so a new export must choose one or the other.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { OP_TABLE, opOf } from "../../src/ops/registry.js";

/** torch.* functions that are not ops: they take a callback (context managers, compile) or do file I/O, or register a device plugin. */
const NOT_OPS_TORCH: Record<string, string> = {
  compile: "wraps a user function (torch.compile)",
  noGrad: "runs a callback (context manager)",
  enableGrad: "runs a callback (context manager)",
  inferenceMode: "runs a callback (context manager)",
  scope: "runs a callback (memory scope)",
  withEagerMode: "runs a callback (mode scope)",
  autocast: "runs a callback (context manager)",
  gradcheck: "runs a callback",
  registerDevice: "plugin registration",
  save: "serialization (async file I/O)",
  load: "serialization (async file I/O)",
};
/** Tensor methods that are not ops: the JS protocol and accessors. */
const NOT_OPS_TENSOR: Record<string, string> = {
  toString: "String(t), called by JS with no arguments",
  toAsync: "async device transfer (webgpu.ts), validated there",
  cpuAsync: "async device transfer (webgpu.ts)",
};

function publicFunctions(ns: object): [string, unknown][] {
  return Object.entries(ns).filter(([k, v]) => typeof v === "function" && !/^[A-Z_]/.test(k));
}

test("every public torch function is an op of the table (or a listed non-op)", () => {
  const missing = publicFunctions(torch).filter(([k, f]) => !opOf(f) && !(k in NOT_OPS_TORCH)).map(([k]) => k);
  assert.deepEqual(missing, [], `not in the op table: ${missing.join(", ")}`);
});

test("every torch.nn.functional function is an op of the table", () => {
  const missing = publicFunctions(torch.nn.functional).filter(([, f]) => !opOf(f)).map(([k]) => k);
  assert.deepEqual(missing, [], `not in the op table: ${missing.join(", ")}`);
});

test("every public Tensor method is an op of the table (or a listed non-op)", () => {
  const P = torch.Tensor.prototype as unknown as Record<string, unknown>;
  const names = Object.getOwnPropertyNames(P).filter((k) => {
    const d = Object.getOwnPropertyDescriptor(P, k)!;
    return typeof d.value === "function" && k !== "constructor" && !k.startsWith("_");
  });
  const missing = names.filter((k) => !opOf(P[k]) && !(k in NOT_OPS_TENSOR));
  assert.deepEqual(missing, [], `Tensor methods not in the op table: ${missing.join(", ")}`);
});

test("the non-op lists name only things that exist", () => {
  for (const k of Object.keys(NOT_OPS_TORCH)) assert.equal(typeof (torch as Record<string, unknown>)[k], "function", k);
  for (const k of Object.keys(NOT_OPS_TENSOR))
    assert.equal(typeof (torch.Tensor.prototype as unknown as Record<string, unknown>)[k], "function", k);
});

test("every op of the golden manifest is reachable through the table", () => {
  // golden op names are PyTorch's (snake_case, some grouped: compare, logical, any_all, *_scalar)
  const keys = new Set([...OP_TABLE.values()].map((d) => d.name.toLowerCase()));
  const camel = (s: string) => s.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase()).toLowerCase();
  const groups: Record<string, string[]> = {
    add_scalar: ["add"], mul_scalar: ["mul"], div_scalar: ["div"], rdiv_scalar: ["div"], rsub_scalar: ["rsub"],
    pow_scalar: ["pow"], rpow_scalar: ["pow"], compare: ["eq", "lt", "le", "gt", "ge", "ne"],
    logical: ["logicaland", "logicalor", "logicalxor", "logicalnot"], any_all: ["any", "all"], cast: ["to"],
    float64: ["to"], nan: ["isnan"], advanced_index: ["index"], sdpa: ["scaleddotproductattention"], rms_norm: ["rmsnorm"],
    slice: ["slice"], contiguous: ["contiguous"],
  };
  const ops: string[] = JSON.parse(GOLDEN_OPS);
  const missing = ops.filter((o) => !(groups[o] ?? [camel(o)]).every((n) => keys.has(n)));
  assert.deepEqual(missing, [], `golden ops without a table entry: ${missing.join(", ")}`);
});

// the op names of ../shared/golden/ops/manifest.json (copied: tests must not depend on ../shared)
const GOLDEN_OPS = JSON.stringify([
  "abs", "adaptive_avg_pool2d", "add", "add_scalar", "advanced_index", "amax", "any_all", "argmax", "argmin", "argsort",
  "atan2", "avg_pool2d", "batch_norm", "bmm", "cast", "cat", "ceil", "chunk", "clamp", "compare", "contiguous", "conv1d",
  "conv2d", "conv_transpose2d", "cos", "cross_entropy", "cumprod", "cumsum", "div", "div_scalar", "dropout", "embedding",
  "eq", "erf", "exp", "expand", "expm1", "flatten", "flip", "float64", "floor", "floor_divide", "fmod", "gather", "ge",
  "gelu", "group_norm", "index_put", "index_select", "layer_norm", "leaky_relu", "linear", "log", "log1p", "log_softmax",
  "logical", "logsumexp", "lt", "masked_fill", "matmul", "max", "max_pool2d", "maximum", "mean", "min", "minimum",
  "mse_loss", "mul", "mul_scalar", "nan", "narrow", "neg", "nll_loss", "norm", "pad", "permute", "pow", "pow_scalar",
  "prod", "rdiv_scalar", "reciprocal", "relu", "remainder", "repeat", "reshape", "rms_norm", "roll", "round",
  "rpow_scalar", "rsqrt", "rsub_scalar", "scatter_add", "sdpa", "sigmoid", "sign", "silu", "sin", "slice", "softmax",
  "softplus", "sort", "split", "sqrt", "square", "squeeze", "stack", "std", "sub", "sum", "tanh", "topk", "transpose",
  "tril", "triu", "unsqueeze", "var", "view", "where",
]);
