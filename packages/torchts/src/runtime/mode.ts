// Eager modes. debug: run, synchronize and check every op. strict: compile one executable
// per op and enqueue it. fused: record ops lazily as IR and run them when a value is needed.
export type EagerMode = "debug" | "strict" | "fused";

function fromEnv(): EagerMode {
  const g = globalThis as { process?: { env?: Record<string, string | undefined> } };
  const v = g.process?.env?.TORCHTS_EAGER_MODE;
  if (v === undefined || v === "") return "strict";
  if (v === "debug" || v === "strict" || v === "fused") return v;
  throw new Error(`TORCHTS_EAGER_MODE must be one of debug, strict, fused (got '${v}')`);
}

let mode: EagerMode = fromEnv();
let anomaly = false;

export function getEagerMode(): EagerMode {
  return mode;
}

export function setEagerMode(m: EagerMode): void {
  if (m !== "debug" && m !== "strict" && m !== "fused")
    throw new TypeError(`setEagerMode: expected 'debug' | 'strict' | 'fused', got '${String(m)}'`);
  mode = m;
}

/** Run fn with the eager mode set, restoring the previous mode afterwards (also for async fn). */
export function withEagerMode<T>(m: EagerMode, fn: () => T): T {
  const prev = mode;
  setEagerMode(m);
  let async = false;
  try {
    const r = fn();
    if (r instanceof Promise) {
      async = true;
      return r.finally(() => (mode = prev)) as T;
    }
    return r;
  } finally {
    if (!async) mode = prev;
  }
}

export function setDetectAnomaly(on: boolean): void {
  anomaly = on;
}
export function isAnomalyEnabled(): boolean {
  return anomaly;
}

// The public op currently executing, so errors from deep inside name what the user called.
let currentOp: string | null = null;
export function currentOpName(): string | null {
  return currentOp;
}
/** Enter a public op (the binder's wrapper); returns whether this call is the outermost op. */
export function enterOp(name: string): boolean {
  if (currentOp !== null) return false;
  currentOp = name;
  return true;
}
export function exitOp(): void {
  currentOp = null;
}
export function withOp<T>(name: string, fn: () => T): T {
  if (currentOp !== null) return fn();
  currentOp = name;
  try {
    return fn();
  } finally {
    currentOp = null;
  }
}

/** First stack frame outside torchts: the user's call site, for debug-mode reports. */
export function userCallSite(): string {
  const stack = new Error().stack?.split("\n").slice(1) ?? [];
  for (const l of stack) {
    if (/torchts[\\/](src|dist)[\\/]/.test(l) || l.includes("node:internal") || l.includes("(<anonymous>)")) continue;
    return l.trim().replace(/^at /, "");
  }
  return "<unknown>";
}
