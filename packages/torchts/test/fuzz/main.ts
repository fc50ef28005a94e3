// One fuzz run with the process-level checks: uncaught exceptions and unhandled rejections are
// counted from the start, and after a forced GC (release callbacks run) there must be none, and
// torch.memory.stats() must report no release errors.
import * as torch from "../../src/index.js";
import { runFuzz, type FuzzOptions, type FuzzReport } from "./fuzzer.js";

export async function fuzzMain(o: Omit<FuzzOptions, "log" | "otherDevice">, print = console.log): Promise<number> {
  let uncaught = 0;
  const onErr = (e: unknown) => {
    uncaught++;
    print(`UNCAUGHT: ${(e as Error)?.stack ?? e}`);
  };
  process.on("uncaughtException", onErr);
  process.on("unhandledRejection", onErr);
  let other: string | null = null;
  try {
    if (await torch.webgpu.isAvailable()) {
      await torch.webgpu.init();
      other = "webgpu";
    }
  } catch {
    other = null;
  }
  const t0 = Date.now();
  let rep: FuzzReport;
  try {
    rep = await runFuzz({ ...o, otherDevice: other, log: print });
  } finally {
    // release callbacks run after a collection, between tasks
    for (let i = 0; i < 3; i++) {
      (globalThis as { gc?: () => void }).gc?.();
      await new Promise((r) => setTimeout(r, 20));
    }
    process.off("uncaughtException", onErr);
    process.off("unhandledRejection", onErr);
  }
  const stats = torch.memory.stats() as unknown as Record<string, number>;
  const releaseErrors = stats.releaseErrors ?? 0;
  print(
    `fuzz: seed ${o.seed}${o.long ? " (long)" : ""}: ${rep.ops} ops, ${rep.calls} calls ` +
      `(${rep.validCalls} valid in every form and mode, ${rep.compiled} compiled, ${rep.compileGraphBreaks} not compilable (host reads), ` +
      `${rep.mutatedCalls} mutated: ${rep.mutatedThrew} threw naming the op, ${rep.mutatedSucceeded} succeeded; ` +
      `${rep.onDevice} run on ${other ?? "no second device"} and compared with cpu, ${rep.deviceUnsupported.length} rejected there); ` +
      `mixed-device mutations on ${other ?? "(no second device)"}; ${rep.failures.length} failures, ${uncaught} uncaught, ` +
      `${releaseErrors} release errors; ${((Date.now() - t0) / 1000).toFixed(1)} s`,
  );
  for (const f of rep.failures) print(`  FAIL ${f}`);
  if (o.long || process.env.TORCHTS_FUZZ_VERBOSE) for (const u of rep.deviceUnsupported) print(`  not on ${other}: ${u}`);
  return rep.failures.length || uncaught || releaseErrors ? 1 : 0;
}
