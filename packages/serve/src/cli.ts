// Entry of `torchts serve` ("@torchts/serve/cli"): packages/torchts/src/cli.ts dispatches the `serve`
// subcommand here with a dynamic import, so torchts never depends on this package.
// In a repository checkout torchts may have no build (dist/): then "torchts" is resolved to its
// sources through this package's tsconfig paths (tsx), before the server's modules load.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

async function torchtsResolves(): Promise<boolean> {
  try {
    return existsSync(fileURLToPath(import.meta.resolve("torchts/transformers")));
  } catch {
    return false;
  }
}

export async function main(argv: string[]): Promise<number> {
  if (!(await torchtsResolves())) {
    try {
      const { register } = await import("tsx/esm/api");
      register({ tsconfig: fileURLToPath(new URL("../tsconfig.json", import.meta.url)) });
    } catch {
      process.stderr.write("torchts serve: torchts has no build (run `npm run build -w torchts`) and tsx is not installed\n");
      return 1;
    }
  }
  const m = (await import("./main.js")) as typeof import("./main.js");
  return m.main(argv);
}
