// torchvision's ResNet (torchvision/models/resnet.py, 0.14) with the same module tree, so a
// torchvision `state_dict()` (conv1, bn1, layerN.i.{conv,bn}j, layerN.0.downsample.{0,1}, fc)
// loads with `loadStateDict` unchanged.
import type { Tensor } from "../tensor.js";
import { Module } from "../nn/module.js";
import * as init from "../nn/init.js";
import { Conv2d } from "../nn/layers/conv.js";
import { BatchNorm2d } from "../nn/layers/norm.js";
import { ReLU } from "../nn/layers/activation.js";
import { MaxPool2d, AdaptiveAvgPool2d } from "../nn/layers/pool.js";
import { Linear } from "../nn/layers/basic.js";
import { Sequential } from "../nn/layers/container.js";
import * as S from "../ops/shape_ops.js";

export type NormLayer = (channels: number) => Module;

function conv3x3(inp: number, out: number, stride = 1, groups = 1, dilation = 1): Conv2d {
  return new Conv2d(inp, out, 3, { stride, padding: dilation, groups, bias: false, dilation });
}
function conv1x1(inp: number, out: number, stride = 1): Conv2d {
  return new Conv2d(inp, out, 1, { stride, bias: false });
}

interface BlockArgs {
  inplanes: number;
  planes: number;
  stride: number;
  downsample: Module | null;
  groups: number;
  baseWidth: number;
  dilation: number;
  normLayer: NormLayer;
}

export abstract class ResNetBlock extends Module {
  declare downsample: Module | null;
  protected residual(x: Tensor, out: Tensor): Tensor {
    const identity = this.downsample ? (this.downsample.call(x) as Tensor) : x;
    return out.add(identity).relu();
  }
}

export class BasicBlock extends ResNetBlock {
  static readonly expansion = 1;
  conv1: Conv2d;
  bn1: Module;
  relu = new ReLU();
  conv2: Conv2d;
  bn2: Module;
  constructor(a: BlockArgs) {
    super();
    if (a.groups !== 1 || a.baseWidth !== 64) throw new Error("BasicBlock only supports groups=1 and base_width=64");
    if (a.dilation > 1) throw new Error("Dilation > 1 not supported in BasicBlock");
    this.conv1 = conv3x3(a.inplanes, a.planes, a.stride);
    this.bn1 = a.normLayer(a.planes);
    this.conv2 = conv3x3(a.planes, a.planes);
    this.bn2 = a.normLayer(a.planes);
    if (a.downsample) this.downsample = a.downsample;
    else this.registerModule("downsample", null);
  }
  override forward(x: Tensor): Tensor {
    let out = (this.bn1.call(this.conv1.call(x)) as Tensor).relu();
    out = this.bn2.call(this.conv2.call(out)) as Tensor;
    return this.residual(x, out);
  }
}

/** The v1.5 bottleneck (stride on the 3x3 conv), as torchvision. */
export class Bottleneck extends ResNetBlock {
  static readonly expansion = 4;
  conv1: Conv2d;
  bn1: Module;
  conv2: Conv2d;
  bn2: Module;
  conv3: Conv2d;
  bn3: Module;
  relu = new ReLU();
  constructor(a: BlockArgs) {
    super();
    const width = Math.floor(a.planes * (a.baseWidth / 64)) * a.groups;
    this.conv1 = conv1x1(a.inplanes, width);
    this.bn1 = a.normLayer(width);
    this.conv2 = conv3x3(width, width, a.stride, a.groups, a.dilation);
    this.bn2 = a.normLayer(width);
    this.conv3 = conv1x1(width, a.planes * Bottleneck.expansion);
    this.bn3 = a.normLayer(a.planes * Bottleneck.expansion);
    if (a.downsample) this.downsample = a.downsample;
    else this.registerModule("downsample", null);
  }
  override forward(x: Tensor): Tensor {
    let out = (this.bn1.call(this.conv1.call(x)) as Tensor).relu();
    out = (this.bn2.call(this.conv2.call(out)) as Tensor).relu();
    out = this.bn3.call(this.conv3.call(out)) as Tensor;
    return this.residual(x, out);
  }
}

export type BlockClass = (typeof BasicBlock | typeof Bottleneck) & { expansion: number };

export interface ResNetOpts {
  numClasses?: number;
  zeroInitResidual?: boolean;
  groups?: number;
  widthPerGroup?: number;
  replaceStrideWithDilation?: [boolean, boolean, boolean] | null;
  normLayer?: NormLayer | null;
  /** torchts extension for small models: channels of the stem and the 4 stages (default [64, 64, 128, 256, 512]). */
  widths?: [number, number, number, number, number];
  /** torchts extension: input channels (default 3). */
  inChannels?: number;
}

/** Activations after each stage: what torchvision's feature extractors call stem, layer1..4, pooled. */
export interface ResNetFeatures {
  stem: Tensor;
  layer1: Tensor;
  layer2: Tensor;
  layer3: Tensor;
  layer4: Tensor;
  pooled: Tensor;
}

export class ResNet extends Module {
  conv1: Conv2d;
  bn1: Module;
  relu = new ReLU();
  maxpool = new MaxPool2d(3, { stride: 2, padding: 1 });
  layer1: Sequential;
  layer2: Sequential;
  layer3: Sequential;
  layer4: Sequential;
  avgpool = new AdaptiveAvgPool2d([1, 1]);
  fc: Linear;
  private inplanes = 64;
  private dilation = 1;
  private readonly groups: number;
  private readonly baseWidth: number;
  private readonly normLayer: NormLayer;

  constructor(block: BlockClass, layers: [number, number, number, number] | number[], o: ResNetOpts = {}) {
    super();
    if (layers.length !== 4) throw new RangeError(`ResNet: layers should have 4 entries, got ${layers.length}`);
    this.normLayer = o.normLayer ?? ((c) => new BatchNorm2d(c));
    const rswd = o.replaceStrideWithDilation ?? [false, false, false];
    if (rswd.length !== 3)
      throw new RangeError(`replace_stride_with_dilation should be None or a 3-element tuple, got ${JSON.stringify(rswd)}`);
    this.groups = o.groups ?? 1;
    this.baseWidth = o.widthPerGroup ?? 64;
    const w = o.widths ?? [64, 64, 128, 256, 512];
    this.inplanes = w[0];
    this.conv1 = new Conv2d(o.inChannels ?? 3, this.inplanes, 7, { stride: 2, padding: 3, bias: false });
    this.bn1 = this.normLayer(this.inplanes);
    this.layer1 = this.makeLayer(block, w[1], layers[0]!);
    this.layer2 = this.makeLayer(block, w[2], layers[1]!, 2, rswd[0]);
    this.layer3 = this.makeLayer(block, w[3], layers[2]!, 2, rswd[1]);
    this.layer4 = this.makeLayer(block, w[4], layers[3]!, 2, rswd[2]);
    this.fc = new Linear(w[4] * block.expansion, o.numClasses ?? 1000);
    for (const m of this.modules()) {
      if (m instanceof Conv2d) init.kaimingNormal_(m.weight, { mode: "fan_out", nonlinearity: "relu" });
      else if (m instanceof BatchNorm2d) {
        if (m.weight) init.ones_(m.weight);
        if (m.bias) init.zeros_(m.bias);
      }
    }
    if (o.zeroInitResidual)
      for (const m of this.modules()) {
        const bn = m instanceof Bottleneck ? m.bn3 : m instanceof BasicBlock ? m.bn2 : null;
        if (bn instanceof BatchNorm2d && bn.weight) init.zeros_(bn.weight);
      }
  }

  private makeLayer(block: BlockClass, planes: number, blocks: number, stride = 1, dilate = false): Sequential {
    let downsample: Module | null = null;
    const previousDilation = this.dilation;
    if (dilate) {
      this.dilation *= stride;
      stride = 1;
    }
    if (stride !== 1 || this.inplanes !== planes * block.expansion)
      downsample = new Sequential(conv1x1(this.inplanes, planes * block.expansion, stride), this.normLayer(planes * block.expansion));
    const common = { groups: this.groups, baseWidth: this.baseWidth, normLayer: this.normLayer };
    const mods: Module[] = [new block({ inplanes: this.inplanes, planes, stride, downsample, dilation: previousDilation, ...common })];
    this.inplanes = planes * block.expansion;
    for (let i = 1; i < blocks; i++)
      mods.push(new block({ inplanes: this.inplanes, planes, stride: 1, downsample: null, dilation: this.dilation, ...common }));
    return new Sequential(...mods);
  }

  /** Every stage's activation and the logits. */
  forwardFeatures(x: Tensor): ResNetFeatures & { logits: Tensor } {
    const stem = this.maxpool.call((this.bn1.call(this.conv1.call(x)) as Tensor).relu());
    const layer1 = this.layer1.call(stem) as Tensor;
    const layer2 = this.layer2.call(layer1) as Tensor;
    const layer3 = this.layer3.call(layer2) as Tensor;
    const layer4 = this.layer4.call(layer3) as Tensor;
    const pooled = S.flatten(this.avgpool.call(layer4), 1);
    return { stem, layer1, layer2, layer3, layer4, pooled, logits: this.fc.call(pooled) };
  }

  override forward(x: Tensor): Tensor {
    return this.forwardFeatures(x).logits;
  }
}

export function resnet18(o: ResNetOpts = {}): ResNet {
  return new ResNet(BasicBlock, [2, 2, 2, 2], o);
}
export function resnet34(o: ResNetOpts = {}): ResNet {
  return new ResNet(BasicBlock, [3, 4, 6, 3], o);
}
export function resnet50(o: ResNetOpts = {}): ResNet {
  return new ResNet(Bottleneck, [3, 4, 6, 3], o);
}
export function resnet101(o: ResNetOpts = {}): ResNet {
  return new ResNet(Bottleneck, [3, 4, 23, 3], o);
}
