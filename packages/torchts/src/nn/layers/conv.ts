// Convolution layers: Conv1d, Conv2d, ConvTranspose2d (zero padding).
import type { Tensor } from "../../tensor.js";
import { Module, Parameter } from "../module.js";
import * as init from "../init.js";
import * as F from "../functional.js";
import { param, type FactoryOpts } from "./basic.js";

type IntOr<N extends number> = number | (N extends 1 ? [number] : [number, number]);
const tup = (v: number | number[], n: number): number[] => (typeof v === "number" ? new Array<number>(n).fill(v) : [...v]);

export interface ConvOpts extends FactoryOpts {
  stride?: number | number[];
  padding?: number | number[] | "same" | "valid";
  dilation?: number | number[];
  groups?: number;
  bias?: boolean;
  paddingMode?: "zeros";
}

abstract class ConvNd extends Module {
  declare weight: Parameter;
  declare bias: Parameter | null;
  kernelSize: number[];
  stride: number[];
  padding: number[] | "same" | "valid";
  dilation: number[];
  groups: number;
  constructor(
    public inChannels: number,
    public outChannels: number,
    kernelSize: number | number[],
    o: ConvOpts & { outputPadding?: number | number[] },
    nd: number,
    public transposed: boolean,
  ) {
    super();
    this.groups = o.groups ?? 1;
    if (inChannels % this.groups !== 0) throw new RangeError("in_channels must be divisible by groups");
    if (outChannels % this.groups !== 0) throw new RangeError("out_channels must be divisible by groups");
    this.kernelSize = tup(kernelSize, nd);
    this.stride = tup(o.stride ?? 1, nd);
    const p = o.padding ?? 0;
    this.padding = typeof p === "string" ? p : tup(p, nd);
    this.dilation = tup(o.dilation ?? 1, nd);
    if (this.padding === "same" && this.stride.some((s) => s !== 1))
      throw new Error("padding='same' is not supported for strided convolutions");
    const wshape = transposed
      ? [inChannels, outChannels / this.groups, ...this.kernelSize]
      : [outChannels, inChannels / this.groups, ...this.kernelSize];
    this.weight = param(wshape, o);
    if (o.bias ?? true) this.bias = param([outChannels], o);
    else this.registerParameter("bias", null);
    this.resetParameters();
  }
  resetParameters(): void {
    init.kaimingUniform_(this.weight, { a: Math.sqrt(5) });
    if (this.bias) {
      const [fi] = init.calculateFanInAndFanOut(this.weight);
      if (fi !== 0) init.uniform_(this.bias, -1 / Math.sqrt(fi), 1 / Math.sqrt(fi));
    }
  }
  /** Explicit padding for "same"/"valid" (symmetric; PyTorch pads the extra element on the right). */
  _explicitPadding(): number[] {
    if (this.padding === "valid") return this.kernelSize.map(() => 0);
    if (this.padding === "same") return this.kernelSize.map((k, i) => (this.dilation[i]! * (k - 1)) >> 1);
    return this.padding;
  }
  override extraRepr(): string {
    return `${this.inChannels}, ${this.outChannels}, kernel_size=(${this.kernelSize}), stride=(${this.stride})`;
  }
}

export class Conv1d extends ConvNd {
  constructor(inChannels: number, outChannels: number, kernelSize: IntOr<1>, o: ConvOpts = {}) {
    super(inChannels, outChannels, kernelSize, o, 1, false);
  }
  override forward(x: Tensor): Tensor {
    return F.conv1d(x, this.weight, this.bias, {
      stride: this.stride, padding: this.padding, dilation: this.dilation, groups: this.groups,
    });
  }
}

export class Conv2d extends ConvNd {
  constructor(inChannels: number, outChannels: number, kernelSize: IntOr<2>, o: ConvOpts = {}) {
    super(inChannels, outChannels, kernelSize, o, 2, false);
  }
  override forward(x: Tensor): Tensor {
    return F.conv2d(x, this.weight, this.bias, {
      stride: this.stride, padding: this.padding, dilation: this.dilation, groups: this.groups,
    });
  }
}

export class ConvTranspose2d extends ConvNd {
  outputPadding: number[];
  constructor(inChannels: number, outChannels: number, kernelSize: IntOr<2>, o: ConvOpts & { outputPadding?: number | number[] } = {}) {
    if (typeof o.padding === "string") throw new Error("Only \"zeros\" padding mode is supported for ConvTranspose2d");
    super(inChannels, outChannels, kernelSize, o, 2, true);
    this.outputPadding = tup(o.outputPadding ?? 0, 2);
  }
  override forward(x: Tensor): Tensor {
    return F.convTranspose2d(x, this.weight, this.bias, {
      stride: this.stride, padding: this._explicitPadding(), outputPadding: this.outputPadding,
      dilation: this.dilation, groups: this.groups,
    });
  }
}
