// The differentiable exchange of pooled embeddings (TorchRec's comm_ops): forward sends each
// owner's partial sums back to the ranks whose samples they belong to; backward sends those ranks'
// output gradients to the owners over the same routes, reversed.
import { Function, FunctionCtx } from "../../autograd/function.js";
import { empty } from "../../ops/creation.js";
import type { Tensor } from "../../tensor.js";
import { boolArg } from "../args.js";
import { allToAllSingle } from "../collectives.js";
import type { ProcessGroup } from "../process_group.js";

let gradientDivision = true;

/**
 * TorchRec's set_gradient_division: with it (the default) the gradients that reach the shards are
 * divided by the world size, as DDP averages the dense ones, so sharded training on a batch split
 * across N ranks (each with its local mean loss) equals single-process training on the whole batch.
 */
export function setGradientDivision(val: boolean): void {
  gradientDivision = boolArg("setGradientDivision", "val", val, true);
}
export function getGradientDivision(): boolean {
  return gradientDivision;
}

export interface PooledRoute {
  group: ProcessGroup;
  /** Rows this rank sends to each rank (forward). */
  sendRows: number[];
  /** Rows this rank receives from each rank (forward). */
  recvRows: number[];
  /** The gradient is divided by this in backward (1: not divided). */
  gradDivisor: number;
}

const total = (xs: number[]) => xs.reduce((p, q) => p + q, 0);

class PooledAllToAll extends Function {
  static override forward(ctx: FunctionCtx, x: Tensor, route: PooledRoute): Tensor {
    ctx.route = route;
    const out = empty([total(route.recvRows), x.shape[1]!], { dtype: x.dtype });
    allToAllSingle(out, x.contiguous(), route.recvRows, route.sendRows, route.group);
    return out;
  }
  static override backward(ctx: FunctionCtx, g: Tensor): Tensor {
    const route = ctx.route as PooledRoute;
    const out = empty([total(route.sendRows), g.shape[1]!], { dtype: g.dtype });
    allToAllSingle(out, g.contiguous(), route.sendRows, route.recvRows, route.group);
    return route.gradDivisor === 1 ? out : out.div(route.gradDivisor);
  }
}

/** x [sum(sendRows), D] -> [sum(recvRows), D], differentiable. */
export function pooledAllToAll(x: Tensor, route: PooledRoute): Tensor {
  return PooledAllToAll.apply<Tensor>(x, route);
}
