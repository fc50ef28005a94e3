// Grad-mode scopes: torch.noGrad, torch.enableGrad, torch.inferenceMode.
let enabled = true;
let inference = false;

export function isGradEnabled(): boolean {
  return enabled;
}
export function setGradEnabled(on: boolean): void {
  enabled = on;
}
export function isInferenceMode(): boolean {
  return inference;
}

function scoped<T>(set: () => () => void, fn: () => T): T {
  const restore = set();
  let async = false;
  try {
    const r = fn();
    if (r instanceof Promise) {
      async = true;
      return r.finally(restore) as T;
    }
    return r;
  } finally {
    if (!async) restore();
  }
}

export function noGrad<T>(fn: () => T): T {
  return scoped(() => {
    const p = enabled;
    enabled = false;
    return () => (enabled = p);
  }, fn);
}

export function enableGrad<T>(fn: () => T): T {
  return scoped(() => {
    const p = enabled;
    enabled = true;
    return () => (enabled = p);
  }, fn);
}

export function inferenceMode<T>(fn: () => T): T {
  return scoped(() => {
    const p = enabled;
    const q = inference;
    enabled = false;
    inference = true;
    return () => {
      enabled = p;
      inference = q;
    };
  }, fn);
}
