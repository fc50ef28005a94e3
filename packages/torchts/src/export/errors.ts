// Errors of torch.export and the converters: each names the op and where the user's code called it.

export class ExportError extends Error {
  override name = "ExportError";
}

// frames inside the op machinery are never the user's call site (model code inside torchts,
// such as the transformers models or nn layers, is: it is what called the op)
const LIBRARY_FRAME = /torchts[\\/](src|dist)[\\/](export|ops|runtime|autograd|ir|device|compile)[\\/]|torchts[\\/](src|dist)[\\/](tensor|methods|nn[\\/]functional[^\\/]*|nn[\\/]module)\.[jt]s|nn[\\/]functional[\\/]/;

function frames(): string[] {
  const stack = new Error().stack?.split("\n").slice(1) ?? [];
  return stack.map((l) => l.trim().replace(/^at /, "")).filter((l) => !l.includes("node:internal") && !l.includes("(<anonymous>)"));
}

/**
 * The user's call site of the op being traced: the first frame outside torchts's op machinery,
 * and, when that frame is itself inside torchts (a built-in model), also the first frame outside
 * torchts entirely.
 */
export function callSite(): string {
  const fs = frames();
  const near = fs.find((l) => !LIBRARY_FRAME.test(l));
  const far = fs.find((l) => !/torchts[\\/](src|dist)[\\/]/.test(l));
  if (!near) return far ?? "<unknown>";
  if (far && far !== near && /torchts[\\/](src|dist)[\\/]/.test(near)) return `${near} (called from ${far})`;
  return near;
}
