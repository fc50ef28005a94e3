// torch.distributed.embedding at world sizes 2 and 4 (workers/embedding.ts under `torchts run`): a
// row-wise sharded EmbeddingBagCollection equals the unsharded one in outputs and gradients (uneven
// rows and batches, empty bags, shards and batches, mean pooling), invalid inputs raise on every rank,
// and the DLRM example with sharded tables and DDP dense MLPs trains as one process on the whole batch.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { runChecks } from "./run_checks.js";

for (const n of [2, 4])
  test(`sharded EmbeddingBagCollection at world size ${n}`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), "torchts-embedding-"));
    try {
      await runChecks(t, "embedding", n, { minChecks: 10, args: [dir] });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
