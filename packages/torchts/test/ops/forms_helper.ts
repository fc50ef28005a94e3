// Shared by the *_args tests of the reduce, creation and random families: every sample of a
// family's OPINFO called positionally, as an options object, all by keyword, mixed, and as a
// Tensor method must give the same result. `reseed` runs before each call (random ops).
import assert from "node:assert/strict";
import { Tensor } from "../../src/index.js";
import { OP_TABLE } from "../../src/ops/registry.js";
import { isPlainObject } from "../../src/ops/binder.js";
import type { Schema } from "../../src/ops/schema.js";
import { Maker, type SampleFn, type Sample } from "./opinfo/types.js";

function snapshot(v: unknown): unknown {
  if (v instanceof Tensor) return { shape: [...v.shape], dtype: v.dtype, values: v._tolistSync() };
  if (Array.isArray(v)) return v.map(snapshot);
  if (v !== null && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, e]) => [k, snapshot(e)]));
  return v;
}

export function checkForms(key: string, gen: SampleFn, reseed: () => void = () => {}): void {
  const def = OP_TABLE.get(key);
  assert.ok(def, `${key} is not in the op table`);
  const fn = def.fn as (...a: unknown[]) => unknown;
  const nSamples = gen(new Maker(1)).length;
  for (let si = 0; si < nSamples; si++) {
    const fresh = (): Sample => gen(new Maker(1))[si]!;
    const s0 = fresh();
    const sc: Schema | undefined = def.schemas.find(
      (s) => Object.keys(s0).every((k) => s.byName.has(k)) && s.params.every((p) => p.hasDefault || p.optional || p.kwOnly || p.name in s0),
    );
    assert.ok(sc, `${key} sample ${si} matches no schema`);
    const ps = sc.params;
    const pos = ps.filter((p) => !p.kwOnly && p.name in s0);
    const last = Math.max(-1, ...pos.map((p) => p.index));
    const kw = (s: Sample, from: number) => Object.fromEntries(ps.filter((p) => (p.index >= from || p.kwOnly) && p.name in s).map((p) => [p.name, s[p.name]]));
    const kwOnly = (s: Sample) => Object.fromEntries(ps.filter((p) => p.kwOnly && p.name in s).map((p) => [p.name, s[p.name]]));
    const positional = (s: Sample, upto: number) => ps.slice(0, upto + 1).map((p) => s[p.name]);
    const withKw = (s: Sample, a: unknown[]) => (Object.keys(kwOnly(s)).length ? [...a, kwOnly(s)] : a);
    const forms: [string, () => unknown][] = [["positional", () => { const s = fresh(); return fn(...withKw(s, positional(s, last))); }]];
    if (!ps.some((p) => isPlainObject(s0[p.name]))) {
      forms.push(["all keywords", () => fn(kw(fresh(), 0))]);
      if (ps[0] && ps[0].name in s0) forms.push(["options", () => { const s = fresh(); return fn(s[ps[0]!.name], kw(s, 1)); }]);
      for (let k = 1; k <= last; k++) forms.push([`mixed(${k})`, () => { const s = fresh(); return fn(...positional(s, k - 1), kw(s, k)); }]);
    }
    const va = sc.varargsIndex;
    if (va >= 0 && last === va && Array.isArray(s0[ps[va]!.name]) && (s0[ps[va]!.name] as unknown[]).length >= 2)
      forms.push(["varargs", () => { const s = fresh(); return fn(...withKw(s, [...positional(s, va - 1), ...(s[ps[va]!.name] as unknown[])])); }]);
    const m = key.startsWith("Tensor.") ? key.slice(7) : key;
    // (a descriptor read: Tensor.prototype.device is a getter)
    const own = Object.getOwnPropertyDescriptor(Tensor.prototype, m);
    if (own?.value === def.method && s0[ps[0]!.name] instanceof Tensor) {
      const call = (s: Sample, a: unknown[]) => (s[ps[0]!.name] as unknown as Record<string, (...b: unknown[]) => unknown>)[m]!(...a);
      forms.push(["method", () => { const s = fresh(); return call(s, withKw(s, positional(s, last).slice(1))); }]);
      forms.push(["method options", () => { const s = fresh(); return call(s, [kw(s, 1)]); }]);
    }
    const run = (f: () => unknown) => {
      reseed();
      return snapshot(f());
    };
    const [name0, f0] = forms[0]!;
    const want = run(f0);
    for (const [name, f] of forms.slice(1)) assert.deepEqual(run(f), want, `${key} sample ${si}: ${name} differs from ${name0}`);
  }
}
