// The calling forms of one sample of an op-table entry: positional, options object, every
// parameter by keyword, mixed, PyTorch's varargs, and the Tensor method forms. Shared by the fuzzer
// and the per-family "forms agree" tests (test/ops/forms_helper.ts).
import { Tensor } from "../../src/index.js";
import { isPlainObject } from "../../src/ops/binder.js";
import type { OpDef } from "../../src/ops/registry.js";
import type { Schema } from "../../src/ops/schema.js";
import type { Sample } from "../ops/opinfo/types.js";

export interface Form {
  name: string;
  call: () => unknown;
}

export function pickSchema(def: OpDef, s: Sample): Schema | null {
  for (const sc of def.schemas) {
    const keys = Object.keys(s);
    if (!keys.every((k) => sc.byName.has(k))) continue;
    if (sc.params.some((p) => !p.hasDefault && !p.optional && !(p.name in s) && !p.kwOnly)) continue;
    return sc;
  }
  return null;
}

export function methodOf(def: OpDef): string | null {
  const P = Tensor.prototype as unknown as Record<string, unknown>;
  for (const name of [def.name, def.key.startsWith("Tensor.") ? def.key.slice(7) : null]) {
    if (name && Object.getOwnPropertyDescriptor(P, name)?.value === def.method) return name;
  }
  return null;
}

/** The calling forms of one sample (each builds its arguments from a fresh sample). */
export function formsOf(def: OpDef, sc: Schema, fresh: () => Sample, rng: { int(n: number): number } | null): Form[] {
  const ps = sc.params;
  const fn = def.fn as (...a: unknown[]) => unknown;
  const s0 = fresh();
  const given = ps.filter((p) => p.name in s0);
  const lastPos = Math.max(-1, ...given.filter((p) => !p.kwOnly).map((p) => p.index));
  const kwGiven = given.filter((p) => p.kwOnly);
  const forms: Form[] = [];
  const positional = (s: Sample, upto: number): unknown[] =>
    ps.slice(0, upto + 1).flatMap((p) => (p.rest ? ((s[p.name] as unknown[] | undefined) ?? []) : [p.name in s ? s[p.name] : undefined]));
  const opts = (s: Sample, from: number): Record<string, unknown> => {
    const o: Record<string, unknown> = {};
    for (const p of ps) if (p.index >= from && p.name in s) o[p.name] = s[p.name];
    return o;
  };
  // an options object can only trail; a positional plain-object value would be read as one
  const ambiguous = given.some((p) => isPlainObject(s0[p.name])) || sc.restIndex >= 0; // a rest parameter is only positional
  const withKw = (s: Sample, args: unknown[]): unknown[] => {
    const kw: Record<string, unknown> = {};
    for (const p of kwGiven) kw[p.name] = s[p.name];
    return kwGiven.length ? [...args, kw] : args;
  };
  forms.push({ name: "positional", call: () => { const s = fresh(); return fn(...withKw(s, positional(s, lastPos))); } });
  if (!ambiguous) {
    forms.push({ name: "options", call: () => { const s = fresh(); return ps[0] && ps[0].name in s ? fn(s[ps[0].name], opts(s, 1)) : fn(opts(s, 0)); } });
    forms.push({ name: "all keywords", call: () => fn(opts(fresh(), 0)) });
    // one split chosen by rng, or every split when there is none
    const splits = lastPos < 1 ? [] : rng ? [1 + rng.int(lastPos)] : Array.from({ length: lastPos }, (_, i) => i + 1);
    for (const k of splits)
      forms.push({ name: `mixed(${k} positional)`, call: () => { const s = fresh(); return fn(...positional(s, k - 1), opts(s, k)); } });
  }
  const va = sc.varargsIndex;
  const m = methodOf(def);
  // PyTorch's varargs: torch.zeros(2, 3) (the list first) and x.view(2, 3) (first after self)
  const varargsOk = va >= 0 && lastPos === va && Array.isArray(s0[ps[va]!.name]) && (s0[ps[va]!.name] as unknown[]).length >= 1;
  if (varargsOk && va === 0)
    forms.push({ name: "varargs", call: () => { const s = fresh(); return fn(...withKw(s, [...(s[ps[0]!.name] as unknown[])])); } });
  if (varargsOk && va === 1 && m && s0[ps[0]!.name] instanceof Tensor)
    forms.push({
      name: "method varargs",
      call: () => {
        const s = fresh();
        const self = s[ps[0]!.name] as Record<string, (...a: unknown[]) => unknown>;
        return self[m]!(...withKw(s, [...(s[ps[1]!.name] as unknown[])]));
      },
    });
  if (m && ps[0] && s0[ps[0].name] instanceof Tensor) {
    forms.push({
      name: "method",
      call: () => {
        const s = fresh();
        const self = s[ps[0]!.name] as Record<string, (...a: unknown[]) => unknown>;
        return self[m]!(...withKw(s, positional(s, lastPos).slice(1)));
      },
    });
    if (!ambiguous)
      forms.push({
        name: "method options",
        call: () => {
          const s = fresh();
          const self = s[ps[0]!.name] as Record<string, (...a: unknown[]) => unknown>;
          return self[m]!(opts(s, 1));
        },
      });
  }
  return forms;
}

