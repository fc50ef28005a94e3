// The on-disk tier of the compile cache: generated kernel sources keyed by the canonical graph
// key (structure, shapes, strides, dtypes, device) and the torchts version, so a new version
// never reads stale entries and a second process running the same program generates no code.
// Writes are atomic (temp file + rename), so concurrent processes never see a partial entry;
// an unreadable or mismatching entry is reported, ignored and overwritten, never trusted.
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { log } from "./logs.js";

/** Bump when generated code changes meaning. */
export const TORCHTS_VERSION = "0.1.0+fused3";

const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env ?? {};
const stats = { diskHits: 0, diskMisses: 0, diskWrites: 0, corrupt: 0 };
let dirOverride: string | null = null;
let cacheOnlyOverride: boolean | null = null;

export function cacheDir(): string {
  if (dirOverride) return dirOverride;
  if (env.TORCHTS_CACHE_DIR) return env.TORCHTS_CACHE_DIR;
  const base = env.XDG_CACHE_HOME || join(homedir(), ".cache");
  return join(base, "torchts");
}
export function cacheOnly(): boolean {
  return cacheOnlyOverride ?? env.TORCHTS_CACHE_ONLY === "1";
}
/** Tests and tools: point the disk cache elsewhere / toggle cache-only (null restores the environment). */
export function configureDiskCache(o: { dir?: string | null; cacheOnly?: boolean | null }): void {
  if (o.dir !== undefined) dirOverride = o.dir;
  if (o.cacheOnly !== undefined) cacheOnlyOverride = o.cacheOnly;
}
export function diskCacheStats(): typeof stats {
  return { ...stats };
}

/** Browser bundles stub node:crypto, node:fs and node:os out: there is no disk tier there. */
const diskAvailable = typeof createHash === "function" && typeof readFileSync === "function" && typeof homedir === "function";

function fileFor(key: string): string {
  const h = createHash("sha256").update(TORCHTS_VERSION).update("\0").update(key).digest("hex");
  return join(cacheDir(), h.slice(0, 2), `${h}.json`);
}

/** The cached source for key, or null (missing, from another version, or corrupt). */
export function diskGet(key: string): string | null {
  if (!diskAvailable) return null;
  const f = fileFor(key);
  let text: string;
  try {
    text = readFileSync(f, "utf8");
  } catch {
    stats.diskMisses++;
    log("cache", `disk miss ${f}`);
    return null;
  }
  try {
    const e = JSON.parse(text) as { version?: string; key?: string; source?: string };
    if (e.version !== TORCHTS_VERSION || e.key !== key || typeof e.source !== "string") throw new Error("entry does not match its key");
    stats.diskHits++;
    log("cache", `disk hit ${f}`);
    return e.source;
  } catch (err) {
    stats.corrupt++;
    stats.diskMisses++;
    log("cache", `disk entry ${f} is corrupt (${(err as Error).message}); recompiling`);
    return null;
  }
}

export function diskPut(key: string, source: string): void {
  if (!diskAvailable) return;
  const f = fileFor(key);
  try {
    mkdirSync(join(f, ".."), { recursive: true });
    const tmp = `${f}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
    writeFileSync(tmp, JSON.stringify({ version: TORCHTS_VERSION, key, source }));
    renameSync(tmp, f); // atomic on POSIX: readers see the old entry or the whole new one
    stats.diskWrites++;
    log("cache", `disk write ${f}`);
  } catch (err) {
    log("cache", `disk write failed for ${f}: ${(err as Error).message}`);
  }
}
