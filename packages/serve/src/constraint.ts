// The engine's hook for constrained decoding (structured output, required tool calls). A request
// may carry one TokenConstraint; before each of its tokens is sampled the engine calls `mask`,
// which sets the scores of tokens the constraint forbids to -Infinity, and after sampling it calls
// `accept` with the chosen token. The engine ends the request with finish reason "stop" as soon as
// `isComplete()` is true (the constrained output is whole), and never samples a token that `mask`
// forbade. `remaining` is the number of tokens the request may still generate: a constraint keeps
// a way to finish within it (a model that knows nothing must still produce a whole document).
export interface TokenConstraint {
  /** Forbid (score = -Infinity) every token that cannot come next; `remaining` >= 1 tokens are left. */
  mask(scores: Float64Array, remaining: number): void;
  /** The sampled token (one that `mask` allowed). */
  accept(tokenId: number): void;
  /** True once the output is complete: the engine stops the request there. */
  isComplete(): boolean;
}
