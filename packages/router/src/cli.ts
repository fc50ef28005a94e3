// Entry of `torchts router` ("@torchts/router/cli"): packages/torchts/src/cli.ts dispatches the `router`
// subcommand here with a dynamic import, as it does `serve`, so torchts never depends on this package.
// torchts itself is needed only for a local tokenizer or the precise prefix scorer; in a checkout
// without a torchts build it is resolved to its sources through this package's tsconfig paths (tsx).
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

async function ensureTorchts(): Promise<void> {
  try {
    if (existsSync(fileURLToPath(import.meta.resolve("torchts/transformers")))) return;
  } catch {
    /* not resolvable as built: register the sources below */
  }
  try {
    const { register } = await import("tsx/esm/api");
    register({ tsconfig: fileURLToPath(new URL("../tsconfig.json", import.meta.url)) });
  } catch {
    /* no tsx: a configuration that needs torchts will say so when it loads it */
  }
}

export async function main(argv: string[]): Promise<number> {
  await ensureTorchts();
  const m = (await import("./main.js")) as typeof import("./main.js");
  return m.main(argv);
}
