// Allocation errors. Every allocator (the cpu wasm arena and host arrays, the webgpu buffer
// pool, storage accounting) checks a size before it changes any state: a size that is not a
// finite non-negative integer is a RangeError, one past what the memory can hold an
// OutOfMemoryError. Both name the public op being run, so a bad call fails where it was made
// and leaves nothing behind (a NaN size once made the arena's bump pointer NaN: every later
// result in the process was wrong).
import { currentOpName } from "./mode.js";

/** torch.OutOfMemoryError (PyTorch 2's torch.OutOfMemoryError): an allocation past what a device can hold. */
export class OutOfMemoryError extends Error {
  override name = "OutOfMemoryError";
}

/** "op(): " for the public op being run, or "" outside one. */
export function opPrefix(): string {
  const op = currentOpName();
  return op === null ? "" : `${op}(): `;
}

function show(v: unknown): string {
  if (typeof v === "number") return Object.is(v, -0) ? "-0" : String(v);
  if (typeof v === "bigint") return `${v}n`;
  if (typeof v === "string") return JSON.stringify(v);
  try {
    return String(v);
  } catch {
    return typeof v;
  }
}

/** A finite non-negative integer (the only valid element or byte count). */
export function isSize(n: unknown): n is number {
  return typeof n === "number" && n >= 0 && Number.isInteger(n);
}

/**
 * The error for a size an allocator refused: `n` counts `unit` ("elements" or "bytes") of
 * `bytesPer` bytes each; `limit` says what the most is that the allocator can hold.
 */
export function sizeError(where: string, n: unknown, unit: "elements" | "bytes", bytesPer: number, limit: string): Error {
  if (!isSize(n))
    return new RangeError(
      `${opPrefix()}invalid allocation size: ${where} was asked for ${show(n)} ${unit} (a size must be a finite non-negative integer)`,
    );
  return outOfMemory(n * bytesPer, `${where}: ${limit}`);
}

/** "op(): OutOfMemoryError: tried to allocate N bytes (detail)". */
export function outOfMemory(bytes: number, detail: string): OutOfMemoryError {
  return new OutOfMemoryError(`${opPrefix()}OutOfMemoryError: tried to allocate ${bytes} bytes (${detail})`);
}

/** Bytes as a short human-readable amount. */
export function fmtBytes(b: number): string {
  if (b >= 2 ** 40) return `${(b / 2 ** 40).toFixed(2)} TiB`;
  if (b >= 2 ** 30) return `${(b / 2 ** 30).toFixed(2)} GiB`;
  if (b >= 2 ** 20) return `${(b / 2 ** 20).toFixed(2)} MiB`;
  if (b >= 2 ** 10) return `${(b / 2 ** 10).toFixed(1)} KiB`;
  return `${b} bytes`;
}
