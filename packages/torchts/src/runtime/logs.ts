// TORCHTS_LOGS=graph,schedule,kernels,cache,recompiles: print what the runtime decides.
export type LogKind = "graph" | "schedule" | "kernels" | "cache" | "recompiles";
const KINDS: readonly LogKind[] = ["graph", "schedule", "kernels", "cache", "recompiles"];

function parse(v: string | undefined): Set<LogKind> {
  const out = new Set<LogKind>();
  for (const k of (v ?? "").split(",").map((x) => x.trim()).filter(Boolean)) {
    if (k === "all") KINDS.forEach((x) => out.add(x));
    else if ((KINDS as readonly string[]).includes(k)) out.add(k as LogKind);
    else throw new Error(`TORCHTS_LOGS: unknown log '${k}' (expected a comma-separated list of ${KINDS.join(", ")}, or all)`);
  }
  return out;
}

const g = globalThis as { process?: { env?: Record<string, string | undefined> } };
let enabled = parse(g.process?.env?.TORCHTS_LOGS);
let sink: (line: string) => void = (l) => console.error(l);

export function logOn(k: LogKind): boolean {
  return enabled.has(k);
}
export function log(k: LogKind, msg: string | (() => string)): void {
  if (enabled.has(k)) sink(`[torchts:${k}] ${typeof msg === "function" ? msg() : msg}`);
}
/** Turn logs on programmatically (same names as TORCHTS_LOGS); returns a restore function. Tests pass a sink. */
export function setLogs(spec: string, to?: (line: string) => void): () => void {
  const prev = enabled;
  const prevSink = sink;
  enabled = parse(spec);
  if (to) sink = to;
  return () => {
    enabled = prev;
    sink = prevSink;
  };
}
