// PyTorch's distributed error classes (torch.distributed.DistError and its subclasses).

/** Every distributed error. */
export class DistError extends Error {
  override name = "DistError";
}
/** A collective failed: a mismatch between ranks, a peer that went away, an invalid call. */
export class DistBackendError extends DistError {
  override name = "DistBackendError";
}
/** The network failed: a connection could not be made or was lost. */
export class DistNetworkError extends DistError {
  override name = "DistNetworkError";
}
/** A store request failed or timed out. */
export class DistStoreError extends DistError {
  override name = "DistStoreError";
}
/** A collective or store wait ran past its timeout (PyTorch 2.x raises DistBackendError; so does this). */
export class DistTimeoutError extends DistBackendError {
  override name = "DistTimeoutError";
}

/**
 * A copy of a stored error to throw (a group's sticky error is raised by many calls, and torchts
 * prefixes an error escaping an op with the op's name, in place).
 */
export function freshError(e: Error): Error {
  const C = e.constructor as new (m: string) => Error;
  const c = new C(e.message);
  c.name = e.name;
  return c;
}
