// DeviceMesh and DTensor at world sizes 2 and 4 (workers/dtensor.ts under `torchts run`): every
// placement pair redistributes and round-trips exactly (uneven and 2-d included), and sharding
// propagation for pointwise ops, matmul/linear, embedding, reductions, softmax and norms, and views.
import { test } from "node:test";
import { runChecks } from "./run_checks.js";

for (const n of [2, 4]) test(`DTensor at world size ${n}`, (t) => runChecks(t, "dtensor", n, { minChecks: 11 }));
