// Entry of `torchts serve` and `torchts bench serve` ("@torchts/serve/cli"): packages/torchts/src/cli.ts
// dispatches the `serve` and `bench` subcommands here with a dynamic import, so torchts never depends
// on this package.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

/**
 * In a repository checkout "torchts" is resolved to its sources through this package's tsconfig paths
 * (tsx), so a run never uses a stale build (packages/torchts/dist, e.g. one a test made earlier);
 * elsewhere the installed torchts is used. False (after saying why) when neither works.
 */
export async function ensureTorchts(command: string): Promise<boolean> {
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

export async function main(argv: string[]): Promise<number> {
  if (!(await ensureTorchts("torchts serve"))) return 1;
  const m = (await import("./main.js")) as typeof import("./main.js");
  return m.main(argv);
}

const BENCH_USAGE = "usage: torchts bench serve --base-url URL ...   (torchts bench serve --help)";

/** `torchts bench SUB ...`: only `serve` (the benchmark client of src/bench/) so far. */
export async function bench(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub !== "serve") {
    const help = sub === "--help" || sub === "-h";
    (help ? process.stdout : process.stderr).write(`${sub === undefined || help ? "" : `torchts bench: unknown benchmark '${sub}'\n`}${BENCH_USAGE}\n`);
    return help ? 0 : 2;
  }
  if (!(await ensureTorchts("torchts bench serve"))) return 1;
  const m = (await import("./bench/cli.js")) as typeof import("./bench/cli.js");
  return m.main(rest);
}
