// The wasm pool's job protocol: every unit of a job runs exactly once, and a worker still in the
// previous job's claim loop (woken late) cannot claim a chunk while the next job's parameters are
// being written. That race ran one extra attention call with the next job's parameters (its
// scratch-slot check trapped: "scaledDotProductAttention(): unreachable") in a 2-thread training
// run on a loaded machine. The test plays the late worker at the point where it used to slip in.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ARGS_BYTE, CLAIM_BYTE, CTL_BYTES, GEN, MAX_ARGS, Pool, READY, drain } from "../../../src/device/cpu/wasm/pool.js";

test("a late worker of the last job claims nothing while the next job is posted; each unit runs once", () => {
  const buffer = new SharedArrayBuffer(CTL_BYTES);
  const ctl = new Int32Array(buffer, 0, CTL_BYTES / 4);
  const claim = new BigInt64Array(buffer, CLAIM_BYTE, 1);
  const args = new Float64Array(buffer, ARGS_BYTE, MAX_ARGS);
  const calls: { fn: string; lo: number; hi: number; a0: number }[] = [];
  const fns = [
    (lo: number, hi: number, a0: number) => void calls.push({ fn: "a", lo, hi, a0 }),
    (lo: number, hi: number, a0: number) => void calls.push({ fn: "b", lo, hi, a0 }),
  ];
  // one stand-in worker that never runs a chunk itself: the caller drains every job alone
  const pool = new Pool({ buffer }, {}, ["a", "b"], fns, 2, () => ({ terminate: () => undefined }));
  Atomics.store(ctl, READY, 1);
  const units = (fn: string) => {
    const seen = new Array<number>(16).fill(0);
    for (const c of calls) if (c.fn === fn) for (let u = c.lo; u < c.hi; u++) seen[u]!++;
    return seen;
  };

  pool.run(0, 2, [7], 1, 1); // job A: 2 units, 2 chunks
  assert.deepEqual(units("a").slice(0, 2), [1, 1]);
  const genA = Atomics.load(ctl, GEN);
  calls.length = 0;

  let lateCalls = -1;
  pool.posting = () => {
    // job B's parameters are written (8 chunks): the late worker of job A tries to claim one
    drain(ctl, claim, args, fns, genA, (i) => fns[i]!);
    lateCalls = calls.length;
  };
  pool.run(1, 16, [9], 1, 1);
  pool.posting = null;
  assert.equal(lateCalls, 0, "the late worker ran a chunk of the job being posted");
  assert.deepEqual(units("b"), new Array(16).fill(1));
  assert.ok(calls.every((c) => c.fn === "b" && c.a0 === 9));
  assert.equal(calls.length, 8);

  // and it still finds nothing once the job is out
  drain(ctl, claim, args, fns, genA, (i) => fns[i]!);
  assert.equal(calls.length, 8);
});
