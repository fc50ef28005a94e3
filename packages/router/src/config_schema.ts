// JSON schema of the router's configuration (apiVersion torchts.router/v1). ajv fills in the defaults;
// additionalProperties: false everywhere, so misspelt keys are reported instead of ignored.
const int = (minimum: number, def?: number, maximum?: number) => ({ type: "integer", minimum, ...(maximum !== undefined ? { maximum } : {}), ...(def !== undefined ? { default: def } : {}) });
const num = (minimum: number, maximum: number, def?: number) => ({ type: "number", minimum, maximum, ...(def !== undefined ? { default: def } : {}) });
const obj = (properties: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ type: "object", additionalProperties: false, properties, default: {}, ...extra });
const header = (def: string) => ({ type: "string", pattern: "^[A-Za-z0-9-]+$", default: def });

const SCORER = {
  type: "object",
  additionalProperties: false,
  required: ["type"],
  properties: {
    type: { enum: ["prefix-cache", "precise-prefix-cache", "no-hit-lru", "queue", "kv-cache-utilization", "in-flight", "session-affinity"] },
    weight: num(0, 1000, 1),
    maxLoadGap: int(1, 8),
    blockChars: int(1, 64, 1 << 20),
    capacityPerReplica: int(1, 100_000),
    speculativeTtlMs: int(0, 2000),
    coldThreshold: num(0, 1),
  },
};

const FILTER = {
  type: "object",
  additionalProperties: false,
  required: ["type"],
  properties: {
    type: { enum: ["saturation", "prefix-affinity"] },
    threshold: num(0, 1),
  },
};

export const CONFIG_SCHEMA = {
  type: "object",
  additionalProperties: false,
  required: ["apiVersion"],
  properties: {
    apiVersion: { const: "torchts.router/v1" },
    kind: { const: "RouterConfig", default: "RouterConfig" },
    server: obj({ host: { type: "string", minLength: 1, default: "127.0.0.1" }, port: int(0, 8000, 65535), bodyLimit: int(1, 4 * 1024 * 1024) }),
    replicas: {
      type: "array",
      default: [],
      items: {
        type: "object",
        additionalProperties: false,
        required: ["url"],
        properties: {
          url: { type: "string", minLength: 1 },
          name: { type: "string", pattern: "^[A-Za-z0-9._:-]+$", maxLength: 128 },
          role: { enum: ["prefill", "decode", "both"], default: "both" },
        },
      },
    },
    // replicas found by DNS (a Kubernetes headless Service: one address per ready pod), refreshed
    discovery: {
      type: "array",
      default: [],
      items: {
        type: "object",
        additionalProperties: false,
        required: ["dns", "port"],
        properties: {
          dns: { type: "string", minLength: 1, maxLength: 253 },
          port: int(1, undefined, 65535),
          role: { enum: ["prefill", "decode", "both"], default: "both" },
          family: { enum: [0, 4, 6], default: 0 },
          refreshMs: int(100, 5000),
        },
      },
    },
    tokenizer: obj({ model: { type: "string", minLength: 1 }, remote: { type: "boolean", default: false } }),
    // GIE's model-server protocol: metrics at most 100 ms old drive the scorers; older counts as saturated
    health: obj({ scrapeIntervalMs: int(10, 100, 100), staleAfterMs: int(10, 200), deadAfterMs: int(100, 5000) }),
    kvEvents: obj({ enabled: { type: "boolean", default: true }, reconnectMs: int(10, 500) }),
    scheduling: obj({
      filters: { type: "array", items: FILTER, default: [{ type: "saturation" }] },
      scorers: { type: "array", minItems: 1, items: SCORER },
      picker: obj({ type: { enum: ["max-score", "weighted-random", "round-robin"], default: "max-score" } }),
    }),
    disaggregation: obj({ enabled: { type: "boolean", default: false }, uncachedTokensThreshold: int(0, 256), prefillTimeoutMs: int(1, 60_000) }),
    flowControl: obj({
      maxQueued: int(0, 1024),
      queueTimeoutMs: int(1, 30_000),
      maxInFlightPerReplica: int(1, 64),
      // GIE's saturation detector: a replica with this many waiting requests or this KV usage is saturated
      saturation: obj({ queueDepth: int(1, 5), kvUsage: num(0, 1, 0.8) }),
      priorityHeader: header("x-torchts-priority"),
      fairnessHeader: header("x-gateway-inference-fairness-id"),
    }),
    proxy: obj({ retries: int(0, 2, 10), requestTimeoutMs: int(1, 600_000) }),
    session: obj({ header: header("x-session-token") }),
  },
};
