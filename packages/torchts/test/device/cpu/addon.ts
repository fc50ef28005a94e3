// The native bridge as the native_* tests load it themselves (to call its pool functions with
// hand-made parameter blocks), or null where it was not built; and whether this process runs a
// kernel of it (never with the JS backend forced).
import { createRequire } from "node:module";

export type BridgeAddon = { kernels(): string; vnni(): boolean } & Record<string, (...a: unknown[]) => unknown>;

export const addon: BridgeAddon | null = (() => {
  try {
    return createRequire(import.meta.url)("../../../build/native/torchts_blas.node") as BridgeAddon;
  } catch {
    return null;
  }
})();

/** Whether the bridge runs `kernel` ("avx512", "avx2", "openblas") here; with no argument, whether it runs any. */
export function hasKernel(kernel?: string): boolean {
  if (process.env.TORCHTS_CPU_BACKEND === "js" || addon === null) return false;
  const ks = addon
    .kernels()
    .split(",")
    .filter((k) => k !== "");
  return kernel === undefined ? ks.length > 0 : ks.includes(kernel);
}
