// Shared by the *_args tests of the op families: every sample of a family's OPINFO called in every
// calling form (test/fuzz/forms.ts: positional, options object, all by keyword, every mixed split,
// varargs, Tensor method) must give the same result. `reseed` runs before each call (random ops).
import assert from "node:assert/strict";
import { Tensor } from "../../src/index.js";
import { OP_TABLE } from "../../src/ops/registry.js";
import { formsOf, pickSchema } from "../fuzz/forms.js";
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
  const nSamples = gen(new Maker(1)).length;
  for (let si = 0; si < nSamples; si++) {
    const fresh = (): Sample => gen(new Maker(1))[si]!;
    const sc = pickSchema(def, fresh());
    assert.ok(sc, `${key} sample ${si} matches no schema`);
    const forms = formsOf(def, sc, fresh, null);
    const run = (f: () => unknown) => {
      reseed();
      return snapshot(f());
    };
    const want = run(forms[0]!.call);
    for (const f of forms.slice(1)) assert.deepEqual(run(f.call), want, `${key} sample ${si}: ${f.name} differs from ${forms[0]!.name}`);
  }
}
