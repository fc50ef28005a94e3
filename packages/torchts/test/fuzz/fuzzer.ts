// The op-table fuzzer. For every op of the table it takes the op's samples (test/ops/opinfo/)
// and
//  1. calls each sample in every calling form (positional, options object, input by keyword,
//     mixed, varargs, Tensor method) in every eager mode and under torch.compile; all must agree
//     exactly;
//  2. mutates it, one argument at a time (wrong types, NaN, infinities, negative and huge sizes,
//     out-of-range dims and indices, unknown and misspelled keys, disposed tensors, tensors on
//     another device): each mutated call must either succeed with a well-formed result or throw
//     an Error whose message names the op, leave no pending node (fused eager) and no changed
//     version counter behind;
//  3. after every call, runs a canary (forward and backward through the arena) that must stay
//     exact.
// `runFuzz` returns the counts; the CI test (ops.fuzz.test.ts) asserts the failures are zero,
// and `run.ts` is the command line (--seed, --long, --op).
import * as torch from "../../src/index.js";
import { Tensor } from "../../src/index.js";
import { OP_TABLE } from "../../src/ops/registry.js";
import type { Param } from "../../src/ops/schema.js";
import { bindArgs, isPlainObject } from "../../src/ops/binder.js";
import { pendingCount } from "../../src/runtime/dispatch.js";
import { Maker, type OpInfos, type Sample } from "../ops/opinfo/types.js";
import { formsOf, pickSchema } from "./forms.js";
import { ALL_OPINFOS } from "../ops/opinfo/index.js";

export interface FuzzOptions {
  seed: number;
  /** more samples, more mutations per parameter, every mode for mutations */
  long: boolean;
  /** only these table keys */
  only?: string[];
  modes?: torch.EagerMode[];
  compile?: boolean;
  /** a second device for mixed-device mutations (e.g. "webgpu"), when available */
  otherDevice?: string | null;
  log?: (s: string) => void;
}

export interface FuzzReport {
  ops: number;
  calls: number;
  validCalls: number;
  mutatedCalls: number;
  mutatedThrew: number;
  mutatedSucceeded: number;
  compiled: number;
  compileGraphBreaks: number;
  /** samples run on the other device and compared with cpu */
  onDevice: number;
  /** ops the other device rejects (with an error naming the op) */
  deviceUnsupported: string[];
  failures: string[];
}

class Rng {
  constructor(private s: number) {}
  next(): number {
    let t = (this.s = (this.s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(xs: readonly T[], k: number): T[] {
    const a = [...xs];
    for (let i = a.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      [a[i], a[j]] = [a[j]!, a[i]!];
    }
    return a.slice(0, k);
  }
}

// ---------------------------------------------------------------- results

type Snap = unknown;

/** A comparable host copy of a result: tensors become {shape, dtype, values}. */
async function snap(v: unknown, depth = 0): Promise<Snap> {
  if (depth > 4) return "<deep>";
  if (v instanceof Tensor) {
    if (v.isDisposed) return { disposed: true };
    const n = v.numel();
    return { shape: [...v.shape], dtype: v.dtype, values: n <= 1 << 16 ? Array.from(await v.data()) : `<${n} elements>` };
  }
  if (Array.isArray(v)) return Promise.all(v.map((e) => snap(e, depth + 1)));
  if (v !== null && typeof v === "object") {
    const out: Record<string, Snap> = {};
    for (const [k, e] of Object.entries(v)) if (typeof e !== "function") out[k] = await snap(e, depth + 1);
    return out;
  }
  if (typeof v === "function") return "<function>";
  return v;
}

function same(a: Snap, b: Snap): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a === "number" && typeof b === "number") return Object.is(a, b);
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => same(x, b[i]));
  if (a && b && typeof a === "object" && typeof b === "object") {
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    return ka.length === kb.length && ka.every((k) => same((a as Record<string, Snap>)[k], (b as Record<string, Snap>)[k]));
  }
  return false;
}

function short(s: Snap): string {
  const t = JSON.stringify(s, (_, v) => (typeof v === "number" && !Number.isFinite(v) ? String(v) : v));
  return t === undefined ? String(s) : t.length > 200 ? t.slice(0, 200) + "..." : t;
}

/** A tensor on another device (tensors a sample built on cpu; requiresGrad kept on leaves). */
function toDevice(t: Tensor, dev: string): Tensor {
  const m = t.detach().to(dev);
  return t.requiresGrad && t.isLeaf ? m.requiresGrad_() : m;
}

/** Device results against cpu's: same structure, shapes and dtypes; values within float32 tolerance. */
function close(a: Snap, b: Snap, path = ""): string | null {
  if (typeof a === "number" && typeof b === "number") {
    if (Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b))) return null;
    const tol = 1e-4 + 1e-3 * Math.abs(a);
    return Math.abs(a - b) <= tol ? null : `${path}: ${b} vs ${a}`;
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length !== b.length) return `${path}: length ${b.length} vs ${a.length}`;
    for (let i = 0; i < a.length; i++) {
      const r = close(a[i], b[i], `${path}[${i}]`);
      if (r) return r;
    }
    return null;
  }
  if (a && b && typeof a === "object" && typeof b === "object") {
    for (const k of Object.keys(a)) {
      const r = close((a as Record<string, Snap>)[k], (b as Record<string, Snap>)[k], `${path}.${k}`);
      if (r) return r;
    }
    return null;
  }
  return Object.is(a, b) ? null : `${path}: ${short(b)} vs ${short(a)}`;
}

/** Random ops: Philox streams match across devices, but their float transforms may round differently. */
const RANDOM_OPS = /^(rand|randn|randint|randperm|randLike|randnLike|normal|bernoulli|multinomial|Tensor\.(uniform_|normal_)|dropout|F\.dropout)$/;

/** Is a successful result well formed: tensors alive with integer, non-negative shapes and readable values. */
async function wellFormed(v: unknown, depth = 0): Promise<string | null> {
  if (depth > 4) return null;
  if (v instanceof Tensor) {
    if (v.isDisposed) return "returned a disposed tensor";
    for (const d of v.shape) if (!Number.isInteger(d) || d < 0) return `returned a tensor of shape [${v.shape.join(", ")}]`;
    const n = v.numel();
    if (!Number.isSafeInteger(n)) return `returned a tensor of ${n} elements`;
    if (n <= 1 << 16) {
      const d = await v.data();
      if (d.length !== n) return `returned ${d.length} values for ${n} elements`;
    }
    return null;
  }
  if (Array.isArray(v)) {
    for (const e of v) {
      const r = await wellFormed(e, depth + 1);
      if (r) return r;
    }
    return null;
  }
  if (v !== null && typeof v === "object" && !(v instanceof Promise))
    for (const e of Object.values(v)) {
      const r = await wellFormed(e, depth + 1);
      if (r) return r;
    }
  return null;
}

// ---------------------------------------------------------------- the canary

interface CanaryRef {
  loss: number[];
  grad: number[];
  sum: number;
}
async function canaryValues(): Promise<CanaryRef> {
  const prevMode = torch.getEagerMode();
  torch.setEagerMode("strict");
  try {
    return await torch.enableGrad(async () => {
      const a = torch.tensor([[0.5, -1, 2, 0.25], [1.5, 0.75, -0.5, 1], [-2, 0.125, 1, 3], [0.5, 0.5, -1.25, 2]]);
      a.requiresGrad_();
      const loss = a.mul(2).sum().add(a.matmul(a).sum()).add(a.tanh().pow(2).mean());
      loss.backward();
      torch.manualSeed(7);
      const big = torch.randn(64, 64).mul(2).abs().sum();
      return { loss: Array.from(await loss.data()), grad: Array.from(await a.grad!.data()), sum: (await big.data())[0]! };
    });
  } finally {
    torch.setEagerMode(prevMode);
  }
}

// ---------------------------------------------------------------- mutations

interface Mutation {
  what: string;
  /** the value for the parameter; NO_KEY drops it; undefined is a value (JS `undefined`) */
  value: unknown;
  /** the call must throw (a value no schema accepts) */
  mustThrow: boolean;
}
const disposed = (): Tensor => {
  const t = torch.zeros(2, 2);
  t.dispose();
  return t;
};

function mutationsFor(p: Param, sample: Sample, otherDevice: string | null): Mutation[] {
  const v = sample[p.name];
  const ndim = (() => {
    for (const e of Object.values(sample)) if (e instanceof Tensor) return e.ndim;
    return 2;
  })();
  const m: Mutation[] = [];
  const throwing = (what: string, value: unknown) => m.push({ what, value, mustThrow: true });
  const maybe = (what: string, value: unknown) => m.push({ what, value, mustThrow: false });
  const notNull = !p.optional;
  switch (p.kind) {
    case "Tensor":
    case "TensorLike":
      throwing("str", "a");
      throwing("function", () => 1);
      if (notNull) throwing("null", null);
      throwing("array", [1, 2]);
      throwing("disposed tensor", disposed());
      if (p.kind === "Tensor") throwing("number", 3);
      maybe("0-dim tensor", torch.tensor(1.5));
      maybe("empty tensor", torch.zeros(0));
      maybe("int64 tensor", torch.tensor([[1, 2], [3, 4]]));
      maybe("bool tensor", torch.tensor([true, false]));
      maybe("NaN tensor", torch.full([2, 2], NaN));
      if (v instanceof Tensor) {
        maybe("extra dim", v.unsqueeze(0));
        if (v.ndim > 0) maybe("transposed/strided", v.ndim >= 2 ? v.transpose(0, 1) : v.flip(0));
        if (otherDevice) maybe(`tensor on ${otherDevice}`, v.to(otherDevice));
      }
      if (p.kind === "TensorLike") {
        maybe("NaN", NaN);
        maybe("Infinity", Infinity);
      }
      break;
    case "int":
      throwing("float", 1.5);
      throwing("NaN", NaN);
      throwing("Infinity", Infinity);
      throwing("str", "1");
      throwing("bool", true);
      if (notNull) throwing("null", null);
      maybe("-1", -1);
      maybe("-2^31", -(2 ** 31));
      maybe("1e12", 1e12);
      maybe("2^53", 2 ** 53);
      if (/dim/i.test(p.name)) {
        maybe("dim too large", ndim + 3);
        maybe("dim too small", -ndim - 3);
      }
      break;
    case "int[]":
    case "Size":
      throwing("str", "a");
      throwing("[float]", [1.5]);
      throwing("[NaN]", [NaN]);
      throwing("[str]", ["1"]);
      if (notNull) throwing("null", null);
      maybe("[-1]", [-1]);
      maybe("[1e12]", [1e12]);
      maybe("[2^31, 2^31]", [2 ** 31, 2 ** 31]);
      maybe("[]", []);
      maybe("[0, 0]", [0, 0]);
      if (/dim/i.test(p.name)) maybe("[dim too large]", [ndim + 3]);
      if (p.kind === "Size") throwing("[-1]", [-1]);
      break;
    case "float":
      throwing("str", "1");
      throwing("bool", true);
      if (notNull) throwing("null", null);
      maybe("NaN", NaN);
      maybe("Infinity", Infinity);
      maybe("-Infinity", -Infinity);
      maybe("-1", -1);
      maybe("1e308", 1e308);
      break;
    case "float[]":
      throwing("str", "a");
      throwing("[str]", ["1"]);
      maybe("[NaN]", [NaN]);
      break;
    case "bool":
      throwing("int", 1);
      throwing("str", "true");
      if (notNull) throwing("null", null);
      break;
    case "Scalar":
    case "Scalar[]":
      throwing("str", "3");
      throwing("function", () => 1);
      throwing("object", { valueOf: () => 1, a: 1, b: 2 } as unknown);
      if (notNull) throwing("null", null);
      maybe("NaN", NaN);
      maybe("Infinity", Infinity);
      maybe("-1e308", -1e308);
      break;
    case "ScalarType":
      throwing("unknown dtype", "float128");
      throwing("number", 3);
      if (notNull) throwing("null", null);
      break;
    case "Device":
      throwing("unknown device", "tpu");
      throwing("number", 3);
      break;
    case "MemoryFormat":
      throwing("unknown format", "nchw");
      break;
    case "str":
      throwing("number", 3);
      if (p.choices) throwing("not a choice", "bogus");
      else maybe("other string", "bogus");
      break;
    case "Tensor[]":
      throwing("str", "a");
      throwing("[str]", ["a"]);
      throwing("[disposed]", [disposed()]);
      maybe("[]", []);
      break;
    case "Generator":
      throwing("number", 3);
      throwing("plain object", { seed: 1 } as unknown);
      break;
    case "Callable":
      throwing("number", 3);
      break;
    case "Any":
      maybe("str", "a");
      maybe("null", null);
      maybe("NaN", NaN);
      maybe("number", 1e12);
      maybe("function", () => 1);
      break;
  }
  return m;
}

// ---------------------------------------------------------------- the run

/** A message names the op when it says "name(" or "name:" (not just the word: "index 5 is out of bounds"). */
function namesOp(msg: string, name: string): boolean {
  for (let i = msg.indexOf(name); i >= 0; i = msg.indexOf(name, i + 1)) {
    const before = i === 0 ? " " : msg[i - 1]!;
    const after = msg[i + name.length];
    if (!/[\w.]/.test(before) && (after === "(" || after === ":")) return true;
  }
  return false;
}

/** Ops whose result is random whatever the seed (torch.seed() draws a fresh seed): forms are not compared. */
const NONDETERMINISTIC = new Set(["seed"]);
/** Ops whose result is the eager mode itself. */
const MODE_DEPENDENT = new Set(["getEagerMode"]);

export async function runFuzz(o: FuzzOptions): Promise<FuzzReport> {
  const log = o.log ?? (() => {});
  const rng = new Rng(o.seed);
  const modes = o.modes ?? ["strict", "fused", "debug"];
  const rep: FuzzReport = {
    ops: 0,
    calls: 0,
    validCalls: 0,
    mutatedCalls: 0,
    mutatedThrew: 0,
    mutatedSucceeded: 0,
    compiled: 0,
    compileGraphBreaks: 0,
    onDevice: 0,
    deviceUnsupported: [],
    failures: [],
  };
  const fail = (s: string) => {
    if (rep.failures.length < 500) rep.failures.push(s);
  };
  const prevMode = torch.getEagerMode();
  const ref = await canaryValues();
  const checkCanary = async (after: string) => {
    const c = await canaryValues();
    if (!same(c.loss, ref.loss) || !same(c.grad, ref.grad) || !Object.is(c.sum, ref.sum)) {
      fail(`canary broken after ${after}: ${short(c)} != ${short(ref)}`);
      return false;
    }
    return true;
  };
  const infos: OpInfos = ALL_OPINFOS;
  const keys = [...OP_TABLE.keys()].filter((k) => !o.only || o.only.includes(k)).sort();
  let t0 = Date.now();
  for (const [ki, key] of keys.entries()) {
    const def = OP_TABLE.get(key)!;
    // the runtime switches are ops too (setGradEnabled, setDetectAnomaly...): each op starts from the same state
    restoreGlobals();
    const info = infos[key];
    if (!info) {
      fail(`${key}: no samples in test/ops/opinfo`);
      continue;
    }
    rep.ops++;
    const sampleSeed = (i: number) => o.seed * 7919 + i * 104729 + ki;
    const count = info(new Maker(sampleSeed(0))).length;
    const nSamples = o.long ? count : Math.min(count, 2);
    for (let si = 0; si < nSamples; si++) {
      const fresh = () => info(new Maker(sampleSeed(si)))[si]!;
      const s0 = fresh();
      const sc = pickSchema(def, s0);
      if (!sc) {
        fail(`${key}: sample ${si} (${Object.keys(s0).join(", ")}) matches no schema of ${def.schemas.map((s) => s.text).join(" | ")}`);
        continue;
      }
      // 1. forms x modes agree
      let first: { snap: Snap; where: string } | null = null;
      let isAsync = false;
      for (const mode of modes) {
        torch.setEagerMode(mode);
        if (MODE_DEPENDENT.has(key)) first = null; // its value is the mode: forms agree within one
        for (const form of formsOf(def, sc, fresh, rng)) {
          rep.calls++;
          rep.validCalls++;
          let r: Snap;
          try {
            torch.manualSeed(1234);
            let out = form.call();
            if (out instanceof Promise) {
              out = await out;
              isAsync = true;
            }
            r = await snap(out);
            torch.sync();
          } catch (e) {
            fail(`${key}: valid sample ${si} threw in ${mode}/${form.name}: ${(e as Error)?.message ?? e}`);
            continue;
          }
          if (first === null) first = { snap: r, where: `${mode}/${form.name}` };
          else if (!NONDETERMINISTIC.has(key) && !same(first.snap, r))
            fail(`${key}: sample ${si} ${mode}/${form.name} gives ${short(r)} but ${first.where} gives ${short(first.snap)}`);
        }
      }
      torch.setEagerMode("strict");
      // under torch.compile: record, record, replay
      if (o.compile !== false && first !== null && si === 0 && !isAsync && !def.transparent) {
        const fn = def.fn as (...a: unknown[]) => unknown;
        const c = torch.compile((args: unknown[]) => fn(...args), { name: `fuzz_${key}` });
        const ps = sc.params;
        try {
          let last: Snap = null;
          for (let k = 0; k < 3; k++) {
            const s = fresh();
            const args = ps.filter((p) => !p.kwOnly).flatMap((p) => (p.rest ? ((s[p.name] as unknown[]) ?? []) : [p.name in s ? s[p.name] : undefined]));
            const kw: Record<string, unknown> = {};
            for (const p of ps) if (p.kwOnly && p.name in s) kw[p.name] = s[p.name];
            torch.manualSeed(1234);
            last = await snap(c(Object.keys(kw).length ? [...args, kw] : args));
          }
          rep.calls += 3;
          rep.compiled++;
          if (!NONDETERMINISTIC.has(key) && !same(last, first.snap)) fail(`${key}: sample ${si} under torch.compile gives ${short(last)} but ${first.where} gives ${short(first.snap)}`);
        } catch (e) {
          const msg = String((e as Error)?.message ?? e);
          if (/reads a tensor value on the host|host read|cannot be compiled|synchronously/i.test(msg)) rep.compileGraphBreaks++;
          else fail(`${key}: sample ${si} under torch.compile threw: ${msg}`);
        }
      }
      // on the other device (webgpu): the same call with every tensor moved there, compared with cpu
      if (o.otherDevice && first !== null && si === 0 && !isAsync && !NONDETERMINISTIC.has(key) && !MODE_DEPENDENT.has(key) && !RANDOM_OPS.test(key)) {
        const dev = o.otherDevice;
        rep.calls++;
        try {
          const s = fresh();
          const moved: Sample = {};
          for (const [k, v] of Object.entries(s))
            moved[k] = v instanceof Tensor ? toDevice(v, dev) : Array.isArray(v) && v.every((e) => e instanceof Tensor) ? v.map((e) => toDevice(e as Tensor, dev)) : v;
          const args = sc.params
            .filter((p) => !p.kwOnly)
            .flatMap((p) => (p.rest ? ((moved[p.name] as unknown[]) ?? []) : [p.name in moved ? moved[p.name] : undefined]));
          const kw: Record<string, unknown> = {};
          for (const p of sc.params) if (p.kwOnly && p.name in moved) kw[p.name] = moved[p.name];
          torch.manualSeed(1234);
          const r = await snap((def.fn as (...a: unknown[]) => unknown)(...(Object.keys(kw).length ? [...args, kw] : args)));
          rep.onDevice++;
          const bad = close(first.snap, r);
          if (bad) fail(`${key}: sample ${si} on ${dev} differs from ${first.where}: ${bad}`);
        } catch (e) {
          const msg = String((e as Error)?.message ?? e);
          if (!namesOp(msg, def.name)) fail(`${key}: sample ${si} on ${dev} threw an error not naming the op: ${msg.split("\n")[0]}`);
          else rep.deviceUnsupported.push(`${key}: ${msg.split("\n")[0]!.slice(0, 160)}`);
        }
      }
      // 2. mutations
      if (si > 0 && !o.long) continue;
      const mutModes: torch.EagerMode[] = modes;
      const cases: { what: string; build: () => { args: unknown[] }; mustThrow: boolean }[] = [];
      const ps = sc.params;
      const callArgs = (s: Sample, over: string | null, value: unknown, extraKw: Record<string, unknown> = {}) => {
        // options form except for input: the mutated parameter is given by keyword (or positionally, half the time)
        const kw: Record<string, unknown> = { ...extraKw };
        const args: unknown[] = [];
        for (const p of ps) {
          const has = p.name === over || p.name in s;
          if (!has) continue;
          const val = p.name === over ? value : s[p.name];
          if (p.rest) args.push(...(val as unknown[])); // (a rest parameter's mutation is one element)
          else if (p.index === 0 && !p.kwOnly) args.push(val);
          else kw[p.name] = val;
        }
        return Object.keys(kw).length ? [...args, kw] : args;
      };
      for (const p of ps) {
        const muts = mutationsFor(p, s0, o.otherDevice ?? null).map((mu) => (p.rest ? { ...mu, value: [mu.value] } : mu));
        const chosen = o.long ? muts : rng.pick(muts, Math.min(muts.length, 6));
        for (const mu of chosen) {
          const positionalToo = p.index > 0 && !p.kwOnly && !p.rest && p.index <= 1 && !isPlainObject(mu.value);
          cases.push({
            what: `${p.name} = ${mu.what}`,
            build: () => {
              const s = fresh();
              if (positionalToo && rng.next() < 0.5) {
                const args = [s[ps[0]!.name], mu.value];
                const kw: Record<string, unknown> = {};
                for (const q of ps) if (q.index > 1 && q.name in s) kw[q.name] = s[q.name];
                return { args: Object.keys(kw).length ? [...args, kw] : args };
              }
              return { args: callArgs(s, p.name, mu.value) };
            },
            mustThrow: mu.mustThrow,
          });
        }
      }
      const anyKey = ps.find((p) => p.index > 0)?.name;
      cases.push({ what: "unknown key", build: () => ({ args: callArgs(fresh(), null, undefined, { bogusKey: 1 }) }), mustThrow: true });
      if (anyKey && anyKey.toLowerCase() !== anyKey.toUpperCase()) {
        const typo = anyKey.length > 1 ? anyKey[0]!.toUpperCase() + anyKey.slice(1) : anyKey.toUpperCase();
        if (!sc.byName.has(typo))
          cases.push({ what: `misspelled key '${typo}'`, build: () => ({ args: callArgs(fresh(), null, undefined, { [typo]: fresh()[anyKey] ?? 1 }) }), mustThrow: true });
      }
      cases.push({
        what: "too many positional arguments",
        build: () => {
          const s = fresh();
          return { args: [...ps.filter((p) => !p.kwOnly).map((p) => (p.name in s ? s[p.name] : p.default ?? null)), 1, 2, 3] };
        },
        mustThrow: true,
      });
      for (const mode of mutModes) {
        torch.setEagerMode(mode);
        for (const c of cases) {
          rep.calls++;
          rep.mutatedCalls++;
          let built: { args: unknown[] };
          try {
            built = c.build();
          } catch (e) {
            fail(`${key}: building mutation '${c.what}' threw: ${(e as Error).message}`);
            continue;
          }
          // a value one overload rejects may be another's (pow(2, x)): must-throw needs every overload to refuse it
          const mustThrow = c.mustThrow && def.schemas.every((sch) => typeof bindArgs(sch, built.args) === "string");
          const tensors = built.args.flatMap((a) => (a instanceof Tensor ? [a] : isPlainObject(a) ? Object.values(a).filter((v) => v instanceof Tensor) : [])) as Tensor[];
          const versions = tensors.map((t) => (t.isDisposed ? -1 : t._version));
          const pendingBefore = pendingCount();
          let result: unknown;
          let threw: unknown = undefined;
          try {
            torch.manualSeed(99);
            result = (def.fn as (...a: unknown[]) => unknown)(...built.args);
            if (result instanceof Promise) result = await result; // host reads: a rejection is the error
          } catch (e) {
            threw = e ?? new Error("undefined thrown");
          }
          const where = `${key} [${mode}] ${c.what}`;
          if (threw !== undefined) {
            rep.mutatedThrew++;
            if (!(threw instanceof Error)) fail(`${where}: threw a non-Error ${String(threw)}`);
            else if (!namesOp(threw.message, def.name)) fail(`${where}: error does not name the op: ${threw.constructor.name}: ${threw.message.split("\n")[0]}`);
            if (pendingCount() !== pendingBefore) fail(`${where}: threw but left ${pendingCount() - pendingBefore} pending nodes`);
            tensors.forEach((t, i) => {
              if (!t.isDisposed && t._version !== versions[i]) fail(`${where}: threw but bumped an input's version counter`);
            });
          } else {
            rep.mutatedSucceeded++;
            // what a lazily-recorded result does when it is computed is part of the call (fused eager)
            if (mustThrow) fail(`${where}: accepted (should be rejected): returned ${short(await snap(result).catch((e) => `<unreadable: ${e}>`))}`);
            else {
              try {
                const bad = await wellFormed(result);
                if (bad) fail(`${where}: ${bad}`);
              } catch (e) {
                const msg = (e as Error).message ?? String(e);
                // a lazily-failing result must still name the op
                if (!namesOp(msg, def.name) && !/OutOfMemory|allocate/.test(msg)) fail(`${where}: result unreadable: ${msg.split("\n")[0]}`);
              }
            }
            try {
              torch.sync();
            } catch (e) {
              fail(`${where}: accepted, then the flush threw: ${(e as Error)?.message?.split("\n")[0] ?? e}`);
            }
          }
          if (!(await checkCanary(where))) break;
        }
      }
      torch.setEagerMode("strict");
    }
    if (Date.now() - t0 > 5000) {
      log(`fuzz: ${ki + 1}/${keys.length} ops, ${rep.calls} calls, ${rep.failures.length} failures`);
      t0 = Date.now();
    }
  }
  restoreGlobals();
  torch.setEagerMode(prevMode);
  return rep;
}

function restoreGlobals(): void {
  torch.setGradEnabled(true);
  torch.setDetectAnomaly(false);
  torch.setCpuFallback(false);
  torch.setDefaultDtype("float32");
}
