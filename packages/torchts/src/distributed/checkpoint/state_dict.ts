// torch.distributed.checkpoint.state_dict: a model's and its optimizers' state keyed by parameter
// names (so a checkpoint does not depend on parameter order or on how many ranks there are), with
// the optimizer state created when it does not exist yet (so a fresh optimizer can be loaded into).
import { noGrad } from "../../autograd/grad_mode.js";
import type { Module, StateDict } from "../../nn/module.js";
import { zerosLike } from "../../ops/creation.js";
import type { Optimizer, ParamState } from "../../optim/optimizer.js";
import type { Tensor } from "../../tensor.js";
import { DistError } from "../errors.js";

export interface OptimizerStateDictByName {
  state: Record<string, ParamState>;
  paramGroups: Record<string, unknown>[];
}

const list = (o: Optimizer | Optimizer[]) => (Array.isArray(o) ? o : [o]);

function names(model: Module): Map<Tensor, string> {
  return new Map([...model.namedParameters()].map(([n, p]) => [p as Tensor, n]));
}

/** PyTorch's _init_optim_state: a zero-gradient step with lr 0 creates the state of every parameter. */
function initState(opt: Optimizer): void {
  if (opt.state.size) return;
  const params = opt.paramGroups.flatMap((g) => g.params);
  for (const p of params)
    if (p.grad) throw new DistError("getStateDict: the optimizer state can only be created while the gradients are None (zero them with setToNone first)");
  noGrad(() => {
    for (const p of params) if (p.requiresGrad) p.grad = zerosLike(p);
  });
  const lrs = opt.paramGroups.map((g) => g.lr);
  for (const g of opt.paramGroups) g.lr = 0;
  opt.step();
  opt.paramGroups.forEach((g, i) => (g.lr = lrs[i]!));
  opt.zeroGrad({ setToNone: true });
}

export function getModelStateDict(model: Module): StateDict {
  return model.stateDict();
}

export function getOptimizerStateDict(model: Module, optimizers: Optimizer | Optimizer[]): OptimizerStateDictByName {
  const byParam = names(model);
  const out: OptimizerStateDictByName = { state: {}, paramGroups: [] };
  for (const opt of list(optimizers)) {
    initState(opt);
    for (const g of opt.paramGroups) {
      const fqns = g.params.map((p) => {
        const n = byParam.get(p);
        if (n === undefined) throw new DistError("getOptimizerStateDict: the optimizer holds a parameter that is not the model's");
        return n;
      });
      const { params: _p, ...rest } = g;
      out.paramGroups.push({ ...rest, params: fqns });
      g.params.forEach((p, i) => {
        const s = opt.state.get(p);
        if (s) out.state[fqns[i]!] = { ...s };
      });
    }
  }
  return out;
}

/** [model state dict, optimizer state dict], both keyed by parameter names. */
export function getStateDict(model: Module, optimizers: Optimizer | Optimizer[]): [StateDict, OptimizerStateDictByName] {
  return [getModelStateDict(model), getOptimizerStateDict(model, optimizers)];
}

/** Load what getStateDict returned (after a checkpoint.load filled it) back into the model and optimizers. */
export function setStateDict(
  model: Module,
  optimizers: Optimizer | Optimizer[],
  sd: { modelStateDict?: StateDict | Record<string, Tensor>; optimStateDict?: OptimizerStateDictByName },
): void {
  if (sd.modelStateDict) model.loadStateDict(sd.modelStateDict);
  if (!sd.optimStateDict) return;
  const byName = new Map([...model.namedParameters()].map(([n, p]) => [n, p as Tensor]));
  let gi = 0;
  for (const opt of list(optimizers)) {
    const groups = sd.optimStateDict.paramGroups.slice(gi, gi + opt.paramGroups.length);
    gi += opt.paramGroups.length;
    const index = new Map<string, number>();
    const state: Record<number, ParamState> = {};
    const paramGroups = groups.map((g, k) => {
      const fqns = g.params as string[];
      if (fqns.length !== opt.paramGroups[k]!.params.length) throw new DistError("setStateDict: a parameter group has a different size than the optimizer's");
      fqns.forEach((n, j) => {
        if (byName.get(n) !== opt.paramGroups[k]!.params[j]) throw new DistError(`setStateDict: parameter ${n} is not at its place in the optimizer`);
        index.set(n, index.size);
        if (sd.optimStateDict!.state[n]) state[index.get(n)!] = sd.optimStateDict!.state[n]!;
      });
      return { ...g, params: fqns.map((n) => index.get(n)!) };
    });
    opt.loadStateDict({ state, paramGroups } as never);
  }
}
