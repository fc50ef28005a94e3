// Ops on DTensors (the op table's subclass hook, ops/registry.ts): each rule picks the placements
// the op can run in, redistributes the DTensor arguments to them, runs the op on the local pieces
// (the op's own implementation, through `run`, with the arguments replaced) and wraps the result
// in a DTensor of the output's global shape and placements. The rules (sharding propagation) live
// in rules.ts; an op without one raises, naming it.
import type { OpDef } from "../../ops/registry.js";
import { subclassDispatch } from "../../ops/registry.js";
import type { Schema } from "../../ops/schema.js";
import { Tensor } from "../../tensor.js";
import { DistError } from "../errors.js";
import { DTensor, hooks, isDTensor, localLayout, type DTensorLike } from "./dtensor.js";
import type { Placement } from "./placement.js";

export interface OpCall {
  def: OpDef;
  schema: Schema;
  /** The bound arguments (schema order); rules replace DTensors by local tensors in place. */
  vals: unknown[];
  run: () => unknown;
}

export type Rule = (c: OpCall) => unknown;
export const RULES = new Map<string, Rule>();

export function mixedError(name: string): DistError {
  return new DistError(`${name}: got mixed Tensor and DTensor, need to convert all Tensors to DTensor before calling distributed operators!`);
}

/** Wrap a local result computed for `placements` of a `shape` global tensor. */
export function wrap(name: string, local: unknown, mesh: DTensorLike["_spec"]["mesh"], placements: readonly Placement[], shape: readonly number[]): DTensor {
  if (!(local instanceof Tensor)) throw new DistError(`${name}: internal: expected a tensor result on DTensors`);
  const want = localLayout(shape, placements, mesh.shape, mesh.getCoordinate()!).shape;
  if (want.join() !== local.shape.join())
    throw new DistError(`${name}: internal: the local result is [${local.shape.join(", ")}] but ${placements.map(String).join(", ")} of [${shape.join(", ")}] gives [${want.join(", ")}]`);
  return new DTensor(local, { mesh, placements, shape });
}

function handle(def: OpDef, overload: number, vals: unknown[], run: () => unknown): unknown {
  const rule = RULES.get(def.name);
  if (!rule) throw new DistError(`${def.name}: no sharding rule for DTensor arguments (supported: ${[...RULES.keys()].sort().join(", ")})`);
  return rule({ def, schema: def.schemas[overload]!, vals, run });
}

subclassDispatch.is = (t) => isDTensor(t);
hooks.activate = () => {
  subclassDispatch.handler = handle;
  hooks.activate = () => {};
};
