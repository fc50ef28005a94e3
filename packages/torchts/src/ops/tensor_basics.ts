// Tensor's own methods (metadata, autograd flags and hooks, host reads, backward) as entries of
// the op table, so their arguments are bound and checked like every op's. The class keeps the
// implementations (src/tensor.ts); this file puts the binder in front of them.
import { normDim } from "../ir/shape.js";
import { Tensor } from "../tensor.js";
import { method } from "./registry.js";

type Fn = (this: Tensor, ...a: unknown[]) => unknown;
const P = Tensor.prototype as unknown as Record<string, Fn>;
const orig = (name: string): Fn => {
  const f = P[name];
  if (typeof f !== "function") throw new Error(`tensor_basics: Tensor.prototype.${name} is missing`);
  return f;
};
const call = (f: Fn) => (self: Tensor, ...a: unknown[]) => f.apply(self, a);

method("dim", "dim(Tensor self) -> int", (self: Tensor) => self.shape.length);
method("ndimension", "ndimension(Tensor self) -> int", (self: Tensor) => self.shape.length);
method("size", "size(Tensor self, int? dim=None) -> int[]", (self: Tensor, dim: number | null) =>
  dim === null ? [...self.shape] : self.shape[normDim(dim, self.ndim, "size")]!,
);
method("stride", "stride(Tensor self, int? dim=None) -> int[]", (self: Tensor, dim: number | null) => {
  const st = self._strides;
  return dim === null ? [...st] : st[normDim(dim, self.ndim, "stride")]!;
});
method("numel", "numel(Tensor self) -> int", call(orig("numel")));
method("nelement", "nelement(Tensor self) -> int", call(orig("numel")));
method("storageOffset", "storageOffset(Tensor self) -> int", call(orig("storageOffset")));
const isContiguous = orig("isContiguous");
method(
  "isContiguous",
  "isContiguous(Tensor self, *, MemoryFormat memoryFormat=contiguous_format) -> bool",
  (self: Tensor) => isContiguous.call(self),
);
method("requiresGrad_", "requiresGrad_(Tensor self, bool requiresGrad=True) -> Tensor", call(orig("requiresGrad_")));
method("retainGrad", "retainGrad(Tensor self) -> ()", call(orig("retainGrad")));
method("registerHook", "registerHook(Tensor self, Callable hook) -> Any", call(orig("registerHook")));
method(
  "registerPostAccumulateGradHook",
  "registerPostAccumulateGradHook(Tensor self, Callable hook) -> Any",
  call(orig("registerPostAccumulateGradHook")),
);
// host reads and backward run other ops for the user: bound and checked, but not one op's scope
method("data", "data(Tensor self) -> Any", call(orig("data")), { transparent: true });
method("tolist", "tolist(Tensor self) -> Any", call(orig("tolist")), { transparent: true });
method("item", "item(Tensor self) -> Scalar", call(orig("item")), { transparent: true });
// disposing twice is allowed (a no-op), so self is not checked for being alive
method("dispose", "dispose(Any self) -> ()", call(orig("dispose")), { transparent: true });
const backward = orig("backward");
method(
  "backward",
  "backward(Tensor self, Tensor? gradient=None, bool? retainGraph=None, bool createGraph=False, Tensor[]? inputs=None) -> ()",
  (self: Tensor, gradient: Tensor | null, retainGraph: boolean | null, createGraph: boolean, inputs: Tensor[] | null) =>
    backward.call(self, gradient, {
      ...(retainGraph !== null ? { retainGraph } : {}),
      createGraph,
      ...(inputs !== null ? { inputs } : {}),
    }),
  { transparent: true },
);
