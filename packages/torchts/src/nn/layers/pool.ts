// Pooling and resampling layers: MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Upsample.
import type { Tensor } from "../../tensor.js";
import { Module } from "../module.js";
import * as F from "../functional.js";

type P2 = number | [number, number];

export class MaxPool2d extends Module {
  kernelSize: P2;
  stride: P2;
  padding: P2;
  dilation: P2;
  ceilMode: boolean;
  constructor(kernelSize: P2, o: { stride?: P2 | null; padding?: P2; dilation?: P2; ceilMode?: boolean } = {}) {
    super();
    this.kernelSize = kernelSize;
    this.stride = o.stride ?? kernelSize;
    this.padding = o.padding ?? 0;
    this.dilation = o.dilation ?? 1;
    this.ceilMode = o.ceilMode ?? false;
  }
  override forward(x: Tensor): Tensor {
    return F.maxPool2d(x, this.kernelSize, {
      stride: this.stride, padding: this.padding, dilation: this.dilation, ceilMode: this.ceilMode,
    });
  }
}

export class AvgPool2d extends Module {
  kernelSize: P2;
  stride: P2;
  padding: P2;
  ceilMode: boolean;
  countIncludePad: boolean;
  divisorOverride: number | null;
  constructor(
    kernelSize: P2,
    o: { stride?: P2 | null; padding?: P2; ceilMode?: boolean; countIncludePad?: boolean; divisorOverride?: number | null } = {},
  ) {
    super();
    this.kernelSize = kernelSize;
    this.stride = o.stride ?? kernelSize;
    this.padding = o.padding ?? 0;
    this.ceilMode = o.ceilMode ?? false;
    this.countIncludePad = o.countIncludePad ?? true;
    this.divisorOverride = o.divisorOverride ?? null;
  }
  override forward(x: Tensor): Tensor {
    return F.avgPool2d(x, this.kernelSize, {
      stride: this.stride, padding: this.padding, ceilMode: this.ceilMode,
      countIncludePad: this.countIncludePad, divisorOverride: this.divisorOverride,
    });
  }
}

export class AdaptiveAvgPool2d extends Module {
  constructor(public outputSize: number | [number | null, number | null]) {
    super();
  }
  override forward(x: Tensor): Tensor {
    return F.adaptiveAvgPool2d(x, this.outputSize);
  }
}

export class Upsample extends Module {
  size: number | number[] | null;
  scaleFactor: number | number[] | null;
  mode: F.InterpolateOpts["mode"];
  alignCorners: boolean | null;
  constructor(
    o: { size?: number | number[] | null; scaleFactor?: number | number[] | null; mode?: F.InterpolateOpts["mode"]; alignCorners?: boolean | null } = {},
  ) {
    super();
    this.size = o.size ?? null;
    this.scaleFactor = o.scaleFactor ?? null;
    this.mode = o.mode ?? "nearest";
    this.alignCorners = o.alignCorners ?? null;
  }
  override forward(x: Tensor): Tensor {
    return F.interpolate(x, { size: this.size, scaleFactor: this.scaleFactor, mode: this.mode, alignCorners: this.alignCorners });
  }
}
