// `torchts router`: flags or a YAML file to a validated configuration, then the router until SIGTERM /
// SIGINT, which stop new requests, let those in flight finish, and exit 0.
import { parseArgs } from "node:util";
import { stringify } from "yaml";
import { ConfigError, loadConfig, validateConfig, type RouterConfig } from "./config.js";
import { createRouter } from "./router.js";

export const USAGE = `usage: torchts router --config router.yaml [--host H] [--port P]
       torchts router --replica URL [--replica URL ...] [--prefill URL ...] [--decode URL ...]
                      [--host 127.0.0.1] [--port 8000] [--tokenizer DIR | --remote-tokenizer]
                      [--pd-threshold TOKENS] [--print-config]
  --replica URL      a replica that prefills and decodes (role both); --prefill / --decode give roles
  --tokenizer DIR    the model folder: exact token ids for the precise (KV-event) prefix scorer
  --remote-tokenizer token ids from the replicas' POST /tokenize instead
  --pd-threshold N   with --prefill replicas: prefill remotely when over N uncached prompt tokens (256)
  --print-config     print the validated configuration (defaults filled in) as YAML and exit
  The YAML file is apiVersion: torchts.router/v1 (docs/router.md). --port 0 picks a free port.`;

const OPTIONS = {
  config: { type: "string" },
  replica: { type: "string", multiple: true },
  prefill: { type: "string", multiple: true },
  decode: { type: "string", multiple: true },
  host: { type: "string" },
  port: { type: "string" },
  tokenizer: { type: "string" },
  "remote-tokenizer": { type: "boolean" },
  "pd-threshold": { type: "string" },
  "print-config": { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

function build(v: ReturnType<typeof parseArgs<{ options: typeof OPTIONS }>>["values"]): RouterConfig {
  const port = v.port === undefined ? undefined : Number(v.port);
  if (port !== undefined && !(Number.isInteger(port) && port >= 0 && port <= 65535)) throw new ConfigError(`--port: expected 0..65535, got '${v.port}'`);
  const listed = [...(v.replica ?? []), ...(v.prefill ?? []), ...(v.decode ?? [])];
  if (v.config) {
    if (listed.length) throw new ConfigError("--config and --replica/--prefill/--decode are exclusive (list the replicas in the file)");
    const c = loadConfig(v.config);
    if (v.host) c.server.host = v.host;
    if (port !== undefined) c.server.port = port;
    return c;
  }
  if (!listed.length) throw new ConfigError("give --config FILE or at least one --replica URL");
  const threshold = v["pd-threshold"] === undefined ? undefined : Number(v["pd-threshold"]);
  if (threshold !== undefined && !(Number.isInteger(threshold) && threshold >= 0)) throw new ConfigError(`--pd-threshold: expected an integer >= 0, got '${v["pd-threshold"]}'`);
  const replicas = [
    ...(v.replica ?? []).map((url) => ({ url, role: "both" })),
    ...(v.prefill ?? []).map((url) => ({ url, role: "prefill" })),
    ...(v.decode ?? []).map((url) => ({ url, role: "decode" })),
  ];
  return validateConfig(
    {
      apiVersion: "torchts.router/v1",
      kind: "RouterConfig",
      server: { ...(v.host ? { host: v.host } : {}), ...(port !== undefined ? { port } : {}) },
      replicas,
      tokenizer: { ...(v.tokenizer ? { model: v.tokenizer } : {}), remote: v["remote-tokenizer"] ?? false },
      disaggregation: { enabled: (v.prefill ?? []).length > 0, ...(threshold !== undefined ? { uncachedTokensThreshold: threshold } : {}) },
    },
    "command line",
  );
}

export async function main(argv: string[]): Promise<number> {
  let v;
  try {
    v = parseArgs({ args: argv, options: OPTIONS, strict: true, allowPositionals: false }).values;
  } catch (e) {
    process.stderr.write(`torchts router: ${(e as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (v.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  let cfg: RouterConfig;
  try {
    cfg = build(v);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    process.stderr.write(`torchts router: ${e.message}\n`);
    return 2;
  }
  if (v["print-config"]) {
    process.stdout.write(stringify(cfg));
    return 0;
  }
  const router = await createRouter(cfg);
  const address = await router.listen();
  const healthy = router.pool.replicas.filter((r) => r.healthy).length;
  process.stdout.write(`torchts router: ${healthy}/${cfg.replicas.length} replicas healthy, listening on ${address}\n`);
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (sig: string) => {
      if (stopping) return;
      stopping = true;
      process.stdout.write(`torchts router: ${sig}: draining\n`);
      router.close().then(
        () => resolve(0),
        (e: Error) => {
          process.stderr.write(`torchts router: ${e.message}\n`);
          resolve(1);
        },
      );
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
  });
}
