// Quantized linear layers. Weight-only: y = x @ dequant(W)^T + b with float activations.
// W8A8 (linearW8A8): int8 weights and int8 activations quantized per row on the fly (dynamic,
// symmetric, one scale per token, like torchao's Int8DynamicActivationInt8WeightConfig):
//   sx = max(amax(|x|, -1) / 127, 2^-126), xq = clamp(round(x / sx), -127, 127)
//   y = (xq @ dequant(W)^T) * sx + b   (the cpu kernel sums xq * q exactly in int32 per group)
// A device that overrides the composite (cpu: linearInt8 / linearInt4 / linearW8A8) reads the
// quantized weight directly; elsewhere (webgpu, other dtypes, inputs that need gradients) the
// weight is dequantized with ordinary ops and F.linear runs, which defines the result.
//   int8: W[o, g*G + j] = q[o, g*G + j] * scale[o, g]   (q int8 [out, in], scale [out, groups])
//   int4: W[o, g*G + j] = (nibble - 8) * scale[o, g]     (uint8 [out, in/2], low nibble = even column)
import { withOp } from "../../runtime/mode.js";
import type { Tensor } from "../../tensor.js";
import { compositePrim, reshape } from "../../ops/core.js";
import * as S from "../../ops/shape_ops.js";
import { linear } from "../../ops/linalg.js";
import { isGradEnabled } from "../../autograd/grad_mode.js";

/** The float weight [out, in] of an int8 weight with one scale per row or per group of inputs. */
export function dequantizeInt8(q: Tensor, scale: Tensor): Tensor {
  const [O, I] = q.shape as [number, number];
  const G = scale.shape[1]!;
  const w = q.to(scale.dtype);
  if (G === 1) return w.mul(scale);
  return w.reshape(O, G, I / G).mul(scale.unsqueeze(-1)).reshape(O, I);
}

/** The float weight [out, inFeatures] of packed int4 nibbles with one scale per group. */
export function dequantizeInt4(packed: Tensor, scales: Tensor, inFeatures: number, groupSize: number): Tensor {
  const O = packed.shape[0]!;
  const p = packed.to("int32");
  const q = S.stack([p.bitwiseAnd(15), p.floorDivide(16)], -1).reshape(O, inFeatures / groupSize, groupSize);
  return q.sub(8).to(scales.dtype).mul(scales.unsqueeze(-1)).reshape(O, inFeatures);
}

/** The device kernel when it can serve (float32, inference), else null. */
function tryComposite(
  name: "linearInt8" | "linearInt4" | "linearW8A8", x: Tensor, q: Tensor, scale: Tensor, bias: Tensor | null, groupSize: number,
): Tensor | null {
  if (x.dtype !== "float32" || scale.dtype !== "float32" || (bias && bias.dtype !== "float32")) return null;
  if (isGradEnabled() && (x.requiresGrad || scale.requiresGrad || bias?.requiresGrad)) return null;
  if (name === "linearInt4" && groupSize % 32 !== 0) return null; // the kernel unpacks 32 nibbles at a time
  const K = x.shape[x.ndim - 1]!;
  const lead = x.shape.slice(0, -1);
  const M = lead.reduce((a, b) => a * b, 1);
  const N = q.shape[0]!;
  const inputs = [reshape(x, [M, K]), q.contiguous(), scale.contiguous()];
  if (bias) inputs.push(bias.contiguous());
  const y = compositePrim(name, { groupSize }, inputs, [M, N], "float32");
  return y && reshape(y, [...lead, N]);
}

function checkShapes(op: string, x: Tensor, inFeatures: number, outFeatures: number): void {
  if (x.ndim < 1 || x.shape[x.ndim - 1] !== inFeatures)
    throw new RangeError(
      `${op}: mat1 and mat2 shapes cannot be multiplied (${x.shape.slice(0, -1).reduce((p, q) => p * q, 1)}x${x.shape[x.ndim - 1] ?? 0} and ${inFeatures}x${outFeatures})`,
    );
}

/** x @ (q * scale)^T + bias with q int8 [out, in] and scale [out, groups] (groups = 1: per channel). */
/** Checks an int8 weight [out, in], its scales [out, groups] and x [..., in]; returns the group size. */
function checkInt8(op: string, x: Tensor, q: Tensor, scale: Tensor): number {
  const [O, I] = q.shape as [number, number];
  if (q.dtype !== "int8" || q.ndim !== 2) throw new TypeError(`${op}: expected an int8 weight [out, in], got ${q.dtype} [${q.shape.join(", ")}]`);
  const G = scale.shape[1] ?? 0;
  if (scale.ndim !== 2 || scale.shape[0] !== O || G === 0 || I % G !== 0)
    throw new RangeError(`${op}: scale [${scale.shape.join(", ")}] does not fit the weight [${O}, ${I}]`);
  checkShapes(op, x, I, O);
  return I / G;
}

export function linearInt8(x: Tensor, q: Tensor, scale: Tensor, bias: Tensor | null = null): Tensor {
  return withOp("linearInt8", () => {
    const gs = checkInt8("linearInt8", x, q, scale);
    return tryComposite("linearInt8", x, q, scale, bias, gs) ?? linear(x, dequantizeInt8(q, scale).to(x.dtype), bias);
  });
}

/** Smallest activation scale (the smallest normal float32): an all-zero row quantizes to zeros. */
export const MIN_ACT_SCALE = 2 ** -126;

/** Dynamic symmetric int8 quantization of x per row (last dim): integer-valued q in x's dtype and the scale [..., 1]. */
export function quantizeActivationsInt8(x: Tensor): { q: Tensor; scale: Tensor } {
  const scale = x.abs().amax(-1, true).div(127).clamp(MIN_ACT_SCALE);
  return { q: x.div(scale).round().clamp(-127, 127), scale };
}

/** linearInt8 with int8 activations: (xq @ (q * scale)^T) * sx + bias, xq / sx from quantizeActivationsInt8(x). */
export function linearW8A8(x: Tensor, q: Tensor, scale: Tensor, bias: Tensor | null = null): Tensor {
  return withOp("linearW8A8", () => {
    const fast = tryComposite("linearW8A8", x, q, scale, bias, checkInt8("linearW8A8", x, q, scale));
    if (fast) return fast;
    const a = quantizeActivationsInt8(x);
    const y = linear(a.q, dequantizeInt8(q, scale).to(x.dtype)).mul(a.scale);
    return bias ? y.add(bias) : y;
  });
}

/** x @ ((nibble - 8) * scale)^T + bias with packed uint8 [out, in/2] and scales [out, in/groupSize]. */
export function linearInt4(x: Tensor, packed: Tensor, scales: Tensor, bias: Tensor | null, inFeatures: number, groupSize: number): Tensor {
  return withOp("linearInt4", () => {
    const O = packed.shape[0]!;
    if (packed.dtype !== "uint8" || packed.ndim !== 2 || packed.shape[1]! * 2 !== inFeatures)
      throw new TypeError(`linearInt4: expected a uint8 weight [out, ${inFeatures / 2}], got ${packed.dtype} [${packed.shape.join(", ")}]`);
    if (groupSize % 2 !== 0 || inFeatures % groupSize !== 0 || scales.ndim !== 2 || scales.shape[0] !== O || scales.shape[1] !== inFeatures / groupSize)
      throw new RangeError(`linearInt4: scales [${scales.shape.join(", ")}] do not fit ${O}x${inFeatures} in groups of ${groupSize}`);
    checkShapes("linearInt4", x, inFeatures, O);
    return (
      tryComposite("linearInt4", x, packed, scales, bias, groupSize) ??
      linear(x, dequantizeInt4(packed, scales, inFeatures, groupSize).to(x.dtype), bias)
    );
  });
}
