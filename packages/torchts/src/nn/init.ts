// torch.nn.init: in-place initialisers with PyTorch's fan and gain rules. All run under
// noGrad so they may fill leaf parameters; each returns the tensor it filled.
import { noGrad } from "../autograd/grad_mode.js";
import type { Tensor } from "../tensor.js";
import type { Generator } from "../ops/random.js";
import { fromHostData } from "../ops/core.js";

export type Nonlinearity =
  | "linear" | "conv1d" | "conv2d" | "conv3d" | "conv_transpose1d" | "conv_transpose2d" | "conv_transpose3d"
  | "sigmoid" | "tanh" | "relu" | "leaky_relu" | "selu";
export type FanMode = "fan_in" | "fan_out" | "fanIn" | "fanOut";

export function calculateGain(nonlinearity: Nonlinearity, param?: number): number {
  switch (nonlinearity) {
    case "linear": case "conv1d": case "conv2d": case "conv3d": case "sigmoid":
    case "conv_transpose1d": case "conv_transpose2d": case "conv_transpose3d":
      return 1;
    case "tanh":
      return 5 / 3;
    case "relu":
      return Math.SQRT2;
    case "leaky_relu": {
      const slope = param ?? 0.01;
      if (typeof slope !== "number") throw new TypeError(`negative_slope ${String(slope)} not a valid number`);
      return Math.sqrt(2 / (1 + slope * slope));
    }
    case "selu":
      return 3 / 4;
    default:
      throw new Error(`Unsupported nonlinearity ${String(nonlinearity)}`);
  }
}

export function calculateFanInAndFanOut(t: Tensor): [number, number] {
  if (t.ndim < 2) throw new Error("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions");
  const rf = t.shape.slice(2).reduce((a, b) => a * b, 1);
  return [t.shape[1]! * rf, t.shape[0]! * rf];
}

function fan(t: Tensor, mode: FanMode): number {
  const [fi, fo] = calculateFanInAndFanOut(t);
  if (mode === "fan_in" || mode === "fanIn") return fi;
  if (mode === "fan_out" || mode === "fanOut") return fo;
  throw new Error(`Mode ${String(mode)} not supported, please use one of fan_in, fan_out`);
}

interface GenOpt {
  generator?: Generator;
}

export function uniform_(t: Tensor, a = 0, b = 1, o: GenOpt = {}): Tensor {
  return noGrad(() => t.uniform_(a, b, { generator: o.generator }));
}
export function normal_(t: Tensor, mean = 0, std = 1, o: GenOpt = {}): Tensor {
  return noGrad(() => t.normal_(mean, std, { generator: o.generator }));
}
export function constant_(t: Tensor, val: number): Tensor {
  return noGrad(() => t.fill_(val));
}
export function zeros_(t: Tensor): Tensor {
  return constant_(t, 0);
}
export function ones_(t: Tensor): Tensor {
  return constant_(t, 1);
}
export function eye_(t: Tensor): Tensor {
  if (t.ndim !== 2) throw new Error("Only tensors with 2 dimensions are supported");
  const [n, m] = t.shape as [number, number];
  const d = new Array<number>(n * m).fill(0);
  for (let i = 0; i < Math.min(n, m); i++) d[i * m + i] = 1;
  return noGrad(() => t.copy_(fromHostData(d, [n, m], t.dtype, t.device)));
}

export function xavierUniform_(t: Tensor, gain = 1, o: GenOpt = {}): Tensor {
  const [fi, fo] = calculateFanInAndFanOut(t);
  const a = Math.sqrt(3) * gain * Math.sqrt(2 / (fi + fo));
  return uniform_(t, -a, a, o);
}
export function xavierNormal_(t: Tensor, gain = 1, o: GenOpt = {}): Tensor {
  const [fi, fo] = calculateFanInAndFanOut(t);
  return normal_(t, 0, gain * Math.sqrt(2 / (fi + fo)), o);
}

export interface KaimingOpts extends GenOpt {
  a?: number;
  mode?: FanMode;
  nonlinearity?: Nonlinearity;
}
/** kaimingUniform_(t, {a=0, mode='fan_in', nonlinearity='leaky_relu'}) */
export function kaimingUniform_(t: Tensor, o: KaimingOpts = {}): Tensor {
  const std = calculateGain(o.nonlinearity ?? "leaky_relu", o.a ?? 0) / Math.sqrt(fan(t, o.mode ?? "fan_in"));
  const bound = Math.sqrt(3) * std;
  return uniform_(t, -bound, bound, o);
}
export function kaimingNormal_(t: Tensor, o: KaimingOpts = {}): Tensor {
  const std = calculateGain(o.nonlinearity ?? "leaky_relu", o.a ?? 0) / Math.sqrt(fan(t, o.mode ?? "fan_in"));
  return normal_(t, 0, std, o);
}

// Abramowitz-Stegun 7.1.26 (|err| < 1.5e-7): enough for the truncation bounds.
function erf(x: number): number {
  const s = Math.sign(x);
  const z = Math.abs(x);
  const t = 1 / (1 + 0.3275911 * z);
  const y = 1 - ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * Math.exp(-z * z);
  return s * y;
}
// Giles' single-precision erfinv.
function erfinv(x: number): number {
  let w = -Math.log((1 - x) * (1 + x));
  let p: number;
  if (w < 5) {
    w -= 2.5;
    p = 2.81022636e-8;
    for (const c of [3.43273939e-7, -3.5233877e-6, -4.39150654e-6, 0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941])
      p = c + p * w;
  } else {
    w = Math.sqrt(w) - 3;
    p = -0.000200214257;
    for (const c of [0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682])
      p = c + p * w;
  }
  return p * x;
}
const normCdf = (x: number) => (1 + erf(x / Math.SQRT2)) / 2;

/** truncNormal_(t, mean=0, std=1, a=-2, b=2): inverse-CDF sampling as PyTorch. */
export function truncNormal_(t: Tensor, mean = 0, std = 1, a = -2, b = 2, o: GenOpt = {}): Tensor {
  const l = normCdf((a - mean) / std);
  const u = normCdf((b - mean) / std);
  return noGrad(() => {
    t.uniform_(2 * l - 1, 2 * u - 1, { generator: o.generator });
    const h = t._contiguousHost();
    const out = Array.from(h, (v) => Math.min(b, Math.max(a, erfinv(v) * std * Math.SQRT2 + mean)));
    return t.copy_(fromHostData(out, t.shape, t.dtype, t.device));
  });
}
export const trunc_normal_ = truncNormal_;
