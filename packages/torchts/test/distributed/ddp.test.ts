// nn.parallel.DistributedDataParallel at world sizes 2 and 4 (workers/ddp.ts under `torchts run`):
// minGPT trained with DDP (and with noSync accumulation) equals single-process training, bucket
// rebuilding, unused-parameter detection and its error, buffer broadcast, overlap with backward.
import { test } from "node:test";
import { runChecks } from "./run_checks.js";

for (const n of [2, 4]) test(`DistributedDataParallel at world size ${n}`, (t) => runChecks(t, "ddp", n, { minChecks: 9 }));
