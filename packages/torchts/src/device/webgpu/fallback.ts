// torch.setCpuFallback(true): a primitive the webgpu device lacks runs on cpu instead of raising,
// with a one-time warning per op. JS cannot read GPU memory synchronously, so the fallback is
// asynchronous inside the device: the inputs are copied to the host, the cpu kernel runs when they
// arrive, its result is uploaded, and every submit/upload recorded meanwhile waits behind it, so
// the GPU sees the same order as the program.
let enabled = false;
const warned = new Set<string>();

export class NotImplementedError extends Error {
  override name = "NotImplementedError";
}

export function setCpuFallback(on: boolean): void {
  enabled = on;
}

export function cpuFallbackEnabled(): boolean {
  return enabled;
}

export function warnFallback(op: string): void {
  if (warned.has(op)) return;
  warned.add(op);
  console.warn(
    `UserWarning: The operator '${op}' is not currently supported on the webgpu device, and is falling back to run on the cpu. This may have performance implications.`,
  );
}
