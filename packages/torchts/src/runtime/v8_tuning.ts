// V8 settings torchts changes for the whole process, once, when it is imported.
//
// Allocation-site pretenuring off. V8 watches where objects are allocated (object and array
// literals) and, when most objects of a site survive a young-generation collection (a scavenge),
// allocates that site's objects straight in the old generation from then on. A lazy graph
// (fused eager) keeps every node it records alive until the step's flush, so a scavenge in the
// middle of a step finds most of them alive and V8 pretenures the sites that make nodes, views
// and pending records. From then on each step's records are born old, die old, and, until the
// next full collection, keep alive every young object they point to (the scavenger treats any
// pointer from the old generation as alive): those survive, look long-lived too, and the trap
// closes. Measured on the small training step (bench/RESULTS.md, session 17): 1.7 MB promoted
// and 3.2 ms per scavenge with pretenuring, 0.16 MB and 0.8 ms without. Whether it happens
// depends on when the first scavenges fall, so with it on a run may or may not fall in.
// TORCHTS_V8_PRETENURING=1 keeps V8's default. Nothing happens outside Node (no node:v8).
export interface NodeProcess {
  env?: Record<string, string | undefined>;
  getBuiltinModule?: (name: string) => unknown;
}

/** Applies the settings to the process `p` (the current one at import); returns the V8 flags set. */
export function tuneV8(p: NodeProcess | undefined): string[] {
  if (!p || p.env?.TORCHTS_V8_PRETENURING === "1") return [];
  try {
    const v8 = p.getBuiltinModule?.("node:v8") as { setFlagsFromString(f: string): void } | undefined;
    if (!v8) return [];
    v8.setFlagsFromString("--no-allocation-site-pretenuring");
    return ["--no-allocation-site-pretenuring"];
  } catch {
    return []; // a runtime without V8 flags (Deno, Bun, a locked-down embedder): its own defaults stay
  }
}
tuneV8((globalThis as { process?: NodeProcess }).process);
