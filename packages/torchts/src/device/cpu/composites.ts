// The composites the cpu device runs with its own kernels (softmax rows, attention, conv,
// quantized linear...). Each entry builds a kernel for one `composite` IR node; the device's
// `overrides` set is this table's keys, so the op library decomposes everything else.
import type { CompositeName, IRNode } from "../../ir/prims.js";
import type { Kernel } from "./codegen.js";
import { attentionKernel, pagedAttentionKernel } from "./attention_kernel.js";
import { linearQuantKernel } from "./quant_kernels.js";
import { linearW8A8Kernel } from "./w8a8_kernel.js";
import { conv2dKernel } from "./wasm/conv.js";
import { logSoftmaxComposite, softmaxComposite } from "./softmax.js";
import { layerNormBackwardComposite, layerNormComposite } from "./layer_norm.js";

export type CompositeBuilder = (n: IRNode<"composite">) => Kernel;

export const CPU_COMPOSITES: Partial<Record<CompositeName, CompositeBuilder>> = {
  linearInt8: linearQuantKernel(8),
  linearInt4: linearQuantKernel(4),
  linearW8A8: linearW8A8Kernel,
  attention: attentionKernel,
  pagedAttention: pagedAttentionKernel,
  conv2d: conv2dKernel,
  softmax: softmaxComposite,
  logSoftmax: logSoftmaxComposite,
  layerNorm: layerNormComposite,
  layerNormBackward: layerNormBackwardComposite,
};

export function buildComposite(n: IRNode<"composite">): Kernel {
  const b = CPU_COMPOSITES[n.params.name];
  if (!b) throw new Error(`cpu: no kernel for the composite ${n.params.name} (the op should have been decomposed)`);
  return b(n);
}

/** Switched off by torch.backends.cpu.setCompositeEnabled (tests compare both paths). */
const disabled = new Set<CompositeName>();
let current: Set<CompositeName> | null = null;

/** The composites to list in the cpu device's `overrides`. */
export function cpuOverrides(): ReadonlySet<CompositeName> {
  return (current ??= new Set((Object.keys(CPU_COMPOSITES) as CompositeName[]).filter((k) => !disabled.has(k))));
}

export function setCompositeEnabled(name: CompositeName | "all", on: boolean): void {
  const names = name === "all" ? (Object.keys(CPU_COMPOSITES) as CompositeName[]) : [name];
  for (const n of names) (on ? disabled.delete(n) : disabled.add(n));
  current = null;
}
