// Tensor parallelism at world sizes 2 and 4 (workers/tp.ts under `torchts run`): a Colwise -> Rowwise
// MLP, an attention block with its heads split, and sequence parallelism equal the unsharded modules
// in forward and gradients.
import { test } from "node:test";
import { runChecks } from "./run_checks.js";

for (const n of [2, 4]) test(`tensor parallel at world size ${n}`, (t) => runChecks(t, "tp", n, { minChecks: 4 }));
