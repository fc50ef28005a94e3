// Elementwise closeness for the attention tests: |got - want| <= atol + rtol |want|, NaN only where
// the reference has NaN.
import assert from "node:assert/strict";

export function close(what: string, got: ArrayLike<number>, want: ArrayLike<number>, rtol = 1e-5, atol = 1e-5): void {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < got.length; i++) {
    const a = got[i]!, e = want[i]!;
    if (Number.isNaN(e) || Number.isNaN(a)) {
      assert.ok(Number.isNaN(a) && Number.isNaN(e), `${what}: [${i}] got ${a}, expected ${e}`);
      continue;
    }
    if (Math.abs(a - e) > atol + rtol * Math.abs(e)) assert.fail(`${what}: [${i}] got ${a}, expected ${e}`);
  }
}
