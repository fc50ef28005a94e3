// Entry of `torchts train` and `torchts grpo` ("@torchts/train/cli"): packages/torchts/src/cli.ts
// dispatches them here with a dynamic import, so torchts never depends on this package.
// In a repository checkout "torchts" is resolved to its sources through this package's tsconfig paths
// (tsx), so a run never uses a stale build; elsewhere the installed torchts is used.
// (the same check as torchts serve's: one implementation, in @torchts/serve/cli, which loads nothing else)
import { ensureTorchts } from "@torchts/serve/cli";

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
