// The failure report of a worker group, in torchelastic's ChildFailedError layout (what torchrun
// prints and what tools scraping job logs expect): a title, the other failures, and the root cause
// (the first failure observed) with time, host, rank, exit code, pid, error file and traceback.
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { constants } from "node:os";

export interface ProcessFailure {
  rank: number;
  localRank: number;
  pid: number;
  /** The exit code, or minus the signal number (Python's convention, which torchelastic prints). */
  exitcode: number;
  errorFile: string;
  /** When it was observed (ms since the epoch). */
  time: number;
}

const SIGNALS = Object.entries(constants.signals) as [string, number][];

export function signalName(n: number): string {
  return SIGNALS.find(([, v]) => v === n)?.[0] ?? `signal ${n}`;
}

/** The error file a worker wrote (elastic_record.ts), as torchelastic reads it: its traceback or message. */
function errorFileMessage(path: string): { message: string; time: number } | null {
  let data: { message?: unknown; timestamp?: unknown };
  try {
    data = JSON.parse(readFileSync(path, "utf8")) as typeof data;
  } catch {
    return null;
  }
  const m = data.message;
  if (typeof m === "string") return { message: m, time: Number(data.timestamp ?? 0) * 1000 };
  if (m && typeof m === "object") {
    const o = m as { message?: unknown; extraInfo?: { py_callstack?: unknown; timestamp?: unknown } };
    const text = o.extraInfo?.py_callstack ?? o.message ?? "<N/A>";
    return { message: String(text), time: Number(o.extraInfo?.timestamp ?? 0) * 1000 };
  }
  return null;
}

function isoSeconds(ms: number): string {
  const d = new Date(ms);
  const p = (x: number) => String(x).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}_${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

function formatOne(idx: number, f: ProcessFailure): string {
  const fromFile = errorFileMessage(f.errorFile);
  let message: string;
  if (fromFile) message = fromFile.message.replace(/\n/g, "\n  ");
  else if (f.exitcode < 0) message = `Signal ${-f.exitcode} (${signalName(-f.exitcode)}) received by PID ${f.pid}`;
  else message = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html";
  return [
    `[${idx}]:`,
    `  time      : ${isoSeconds(fromFile?.time || f.time)}`,
    `  host      : ${hostname()}`,
    `  rank      : ${f.rank} (local_rank: ${f.localRank})`,
    `  exitcode  : ${f.exitcode} (pid: ${f.pid})`,
    `  error_file: ${fromFile ? f.errorFile : "<N/A>"}`,
    `  traceback : ${message}`,
  ].join("\n");
}

/** A worker whose collective failed because a peer went away: a consequence, never the root cause. */
function peerGone(f: ProcessFailure): boolean {
  return /closed its connection|its process exited or was killed/.test(errorFileMessage(f.errorFile)?.message ?? "");
}

/**
 * The report for `failures` of `name` (the script). The root cause is the first observed failure, except
 * that workers which only failed because a peer exited go after the others (two failures in the same
 * second are often observed in either order).
 */
export function formatChildFailed(name: string, failures: ProcessFailure[]): string {
  const title = `${name} FAILED`;
  const ordered = [...failures.filter((f) => !peerGone(f)), ...failures.filter(peerGone)];
  const parts = ordered.map((f, i) => formatOne(i, f));
  const width = Math.min(60, Math.max(title.length, ...parts.flatMap((p) => p.split("\n").map((l) => l.length))));
  const others = parts.slice(1);
  return [
    "",
    "=".repeat(width),
    title,
    "-".repeat(width),
    "Failures:",
    others.length ? others.join("\n") : "  <NO_OTHER_FAILURES>",
    "-".repeat(width),
    "Root Cause (first observed failure):",
    parts[0]!,
    "=".repeat(width),
  ].join("\n");
}
