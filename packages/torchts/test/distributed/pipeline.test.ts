// Pipeline parallelism (workers/pipeline.ts): a 4-stage minGPT at 4 ranks with GPipe and 1F1B equals
// single-process training.
import { test } from "node:test";
import { runChecks } from "./run_checks.js";

test("pipeline parallel minGPT at world size 4", (t) => runChecks(t, "pipeline", 4, { minChecks: 3 }));
