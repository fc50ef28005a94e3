// A multi-node kernel as the scheduler hands it to a device: IR nodes in execution order plus
// their wiring. Edges inside the kernel are identity views (same shape, contiguous, offset 0),
// so a device can keep the value in a register instead of memory.
import type { IRGraph } from "../ir/prims.js";

/** Where one node input comes from: external kernel argument k, or the value of node j (< this node). */
export type FusedSrc = { ext: number } | { node: number };

export interface FusedGraph extends IRGraph {
  /** elementwise: one loop over the common output shape; reduction: prologue -> reduce -> epilogue. */
  kind: "elementwise" | "reduction" | "matmul";
  srcs: FusedSrc[][];
  /** Nodes whose values are written to memory, in output-buffer order. */
  outputs: number[];
  /** Index of the reduce/matmul node; nodes before it are the prologue, after it the epilogue. */
  reduceAt: number;
}

export function isFused(g: IRGraph): g is FusedGraph {
  return (g as FusedGraph).srcs !== undefined;
}

export function fusedKey(g: FusedGraph): string {
  const w = g.srcs.map((s) => s.map((x) => ("ext" in x ? `e${x.ext}` : `n${x.node}`)).join(",")).join(";");
  return `F:${g.kind}:${g.reduceAt}:${w}:o${g.outputs.join(",")}`;
}

/** Devices whose compile() accepts FusedGraphs (and a cached source as its second argument). */
export const fusionDevices = new WeakSet<object>();
