// FSDP2's fullyShard at world sizes 2 and 4 (workers/fsdp.ts under `torchts run`): minGPT equals
// single-process training (reshardAfterForward true and false), per-rank memory is 1/N, the
// collectives per step, the sharded state dict through a distributed checkpoint, mixed precision.
import { test } from "node:test";
import { runChecks } from "./run_checks.js";

for (const n of [2, 4]) test(`fullyShard at world size ${n}`, (t) => runChecks(t, "fsdp", n, { minChecks: 7 }));
