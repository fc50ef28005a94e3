// Waiting for a runner process to go idle after its turn. PyTorch's OpenBLAS threads keep spinning
// for ~0.1 s after their last product (measured: 0.10-0.11 CPU-seconds burnt during 0.2 s of
// sleep after work, at 1 and at 2 threads), so the runner whose turn comes next would share the
// 2 cores with them: the peer's leftover work would be charged to another runner's steps. Before
// the next turn starts, the process's CPU time (all its threads, /proc/<pid>/stat) must stop
// growing. Linux only; elsewhere (no /proc) it returns at once.
import { readFileSync } from "node:fs";

const POLL_MS = 10; // the clock tick is 10 ms (USER_HZ 100): finer polls see nothing
const QUIET_POLLS = 3; // consecutive polls with no CPU time charged
const MAX_MS = 1000;

/** utime + stime of a process, in clock ticks; null when it cannot be read. */
function cpuTicks(pid: number): number | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8");
    // fields after the command name (which may hold spaces) start after the last ')'
    const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
    return Number(f[11]) + Number(f[12]); // fields 14 and 15 of proc(5): utime, stime
  } catch {
    return null;
  }
}

/**
 * Resolves once process `pid` has been charged no CPU time for QUIET_POLLS polls in a row (or
 * after MAX_MS). Returns the ticks (10 ms each) it was charged while this waited.
 */
export async function untilQuiet(pid: number | undefined): Promise<number> {
  if (pid === undefined) return 0;
  const first = cpuTicks(pid);
  if (first === null) return 0;
  let last = first, still = 0;
  const t0 = performance.now();
  while (still < QUIET_POLLS && performance.now() - t0 < MAX_MS) {
    await new Promise((r) => setTimeout(r, POLL_MS));
    const now = cpuTicks(pid);
    if (now === null) break;
    still = now === last ? still + 1 : 0;
    last = now;
  }
  return last - first;
}
