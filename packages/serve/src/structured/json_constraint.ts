// The TokenConstraint of structured output: a grammar state (automaton.ts) advanced token by token.
// mask() allows a token when the grammar accepts its bytes and the document can still be finished
// in the tokens left after it, spelling the shortest completion one byte per token (the vocabulary
// has a token for every printable ASCII byte: vocab.ts checks). So even a model that knows nothing
// ends with a whole document within max_tokens, and eos is allowed only once the document is whole.
import type { TokenConstraint } from "../constraint.js";
import { finished, initial, plainStringTops, rest, step, type State } from "./automaton.js";
import type { Grammar } from "./schema.js";
import type { Trie, Vocab } from "./vocab.js";

export class JsonConstraint implements TokenConstraint {
  private state: State;
  private eosSeen = false;
  private allowed: Uint8Array;

  constructor(
    readonly grammar: Grammar,
    readonly vocab: Vocab,
    /** End-of-sequence ids: allowed only when the document is whole (they are never JSON bytes). */
    readonly eos: readonly number[],
  ) {
    this.state = initial(grammar.root);
    this.allowed = new Uint8Array(vocab.size);
  }

  /** The fewest tokens that can make a whole document from here (one byte per token). */
  get minTokens(): number {
    return this.eosSeen ? 0 : rest(this.state);
  }

  mask(scores: Float64Array, remaining: number): void {
    const ok = this.allowedTokens(remaining);
    const V = this.vocab.size;
    let any = false;
    for (let i = 0; i < scores.length; i++) {
      if (i < V && ok[i]) any = true;
      else scores[i] = -Infinity;
    }
    // cannot happen while the engine calls mask with remaining >= minTokens; better an error than invalid output
    if (!any) throw new Error(`structured output: no token can continue the document within ${remaining} tokens`);
  }

  /** 1 for each token id mask() allows with `remaining` tokens left (this one included). The array is reused. */
  allowedTokens(remaining: number): Uint8Array {
    const ok = this.allowed;
    ok.fill(0);
    if (this.eosSeen) return ok;
    const budget = remaining - 1;
    const s = this.state;
    const tops = plainStringTops(s);
    if (tops) {
      // inside a string: a plain token only adds characters, so its character count decides it. Per
      // thread the counts allowed are a range: at most the room left under maxLength, and enough that
      // minLength, the closing quote and what follows the string still fit in the budget (that lower
      // bound binds only if remaining is below the state's shortest completion, which the engine avoids)
      const { plainIds, plainChars } = this.vocab;
      for (const t of tops) {
        const n = t.node;
        const hi = n.maxLength - t.a;
        const lo = n.minLength - t.a - Math.max(0, budget - 1 - t.base);
        if (1 + t.base > budget) continue;
        for (let k = 0; k < plainIds.length; k++) {
          const c = plainChars[k]!;
          if (c > hi) break;
          if (c >= lo) ok[plainIds[k]!] = 1;
        }
      }
      this.walk(this.vocab.irregular, 0, s, budget);
    } else this.walk(this.vocab.full, 0, s, budget);
    const whole = rest(s) === 0;
    for (const e of this.eos) if (e < ok.length) ok[e] = whole ? 1 : 0;
    return ok;
  }

  /** Depth-first over the trie below `node`, where the grammar is in state s. */
  private walk(trie: Trie, node: number, s: State, budget: number): void {
    const { kidStart, kids, byte, tokStart, tokIds, height } = trie;
    const ok = this.allowed;
    for (let e = kidStart[node]!; e < kidStart[node + 1]!; e++) {
      const c = kids[e]!;
      const next = step(s, byte[c]!);
      if (!next.length) continue;
      const r = rest(next);
      if (r <= budget) for (let k = tokStart[c]!; k < tokStart[c + 1]!; k++) ok[tokIds[k]!] = 1;
      // each byte shortens the completion by at most one: nothing deeper can fit
      if (r - height[c]! <= budget && kidStart[c + 1]! > kidStart[c]!) this.walk(trie, c, next, budget);
    }
  }

  /** Whether mask() would allow tokenId with `remaining` tokens left, decided for this token alone (no trie, no fast path). */
  allows(tokenId: number, remaining: number): boolean {
    if (this.eosSeen) return false;
    if (this.eos.includes(tokenId)) return rest(this.state) === 0;
    const bytes = tokenId >= 0 && tokenId < this.vocab.size ? this.vocab.bytes[tokenId] : null;
    if (!bytes) return false;
    let s = this.state;
    for (const b of bytes) {
      s = step(s, b);
      if (!s.length) return false;
    }
    return rest(s) <= remaining - 1;
  }

  accept(tokenId: number): void {
    if (this.eosSeen) throw new Error("structured output: a token after the end of the document");
    if (this.eos.includes(tokenId)) {
      if (rest(this.state) !== 0) throw new Error("structured output: end of sequence before the document is whole");
      this.eosSeen = true;
      return;
    }
    const bytes = tokenId >= 0 && tokenId < this.vocab.size ? this.vocab.bytes[tokenId] : null;
    if (!bytes) throw new Error(`structured output: token ${tokenId} has no text that JSON allows`);
    let s = this.state;
    for (const b of bytes) {
      s = step(s, b);
      if (!s.length) throw new Error(`structured output: token ${tokenId} does not fit the schema here`);
    }
    this.state = s;
  }

  isComplete(): boolean {
    return this.eosSeen || finished(this.state);
  }
}

/** The fewest tokens a request needs to produce a whole document (the server's 400 when max_tokens is smaller). */
export function minTokens(c: JsonConstraint): number {
  return c.minTokens;
}
