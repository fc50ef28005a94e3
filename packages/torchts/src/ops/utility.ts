// torch-level utilities that take arguments: promoteTypes, setDefaultDtype, getDefaultDtype,
// numel, isTensor, device. Op-table entries like every public function, so their arguments are
// checked by the one binder with PyTorch's messages.
import * as D from "../ir/dtype.js";
import type { DType } from "../ir/dtype.js";
import { Tensor } from "../tensor.js";
import { op, type Sig } from "./registry.js";
import { registeredDevices } from "../device/plugin.js";

const KNOWN_KINDS = ["cpu", "webgpu"];

/** torch.promote_types(type1, type2) */
export const promoteTypes = op<Sig<[type1: DType, type2: DType], { type1?: DType; type2?: DType }, DType>>(
  "promoteTypes(ScalarType type1, ScalarType type2) -> ScalarType",
  (a: DType, b: DType): DType => D.promoteTypes(a, b),
);

/** torch.set_default_dtype(d): only floating-point dtypes */
export const setDefaultDtype = op<Sig<[d: DType], { d?: DType }, void>>("setDefaultDtype(ScalarType d) -> None", (d: DType): void => {
  if (!D.isFloating(d)) throw new TypeError(`invalid dtype object: only floating-point types are supported as the default type (got ${d})`);
  D.setDefaultDtype(d);
});

/** torch.get_default_dtype() */
export const getDefaultDtype = op<() => DType>("getDefaultDtype() -> ScalarType", (): DType => D.getDefaultDtype());

/** torch.numel(input): the number of elements of a tensor */
export const numel = op<Sig<[input: Tensor], { input?: Tensor }, number>>("numel(Tensor input) -> int", (t: Tensor): number => t.numel());

/** torch.is_tensor(obj) */
export const isTensor = op<(obj: unknown) => boolean>("isTensor(Any obj) -> bool", (obj: unknown): boolean => obj instanceof Tensor);

/**
 * torch.device("cpu"), device("webgpu:0"), device("cpu", 0): a device name (torchts represents
 * devices by their names): a known device kind (cpu, webgpu) or a registered plugin, as PyTorch's
 * "Expected one of cpu, cuda, ... device type at start of device string".
 */
export const device = op<Sig<[type: string, index?: number | null], { type?: string; index?: number | null }, string>>(
  "device(Device type, int? index=None) -> Device",
  (type: string, index: number | null): string => {
    const m = /^([a-z][a-z0-9_]*)(?::(\d+))?$/.exec(type);
    if (!m) throw new Error(`Invalid device string: '${type}'`);
    // a device kind torchts knows (webgpu before its init()) or a registered plugin
    if (!KNOWN_KINDS.includes(m[1]!) && !registeredDevices().includes(m[1]!))
      throw new Error(`Expected one of ${[...new Set([...KNOWN_KINDS, ...registeredDevices()])].join(", ")} device type at start of device string: ${type}`);
    if (index === null) return type;
    if (m[2] !== undefined) throw new Error(`type (string) must not include an index because index was passed explicitly: ${type}`);
    if (index < 0) throw new Error("Device index must not be negative");
    return `${type}:${index}`;
  },
);
