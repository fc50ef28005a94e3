// The router's configuration: a versioned YAML document (`apiVersion: torchts.router/v1`), checked with
// ajv against the JSON schema in config_schema.ts (defaults filled in, unknown keys refused so a typo is
// an error, not a silently ignored setting). Errors name the path and, for YAML input, the line.
import { readFileSync } from "node:fs";
import { Ajv, type ErrorObject } from "ajv";
import { LineCounter, isNode, parseDocument } from "yaml";
import { CONFIG_SCHEMA } from "./config_schema.js";

export type Role = "prefill" | "decode" | "both";
export type ScorerType = "prefix-cache" | "precise-prefix-cache" | "no-hit-lru" | "queue" | "kv-cache-utilization" | "in-flight" | "session-affinity";
export type FilterType = "saturation" | "prefix-affinity";
export type PickerType = "max-score" | "weighted-random" | "round-robin";

export interface ReplicaConfig {
  url: string;
  /** Names the replica in metrics and session tokens (default host:port). */
  name?: string;
  role: Role;
}

export interface ScorerConfig {
  type: ScorerType;
  weight: number;
  /** prefix scorers: a replica loaded this many requests above the least loaded candidate gets no prefix score (hot-spot guard; so does one with requests waiting beyond a full batch, max_num_seqs, while another is idle). */
  maxLoadGap?: number;
  /** prefix-cache: characters per block of the approximate index, and blocks remembered per replica. */
  blockChars?: number;
  capacityPerReplica?: number;
  /** precise-prefix-cache: how long a routed prompt counts as cached before its events arrive (ms, 0 = never). */
  speculativeTtlMs?: number;
  /** no-hit-lru: a prompt whose best prefix fraction on any candidate is below this counts as cold. */
  coldThreshold?: number;
}

export interface FilterConfig {
  type: FilterType;
  /** prefix-affinity: keep only replicas whose prefix score is at least this, when any is. */
  threshold?: number;
}

export interface RouterConfig {
  apiVersion: "torchts.router/v1";
  kind: "RouterConfig";
  server: { host: string; port: number; bodyLimit: number };
  replicas: ReplicaConfig[];
  /** Replicas found by DNS: every address `dns` resolves to, on `port`, re-resolved every refreshMs. */
  discovery: { dns: string; port: number; role: Role; family: 0 | 4 | 6; refreshMs: number }[];
  /** Token ids for the precise prefix scorer and the P/D decider: a local model folder, or POST /tokenize on a replica. */
  tokenizer: { model?: string; remote: boolean };
  health: { scrapeIntervalMs: number; staleAfterMs: number; deadAfterMs: number };
  kvEvents: { enabled: boolean; reconnectMs: number };
  scheduling: { filters: FilterConfig[]; scorers: ScorerConfig[]; picker: { type: PickerType } };
  disaggregation: { enabled: boolean; uncachedTokensThreshold: number; prefillTimeoutMs: number };
  flowControl: {
    maxQueued: number;
    queueTimeoutMs: number;
    maxInFlightPerReplica: number;
    saturation: { queueDepth: number; kvUsage: number };
    priorityHeader: string;
    fairnessHeader: string;
  };
  proxy: { retries: number; requestTimeoutMs: number };
  session: { header: string };
}

export class ConfigError extends Error {}

const ajv = new Ajv({ allErrors: true, useDefaults: true, strict: false });
const validate = ajv.compile(CONFIG_SCHEMA);

function describe(e: ErrorObject): string {
  const p = e.params as Record<string, unknown>;
  if (e.keyword === "additionalProperties") return `unknown key '${String(p.additionalProperty)}'`;
  if (e.keyword === "enum") return `must be one of ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(", ")}`;
  if (e.keyword === "const") return `must be ${JSON.stringify(p.allowedValue)}`;
  if (e.keyword === "required") return `missing required key '${String(p.missingProperty)}'`;
  return e.message ?? e.keyword;
}

/**
 * Validate a parsed configuration (a plain object, e.g. from YAML or built by the CLI) and fill in its
 * defaults. `where(path)` may give a location for a JSON pointer (a YAML line). Throws ConfigError
 * listing every problem.
 */
export function validateConfig(raw: unknown, source = "config", where: (path: string) => string = () => ""): RouterConfig {
  const cfg = structuredClone(raw ?? {}) as Record<string, unknown>;
  if (typeof cfg !== "object" || Array.isArray(cfg)) throw new ConfigError(`${source}: the document must be a mapping (apiVersion, kind, replicas, ...)`);
  if (cfg.apiVersion !== "torchts.router/v1")
    throw new ConfigError(`${source}${where("/apiVersion")}: apiVersion must be "torchts.router/v1" (got ${JSON.stringify(cfg.apiVersion ?? null)})`);
  if (!validate(cfg)) {
    // anyOf/oneOf wrappers repeat their branches' errors: keep the specific ones
    const errs = (validate.errors ?? []).filter((e) => e.keyword !== "if");
    const lines = [...new Set(errs.map((e) => `  ${e.instancePath || "/"}${where(e.instancePath)}: ${describe(e)}`))];
    throw new ConfigError(`${source}: invalid router configuration:\n${lines.join("\n")}`);
  }
  const c = cfg as unknown as RouterConfig;
  if (!c.scheduling.scorers) c.scheduling.scorers = defaultScorers(Boolean(c.tokenizer.model || c.tokenizer.remote) && c.kvEvents.enabled);
  const problems: string[] = [];
  const seen = new Set<string>();
  c.replicas.forEach((r, i) => {
    let u: URL;
    try {
      u = new URL(r.url);
    } catch {
      problems.push(`/replicas/${i}/url${where(`/replicas/${i}/url`)}: not a URL: '${r.url}'`);
      return;
    }
    if (u.protocol !== "http:") problems.push(`/replicas/${i}/url${where(`/replicas/${i}/url`)}: only http:// replicas are supported (got ${u.protocol})`);
    if (u.pathname !== "/" || u.search) problems.push(`/replicas/${i}/url${where(`/replicas/${i}/url`)}: give the server's root (http://host:port), not a path`);
    const id = r.name ?? u.host;
    if (seen.has(id)) problems.push(`/replicas/${i}${where(`/replicas/${i}`)}: replica '${id}' is listed twice`);
    seen.add(id);
  });
  if (!c.replicas.length && !c.discovery.length) problems.push(`/replicas: list replicas, or find them with discovery (dns)`);
  else if (!c.replicas.some((r) => r.role !== "prefill") && !c.discovery.some((d) => d.role !== "prefill"))
    problems.push(`/replicas: at least one replica must decode (role decode or both)`);
  if (c.disaggregation.enabled && !c.replicas.some((r) => r.role !== "decode") && !c.discovery.some((d) => d.role !== "decode"))
    problems.push(`/disaggregation${where("/disaggregation")}: enabled, but no replica has role prefill or both`);
  const needsTokens = c.scheduling.scorers.some((s) => s.type === "precise-prefix-cache");
  if (needsTokens && !c.tokenizer.model && !c.tokenizer.remote)
    problems.push(`/scheduling/scorers${where("/scheduling/scorers")}: precise-prefix-cache needs token ids: set tokenizer.model (a model folder) or tokenizer.remote: true`);
  if (needsTokens && !c.kvEvents.enabled) problems.push(`/kvEvents${where("/kvEvents")}: precise-prefix-cache needs kvEvents.enabled: true`);
  if (c.health.staleAfterMs < c.health.scrapeIntervalMs)
    problems.push(`/health/staleAfterMs${where("/health/staleAfterMs")}: must be at least scrapeIntervalMs (${c.health.scrapeIntervalMs})`);
  if (problems.length) throw new ConfigError(`${source}: invalid router configuration:\n${problems.map((p) => `  ${p}`).join("\n")}`);
  return c;
}

/** Parse and validate YAML text; errors carry the file name and line numbers. */
export function parseConfig(text: string, source = "router.yaml"): RouterConfig {
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length) throw new ConfigError(`${source}: YAML error: ${doc.errors.map((e) => e.message).join("\n")}`);
  const where = (pointer: string): string => {
    const path = pointer.split("/").slice(1).map((k) => (/^\d+$/.test(k) ? Number(k) : k.replace(/~1/g, "/").replace(/~0/g, "~")));
    // the deepest node of the path that exists
    for (let n = path.length; n >= 0; n--) {
      const node = n === 0 ? doc.contents : doc.getIn(path.slice(0, n), true);
      if (isNode(node) && node.range) return ` (line ${lc.linePos(node.range[0]).line})`;
    }
    return "";
  };
  return validateConfig(doc.toJS(), source, where);
}

export function loadConfig(file: string): RouterConfig {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    throw new ConfigError(`${file}: ${(e as Error).message}`);
  }
  return parseConfig(text, file);
}

/** The scorers a config gets when it names none (GIE's default profile, plus precise scoring when token ids are available). */
export function defaultScorers(precise: boolean): ScorerConfig[] {
  return [
    ...(precise ? [{ type: "precise-prefix-cache" as const, weight: 3 }] : []),
    { type: "prefix-cache", weight: 2 },
    { type: "no-hit-lru", weight: 2 },
    { type: "queue", weight: 1 },
    { type: "kv-cache-utilization", weight: 1 },
    { type: "in-flight", weight: 1 },
    { type: "session-affinity", weight: 10 },
  ];
}
