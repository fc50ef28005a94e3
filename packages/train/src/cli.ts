// Entry of `torchts train` and `torchts grpo` ("@torchts/train/cli"): packages/torchts/src/cli.ts
// dispatches them here with a dynamic import, so torchts never depends on this package.
// In a repository checkout "torchts" is resolved to its sources through this package's tsconfig paths
// (tsx), so a run never uses a stale build; elsewhere the installed torchts is used.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

async function ensureTorchts(command: string): Promise<boolean> {
  const sources = new URL("../../torchts/src/index.ts", import.meta.url);
  if (existsSync(fileURLToPath(sources)) && process.env.TORCHTS_CLI_DIST !== "1") {
    try {
      const { register } = await import("tsx/esm/api");
      register({ tsconfig: fileURLToPath(new URL("../tsconfig.json", import.meta.url)) });
      return true;
    } catch {
      /* no tsx: fall back to the installed build */
    }
  }
  try {
    if (existsSync(fileURLToPath(import.meta.resolve("torchts/transformers")))) return true;
  } catch {
    /* unresolvable */
  }
  process.stderr.write(`${command}: torchts has no build (run \`npm run build -w torchts\`) and tsx is not installed\n`);
  return false;
}

export async function train(argv: string[]): Promise<number> {
  if (!(await ensureTorchts("torchts train"))) return 1;
  const m = (await import("./main.js")) as typeof import("./main.js");
  return m.trainMain(argv);
}

export async function grpo(argv: string[]): Promise<number> {
  if (!(await ensureTorchts("torchts grpo"))) return 1;
  const m = (await import("./main.js")) as typeof import("./main.js");
  return m.grpoMain(argv);
}
