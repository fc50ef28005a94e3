// Host numbers that change from call to call of a compiled step (Adam's bias corrections, the
// learning rate a scheduler sets). A replayed step does not run the function, so whatever
// computes such numbers (and the host state it advances, like a step count) must be handed over
// as a closure: replay runs the closure instead of the function and feeds its numbers into the
// slots the traced step used them in.

/** One declaration seen while a compiled step was traced. */
export interface HostDecl {
  compute: () => number[];
  values: number[];
}

let sink: HostDecl[] | null = null;

/**
 * Run `compute` now and return its numbers. Inside a step being traced by torch.compile the
 * closure is also remembered: a replayed call runs it again (in the same order as the traced
 * call did) and its new numbers replace the old ones wherever the step used them as scalar
 * operands. `compute` must do all its host-side state updates itself (e.g. `++state.step`) and
 * read mutable options (the group's `lr`) inside, not capture their values.
 */
export function hostScalars(compute: () => number[]): number[] {
  const values = compute();
  if (sink) sink.push({ compute, values });
  return values;
}

/** Collect declarations into `into` until the returned function is called. */
export function collectHostScalars(into: HostDecl[]): () => void {
  const prev = sink;
  sink = into;
  return () => {
    sink = prev;
  };
}

/** The declarations made so far in the current collection (the recorder attributes scalars to the latest). */
export function currentHostDecls(): HostDecl[] | null {
  return sink;
}
