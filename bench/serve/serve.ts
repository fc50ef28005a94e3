// Issue 13's serving benchmark: `torchts serve` (the batched engine behind the OpenAI server) against
// llama.cpp (node-llama-cpp) on the ~100M Llama, plus the tiny test model's batching, server
// overhead and prefix-cache numbers. See bench/README.md ("Serving") and bench/serve/RESULTS.md.
//   node --import tsx bench/serve/serve.ts [--quick] [--threads 2] [--no-write]
// This entry only makes sure tsx maps "torchts" to the sources (packages/serve/tsconfig.json's
// paths): from the repository root Node would resolve it to packages/torchts/dist, which may be a
// stale build (one without the paged KV cache the engine imports). main.ts and the server
// processes inherit the setting.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const TSCONFIG = fileURLToPath(new URL("../../packages/serve/tsconfig.json", import.meta.url));
if (process.env.TSX_TSCONFIG_PATH !== TSCONFIG) {
  const r = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
    stdio: "inherit",
    env: { ...process.env, TSX_TSCONFIG_PATH: TSCONFIG },
  });
  process.exit(r.status ?? 1);
}
await import("./main.js");
