// Optimizer base: parameter groups with per-group options, per-parameter state, zeroGrad,
// stateDict/loadStateDict (params referred to by their index, as PyTorch). Subclasses
// implement `_update()`; step() runs it under noGrad, so parameters update in place.
import { enableGrad, noGrad } from "../autograd/grad_mode.js";
import { holdBeyondScopes, Tensor } from "../tensor.js";
import * as M from "../ops/math.js";
import * as S from "../ops/shape_ops.js";
import { zerosLike } from "../ops/creation.js";

export interface ParamGroup {
  params: Tensor[];
  lr: number;
  [option: string]: any;
}
export type ParamGroupInput = { params: Iterable<Tensor> | Tensor; [option: string]: any };
export type Params = Iterable<Tensor> | Iterable<ParamGroupInput>;
export type ParamState = Record<string, any>;

export interface OptimizerStateDict {
  state: Record<number, ParamState>;
  paramGroups: (Omit<ParamGroup, "params"> & { params: number[] })[];
}

const cloneState = (s: ParamState): ParamState =>
  Object.fromEntries(Object.entries(s).map(([k, v]) => [k, v instanceof Tensor ? S.detach(v).clone() : v]));

export abstract class Optimizer {
  defaults: Record<string, any>;
  paramGroups: ParamGroup[] = [];
  state = new Map<Tensor, ParamState>();

  constructor(params: Params | Tensor, defaults: Record<string, any>) {
    this.defaults = defaults;
    if (params instanceof Tensor)
      throw new TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, but got torch.Tensor");
    const list = [...(params as Iterable<Tensor | ParamGroupInput>)];
    if (list.length === 0) throw new Error("optimizer got an empty parameter list");
    const groups = list[0] instanceof Tensor ? [{ params: list as Tensor[] }] : (list as ParamGroupInput[]);
    for (const g of groups) this.addParamGroup(g);
  }

  addParamGroup(group: ParamGroupInput): void {
    const params = group.params instanceof Tensor ? [group.params] : [...group.params];
    for (const p of params) {
      if (!(p instanceof Tensor)) throw new TypeError("optimizer can only optimize Tensors, but one of the params is " + typeof p);
      if (!p.isLeaf) throw new Error("can't optimize a non-leaf Tensor");
    }
    const g: ParamGroup = { ...this.defaults, ...group, params } as ParamGroup;
    for (const [k, v] of Object.entries(this.defaults))
      if (v === REQUIRED && g[k] === REQUIRED)
        throw new Error(`parameter group didn't specify a value of required optimization parameter ${k}`);
    const seen = new Set<Tensor>();
    for (const og of this.paramGroups) for (const p of og.params) seen.add(p);
    if (params.some((p) => seen.has(p))) throw new Error("some parameters appear in more than one parameter group");
    if (new Set(params).size !== params.length) console.warn("optimizer contains a parameter group with duplicate parameters");
    this.paramGroups.push(g);
  }

  zeroGrad(opts: { setToNone?: boolean } = {}): void {
    const setToNone = opts.setToNone ?? true;
    for (const g of this.paramGroups)
      for (const p of g.params) {
        if (!p.grad) continue;
        if (setToNone) p.grad = null;
        // a fresh zero tensor, not zero_(): the engine may store an expanded or shared gradient
        else p.grad = zerosLike(p.grad);
      }
  }

  /** One optimisation step; `closure` re-evaluates the model and returns the loss. */
  step(closure?: () => Tensor | number): Tensor | number | undefined {
    let loss: Tensor | number | undefined;
    if (closure) loss = enableGrad(closure);
    noGrad(() => {
      for (const g of this.paramGroups) this._updateGroup(g);
    });
    this._holdState();
    return loss;
  }

  /** State tensors live as long as the optimizer: no torch.scope around a step frees them. */
  private _holdState(): void {
    for (const s of this.state.values()) for (const v of Object.values(s)) if (v instanceof Tensor) holdBeyondScopes(v);
  }

  /** Update every parameter of the group that has a gradient (grad mode is off). */
  protected abstract _updateGroup(group: ParamGroup): void;

  /** p's state; with `init`, a state without a step starts at step 0 and is filled by `init`. */
  protected _state(p: Tensor, init?: (s: ParamState) => void): ParamState {
    let s = this.state.get(p);
    if (!s) this.state.set(p, (s = {}));
    if (init && s.step === undefined) {
      s.step = 0;
      init(s);
    }
    return s;
  }

  /** p's gradient (p.grad must be set), negated when the group maximizes. */
  protected _grad(p: Tensor, g: ParamGroup): Tensor {
    return g.maximize ? M.neg(p.grad!) : p.grad!;
  }

  stateDict(): OptimizerStateDict {
    const index = new Map<Tensor, number>();
    let i = 0;
    const paramGroups = this.paramGroups.map((g) => {
      const ids = g.params.map((p) => {
        if (!index.has(p)) index.set(p, i++);
        return index.get(p)!;
      });
      const { params: _p, ...rest } = g;
      return { ...rest, params: ids };
    });
    const state: Record<number, ParamState> = {};
    for (const [p, s] of this.state) if (index.has(p)) state[index.get(p)!] = { ...s };
    return { state, paramGroups } as OptimizerStateDict;
  }

  loadStateDict(sd: OptimizerStateDict): void {
    const groups = sd.paramGroups;
    if (groups.length !== this.paramGroups.length)
      throw new Error("loaded state dict has a different number of parameter groups");
    groups.forEach((g, i) => {
      if (g.params.length !== this.paramGroups[i]!.params.length)
        throw new Error("loaded state dict contains a parameter group that doesn't match the size of optimizer's group");
    });
    const byId = new Map<number, Tensor>();
    groups.forEach((g, i) => g.params.forEach((id, j) => byId.set(id, this.paramGroups[i]!.params[j]!)));
    this.state = new Map();
    for (const [id, s] of Object.entries(sd.state)) {
      const p = byId.get(Number(id));
      if (!p) continue;
      // state tensors follow the parameter's dtype/device (PyTorch casts floating state)
      const c = cloneState(s);
      for (const [k, v] of Object.entries(c))
        if (v instanceof Tensor && v.dtype.startsWith("float") && (v.dtype !== p.dtype || v.device !== p.device))
          c[k] = S.to(v, { dtype: p.dtype, device: p.device });
      this.state.set(p, c);
    }
    this._holdState();
    this.paramGroups = groups.map((g, i) => ({ ...structuredClone({ ...g, params: [] }), params: this.paramGroups[i]!.params })) as ParamGroup[];
  }
}

/** Marker for options that have no default (SGD's lr in old PyTorch). */
export const REQUIRED = Symbol("required");

export function checkRange(name: string, v: number, ok: boolean): void {
  if (!ok) throw new RangeError(`Invalid ${name}: ${v}`);
}
