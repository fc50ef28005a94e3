// fullyShard (PyTorch FSDP2's fully_shard): apply it to each block, then to the root module.
// Each call shards the module's parameters that no inner call took (ParamGroup); the module's
// forward is wrapped:
//   pre-forward:   all-gather this group's parameters (prefetched by the group before it, in the
//                  previous iteration's forward order) and issue the next group's all-gather
//   post-forward:  free the full parameters (reshardAfterForward; the root keeps them, its
//                  backward comes first) and hook the outputs' gradients
//   pre-backward:  (the first output gradient) all-gather again, and prefetch the group whose
//                  forward finished before this one's (FSDP2's reverse post-forward order)
//   post-backward: when every full parameter has its gradient (their post-accumulate-grad
//                  hooks), reduce-scatter them into the shards' .grad; the end of backward
//                  (autograd's queued callback) reduces what is left and reshards everything.
// The optimizer is built on model.parameters() after fullyShard: the DTensor shards.
import { queueCallback } from "../../autograd/engine.js";
import { isGradEnabled } from "../../autograd/grad_mode.js";
import type { DType } from "../../ir/dtype.js";
import { Module, Parameter } from "../../nn/module.js";
import { Tensor } from "../../tensor.js";
import { describe } from "../args.js";
import { initDeviceMesh, type DeviceMesh } from "../device_mesh.js";
import { DistError } from "../errors.js";
import { getWorldSize } from "../process_group.js";
import { isDTensor } from "../tensor/dtensor.js";
import { ParamGroup } from "./param_group.js";

/** torch.distributed.fsdp.MixedPrecisionPolicy */
export class MixedPrecisionPolicy {
  readonly paramDtype: DType | null;
  readonly reduceDtype: DType | null;
  readonly outputDtype: DType | null;
  readonly castForwardInputs: boolean;
  constructor(o: { paramDtype?: DType | null; reduceDtype?: DType | null; outputDtype?: DType | null; castForwardInputs?: boolean } = {}) {
    this.paramDtype = o.paramDtype ?? null;
    this.reduceDtype = o.reduceDtype ?? null;
    this.outputDtype = o.outputDtype ?? null;
    this.castForwardInputs = o.castForwardInputs ?? true;
  }
}

export interface FullyShardOptions {
  mesh?: DeviceMesh;
  /** Free the full parameters after forward and all-gather them again for backward (default true). */
  reshardAfterForward?: boolean;
  mpPolicy?: MixedPrecisionPolicy;
}

interface FsdpState {
  group: ParamGroup;
  reshardAfterForward: boolean;
  mp: MixedPrecisionPolicy;
  /** fullyShard states of the modules below (set when the root's first forward runs). */
  requiresGradientSync: boolean;
}

const states = new WeakMap<Module, FsdpState>();
const sharded = new WeakSet<Tensor>();

/** The iteration in progress: the root that started it, the forward order, what backward reached. */
interface Iteration {
  root: FsdpState;
  order: FsdpState[];
  /** The order forwards finished in: backward runs (roughly) in its reverse. */
  postOrder: FsdpState[];
  backwardQueued: boolean;
  backwardSeen: Set<FsdpState>;
}
let iteration: Iteration | null = null;
/** The previous iteration's forward order (what prefetching follows), per root. */
const lastOrder = new WeakMap<FsdpState, FsdpState[]>();

function tensorsIn(v: unknown, out: Tensor[] = [], seen = new Set<unknown>()): Tensor[] {
  if (v instanceof Tensor) out.push(v);
  else if (v && typeof v === "object" && !seen.has(v)) {
    seen.add(v);
    for (const x of Array.isArray(v) ? v : v instanceof Map ? [...v.values()] : Object.values(v)) tensorsIn(x, out, seen);
  }
  return out;
}

function castInputs(args: unknown[], dtype: DType): unknown[] {
  const cast = (v: unknown): unknown => {
    if (v instanceof Tensor) return v.dtype.startsWith("float") || v.dtype === "bfloat16" ? v.to(dtype) : v;
    if (Array.isArray(v)) return v.map(cast);
    return v;
  };
  return args.map(cast);
}

function preForward(s: FsdpState): void {
  if (!iteration || iteration.root === s) {
    // a forward that no FSDP forward encloses: this module is the root of a new iteration
    if (iteration) finishIteration(iteration);
    iteration = { root: s, order: [], postOrder: [], backwardQueued: false, backwardSeen: new Set() };
  }
  const it = iteration;
  const prev = lastOrder.get(it.root) ?? [];
  it.order.push(s);
  s.group.unshard();
  // prefetch the module that came next last time
  const next = prev[it.order.length];
  if (next && next !== s) next.group.prefetch();
}

function postForward(s: FsdpState, out: unknown): unknown {
  const it = iteration!;
  const grad = isGradEnabled() && tensorsIn(out).some((t) => t.requiresGrad);
  if (!grad) {
    if (s !== it.root) s.group.dropFull();
    else {
      for (const x of it.order) x.group.dropFull();
      iteration = null;
    }
    return out;
  }
  if (s !== it.root && s.reshardAfterForward) s.group.reshard(true);
  it.postOrder.push(s);
  let fired = false;
  for (const t of tensorsIn(out))
    if (t.requiresGrad && !t.isLeaf)
      t.registerHook(() => {
        if (fired) return;
        fired = true;
        preBackward(s, it);
      });
  if (s === it.root) lastOrder.set(s, [...it.order]);
  return out;
}

function preBackward(s: FsdpState, it: Iteration): void {
  if (!it.backwardQueued) {
    it.backwardQueued = true;
    queueCallback(() => finishIteration(it));
  }
  it.backwardSeen.add(s);
  s.group.unshard();
  // prefetch the group whose forward finished before this one's (its backward comes next)
  const at = it.postOrder.lastIndexOf(s);
  for (let k = at - 1; k >= 0; k--) {
    const g = it.postOrder[k]!;
    if (!it.backwardSeen.has(g)) {
      g.group.prefetch();
      break;
    }
  }
}

function finishIteration(it: Iteration): void {
  // reverse forward order, as the gradients came (every rank reduces in the same order)
  const done = new Set<FsdpState>();
  for (const s of [...it.order].reverse()) {
    if (done.has(s)) continue;
    done.add(s);
    s.group.finishBackward();
  }
  if (iteration === it) iteration = null;
}

/**
 * Shard `module`'s parameters (those no inner fullyShard took) over `mesh` (default: the world, 1-d)
 * and wrap its forward. Returns the module (PyTorch's FSDPModule); apply it bottom-up.
 */
export function fullyShard<M extends Module>(module: M, opts: FullyShardOptions = {}): M {
  if (!(module instanceof Module)) throw new TypeError(`fullyShard(): argument 'module' must be an nn.Module, got ${describe(module)}`);
  for (const k of Object.keys(opts)) if (!["mesh", "reshardAfterForward", "mpPolicy"].includes(k)) throw new TypeError(`fullyShard() got an unexpected keyword argument '${k}'`);
  if (states.has(module)) throw new DistError("fullyShard: the module is already sharded");
  const mesh = opts.mesh ?? initDeviceMesh("cpu", [getWorldSize()]);
  if (mesh.ndim !== 1) throw new DistError("fullyShard: only a 1-d mesh is supported (HSDP's 2-d mesh is not)");
  const mp = opts.mpPolicy ?? new MixedPrecisionPolicy();
  if (!(mp instanceof MixedPrecisionPolicy)) throw new TypeError("fullyShard(): mpPolicy must be a MixedPrecisionPolicy");
  // the parameters of this module no inner fullyShard took, with every place each sits in
  const byParam = new Map<Parameter, { owner: Module; name: string }[]>();
  for (const [, m] of module.namedModules())
    for (const [name, p] of m._parameters) {
      if (!p || sharded.has(p) || isDTensor(p)) continue;
      byParam.set(p, [...(byParam.get(p) ?? []), { owner: m, name }]);
    }
  const group = new ParamGroup(module, mesh, [...byParam].map(([param, places]) => ({ param, places })), { paramDtype: mp.paramDtype, reduceDtype: mp.reduceDtype });
  for (const p of group.params) sharded.add(p.sharded);
  const s: FsdpState = { group, reshardAfterForward: opts.reshardAfterForward ?? true, mp, requiresGradientSync: true };
  states.set(module, s);
  const inner = module.forward;
  Object.defineProperty(module, "forward", {
    configurable: true,
    writable: true,
    value: function fsdpForward(this: Module, ...args: unknown[]): unknown {
      preForward(s);
      const a = mp.paramDtype && mp.castForwardInputs ? castInputs(args, mp.paramDtype) : args;
      let out = (inner as (...x: unknown[]) => unknown).apply(this, a);
      if (mp.outputDtype) out = castInputs([out], mp.outputDtype)[0];
      return postForward(s, out);
    },
  });
  return module;
}

/** The fullyShard state of a module (what PyTorch's FSDPModule methods reach). */
export function fsdpGroup(module: Module): ParamGroup {
  const s = states.get(module);
  if (!s) throw new DistError("the module is not sharded by fullyShard");
  return s.group;
}
