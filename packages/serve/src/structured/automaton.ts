// Runs a grammar (schema.ts) byte by byte. A state is a small set of threads (more than one while
// anyOf options, enum values or a number's end are undecided); a thread is an immutable stack of
// entries, so stepping a state copies only the top entry and states can be shared freely while
// constraint.ts walks the vocabulary trie. Every entry knows the fewest bytes that finish it
// (`cost`) and the whole stack below it (`base`), so a thread's shortest completion is O(1).
import { END, GNode, Kind } from "./schema.js";

/** Whitespace bytes allowed in a row inside objects and arrays: a newline and indentation a few levels deep; bounded so a model cannot spend its tokens on whitespace. */
export const MAX_WHITESPACE = 8;
/** Digits of a number's integer part, fraction and exponent (15 keeps integers exact in a double). */
const INT_DIGITS = 15;
const FRAC_DIGITS = 15;
const EXP_DIGITS = 2;
/** Threads kept per state (a schema whose options overlap deeply could otherwise multiply them). */
const MAX_THREADS = 32;

// phases per kind; 0 is always "before the first byte"
const S_CONTENT = 1, S_ESC = 2, S_HEX = 3;
const N_MINUS = 1, N_ZERO = 2, N_INT = 3, N_DOT = 4, N_FRAC = 5, N_E = 6, N_ESIGN = 7, N_EXP = 8;
const O_OPEN = 1, O_COMMA = 2, O_KEY = 3, O_COLON = 4, O_VWS = 5, O_VALUE = 6, O_AFTER = 7;
const M_OPEN = 1, M_COMMA = 2, M_KEY = 3, M_COLON = 4, M_VWS = 5, M_VALUE = 6, M_AFTER = 7;
const A_OPEN = 1, A_COMMA = 2, A_VALUE = 3, A_AFTER = 4;

/** The key grammar of free-form objects. */
const KEY = new GNode();
KEY.kind = Kind.Str;
KEY.min = 2;

const mul = (k: number, x: number) => (k <= 0 ? 0 : k * x);
// JSON also allows \r; a model writing JSON has no use for it, so it is one way less to waste tokens
const isWs = (b: number) => b === 0x20 || b === 0x0a || b === 0x09;
const isDigit = (b: number) => b >= 0x30 && b <= 0x39;
const isHex = (b: number) => isDigit(b) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66);

/**
 * One stack entry. Meaning of a, b, c by kind: Lit a = trie node; Str a = code points so far,
 * b = UTF-8 continuation bytes pending (or hex digits left), c = the next byte's range lo << 8 | hi
 * (or 1 when a \u escape began with D: no surrogates); Num a = digits in the current part; Obj
 * a = the property index in progress or last done (-1 none), b = properties written, c = key trie
 * node or whitespace run; Map/Arr b = values written, c = whitespace run.
 */
export class Th {
  readonly cost: number;
  readonly base: number;
  constructor(
    readonly node: GNode,
    readonly phase: number,
    readonly a: number,
    readonly b: number,
    readonly c: number,
    readonly up: Th | null,
  ) {
    this.cost = costOf(this);
    this.base = up ? up.cost + up.base : 0;
  }
}

/** The end of the document: accepts no byte, costs nothing. */
export const END_TH = new Th(END, 0, 0, 0, 0, null);

/** Bytes that finish entry t (for an entry waiting on its child: the bytes after the child). */
function costOf(t: Th): number {
  const n = t.node;
  switch (n.kind) {
    case Kind.Lit:
      return n.lit!.dist[t.a]!;
    case Kind.Str: {
      const left = Math.max(0, n.minLength - t.a) + 1;
      if (t.phase === 0) return 1 + n.minLength + 1;
      if (t.phase === S_CONTENT || t.phase === S_HEX) return t.b + left;
      return 1 + left; // S_ESC
    }
    case Kind.Num:
      return t.phase === 0 || t.phase === N_MINUS || t.phase === N_DOT || t.phase === N_E || t.phase === N_ESIGN ? 1 : 0;
    case Kind.Obj: {
      const i = t.a + 1;
      switch (t.phase) {
        case 0:
          return n.min;
        case O_OPEN:
          return n.open[i]!;
        case O_COMMA:
          return n.comma[i]!;
        case O_KEY: {
          const keys = n.keys!;
          const hi = Math.min(n.nextRequired[i]!, n.props.length - 1);
          let best = Infinity;
          for (const j of keys.props[t.c]!) {
            if (j < i || j > hi) continue;
            const p = n.props[j]!;
            best = Math.min(best, p.key.length - keys.depth[t.c]! + 1 + p.node.min + n.after[j + 1]!);
          }
          return best;
        }
        case O_COLON:
          return 1 + n.props[t.a]!.node.min + n.after[i]!;
        case O_VWS:
          return n.props[t.a]!.node.min + n.after[i]!;
        default:
          return n.after[i]!; // O_VALUE, O_AFTER
      }
    }
    case Kind.Map: {
      const v = n.child!.min;
      switch (t.phase) {
        case 0:
          return 2;
        case M_COMMA:
          return 2 + 1 + v + 1;
        case M_KEY:
        case M_COLON:
          return 1 + v + 1;
        case M_VWS:
          return v + 1;
        default:
          return 1; // M_OPEN, M_VALUE, M_AFTER
      }
    }
    case Kind.Arr: {
      const m = n.child!.min;
      switch (t.phase) {
        case 0:
          return n.min;
        case A_OPEN:
          return n.minItems === 0 ? 1 : mul(n.minItems, m) + n.minItems - 1 + 1;
        case A_COMMA:
          return m + mul(n.minItems - t.b - 1, m + 1) + 1;
        default:
          return mul(n.minItems - t.b, m + 1) + 1; // A_VALUE, A_AFTER
      }
    }
    default:
      return 0; // End
  }
}

/** The parent `up` once its child value is complete. */
function done(up: Th): Th {
  const n = up.node;
  switch (n.kind) {
    case Kind.Obj:
      return new Th(n, O_AFTER, up.a, up.b, 0, up.up);
    case Kind.Map:
      return new Th(n, up.phase === M_KEY ? M_COLON : M_AFTER, 0, up.b, 0, up.up);
    case Kind.Arr:
      return new Th(n, A_AFTER, 0, up.b, 0, up.up);
    default:
      return up; // End
  }
}

/** Begin a value of `node` under `parent` with byte `byte`. */
function start(node: GNode, parent: Th, byte: number, out: Th[]): void {
  if (node.kind === Kind.Alt) for (const o of node.flat) feed(new Th(o, 0, 0, 0, 0, parent), byte, out);
  else feed(new Th(node, 0, 0, 0, 0, parent), byte, out);
}

const same = (t: Th, a: number, b: number, c: number, phase: number) => new Th(t.node, phase, a, b, c, t.up);

/** The successors of thread t on `byte`, appended to out. */
function feed(t: Th, byte: number, out: Th[]): void {
  const n = t.node;
  switch (n.kind) {
    case Kind.Lit: {
      const lit = n.lit!;
      const next = lit.next[t.a]!.get(byte);
      if (next !== undefined) out.push(same(t, next, 0, 0, 0));
      if (lit.end[t.a]) feed(done(t.up!), byte, out);
      return;
    }
    case Kind.Str:
      return feedString(t, n, byte, out);
    case Kind.Num:
      return feedNumber(t, n, byte, out);
    case Kind.Obj:
      return feedObject(t, n, byte, out);
    case Kind.Map:
      return feedMap(t, n, byte, out);
    case Kind.Arr:
      return feedArray(t, n, byte, out);
    default:
      return; // End
  }
}

function feedString(t: Th, n: GNode, byte: number, out: Th[]): void {
  switch (t.phase) {
    case 0:
      if (byte === 0x22) out.push(same(t, 0, 0, 0, S_CONTENT));
      return;
    case S_CONTENT: {
      if (t.b > 0) {
        // inside a multi-byte UTF-8 character
        if (byte >= t.c >> 8 && byte <= (t.c & 0xff)) out.push(same(t, t.a, t.b - 1, 0x80bf, S_CONTENT));
        return;
      }
      if (byte === 0x22) {
        if (t.a >= n.minLength) out.push(done(t.up!));
        return;
      }
      if (t.a >= n.maxLength || byte < 0x20) return;
      if (byte === 0x5c) out.push(same(t, t.a + 1, 0, 0, S_ESC));
      else if (byte < 0x80) out.push(same(t, t.a + 1, 0, 0, S_CONTENT));
      else {
        // a lead byte: how many continuation bytes follow and the range of the first (no overlongs, no surrogates, <= U+10FFFF)
        let k = 0;
        let range = 0x80bf;
        if (byte >= 0xc2 && byte <= 0xdf) k = 1;
        else if (byte >= 0xe0 && byte <= 0xef) {
          k = 2;
          if (byte === 0xe0) range = 0xa0bf;
          else if (byte === 0xed) range = 0x809f;
        } else if (byte >= 0xf0 && byte <= 0xf4) {
          k = 3;
          if (byte === 0xf0) range = 0x90bf;
          else if (byte === 0xf4) range = 0x808f;
        }
        if (k) out.push(same(t, t.a + 1, k, range, S_CONTENT));
      }
      return;
    }
    case S_ESC:
      if (byte === 0x75) out.push(same(t, t.a, 4, 0, S_HEX));
      else if (byte === 0x22 || byte === 0x5c || byte === 0x2f || byte === 0x62 || byte === 0x66 || byte === 0x6e || byte === 0x72 || byte === 0x74)
        out.push(same(t, t.a, 0, 0, S_CONTENT));
      return;
    default: {
      // S_HEX: \uXXXX without surrogate code points (a lone surrogate is no character)
      if (!isHex(byte)) return;
      if (t.c === 1 && !(byte >= 0x30 && byte <= 0x37)) return;
      const c = t.b === 4 && (byte === 0x44 || byte === 0x64) ? 1 : 0;
      out.push(t.b === 1 ? same(t, t.a, 0, 0, S_CONTENT) : same(t, t.a, t.b - 1, c, S_HEX));
      return;
    }
  }
}

function feedNumber(t: Th, n: GNode, byte: number, out: Th[]): void {
  const p = t.phase;
  const digit = isDigit(byte);
  switch (p) {
    case 0:
    case N_MINUS:
      if (byte === 0x30) out.push(same(t, 1, 0, 0, N_ZERO));
      else if (digit) out.push(same(t, 1, 0, 0, N_INT));
      else if (byte === 0x2d && p === 0) out.push(same(t, 0, 0, 0, N_MINUS));
      return;
    case N_DOT:
      if (digit) out.push(same(t, 1, 0, 0, N_FRAC));
      return;
    case N_E:
    case N_ESIGN:
      if (digit) out.push(same(t, 1, 0, 0, N_EXP));
      else if (p === N_E && (byte === 0x2b || byte === 0x2d)) out.push(same(t, 0, 0, 0, N_ESIGN));
      return;
  }
  // an accepting phase: more of the number, or the number ends and the byte is its parent's
  if (p === N_INT && digit && t.a < INT_DIGITS) out.push(same(t, t.a + 1, 0, 0, N_INT));
  else if (p === N_FRAC && digit && t.a < FRAC_DIGITS) out.push(same(t, t.a + 1, 0, 0, N_FRAC));
  else if (p === N_EXP && digit && t.a < EXP_DIGITS) out.push(same(t, t.a + 1, 0, 0, N_EXP));
  else if (!n.integer && byte === 0x2e && (p === N_ZERO || p === N_INT)) out.push(same(t, 0, 0, 0, N_DOT));
  else if (!n.integer && (byte === 0x65 || byte === 0x45) && p !== N_EXP) out.push(same(t, 0, 0, 0, N_E));
  else if (!digit) feed(done(t.up!), byte, out);
}

function feedObject(t: Th, n: GNode, byte: number, out: Th[]): void {
  const P = n.props.length;
  const i = t.a + 1;
  switch (t.phase) {
    case 0:
      if (byte === 0x7b) out.push(same(t, -1, 0, 0, O_OPEN));
      return;
    case O_OPEN:
    case O_COMMA: {
      if (isWs(byte)) {
        if (t.c < MAX_WHITESPACE) out.push(same(t, t.a, t.b, t.c + 1, t.phase));
      } else if (byte === 0x7d) {
        if (t.phase === O_OPEN && n.nextRequired[i] === P) out.push(done(t.up!));
      } else keyByte(t, n, 0, byte, out);
      return;
    }
    case O_KEY:
      keyByte(t, n, t.c, byte, out);
      return;
    case O_COLON:
      if (byte === 0x3a) out.push(same(t, t.a, t.b, 0, O_VWS));
      return;
    case O_VWS:
      if (isWs(byte)) {
        if (t.c < MAX_WHITESPACE) out.push(same(t, t.a, t.b, t.c + 1, O_VWS));
      } else start(n.props[t.a]!.node, same(t, t.a, t.b, 0, O_VALUE), byte, out);
      return;
    case O_AFTER:
      if (isWs(byte)) {
        if (t.c < MAX_WHITESPACE) out.push(same(t, t.a, t.b, t.c + 1, O_AFTER));
      } else if (byte === 0x2c) {
        if (i < P) out.push(same(t, t.a, t.b, 0, O_COMMA));
      } else if (byte === 0x7d && n.nextRequired[i] === P) out.push(done(t.up!));
      return;
  }
}

/** A byte of a declared key: only keys of properties that may come next (none skipped that is required). */
function keyByte(t: Th, n: GNode, at: number, byte: number, out: Th[]): void {
  const keys = n.keys!;
  const next = keys.next[at]!.get(byte);
  if (next === undefined) return;
  const lo = t.a + 1;
  const hi = Math.min(n.nextRequired[lo]!, n.props.length - 1);
  if (!keys.props[next]!.some((j) => j >= lo && j <= hi)) return;
  const leaf = keys.leaf[next]!;
  out.push(leaf >= 0 ? same(t, leaf, t.b + 1, 0, O_COLON) : same(t, t.a, t.b, next, O_KEY));
}

function feedMap(t: Th, n: GNode, byte: number, out: Th[]): void {
  switch (t.phase) {
    case 0:
      if (byte === 0x7b) out.push(same(t, 0, 0, 0, M_OPEN));
      return;
    case M_OPEN:
    case M_COMMA:
      if (isWs(byte)) {
        if (t.c < MAX_WHITESPACE) out.push(same(t, 0, t.b, t.c + 1, t.phase));
      } else if (byte === 0x7d) {
        if (t.phase === M_OPEN) out.push(done(t.up!));
      } else start(KEY, same(t, 0, t.b + 1, 0, M_KEY), byte, out);
      return;
    case M_COLON:
      if (byte === 0x3a) out.push(same(t, 0, t.b, 0, M_VWS));
      return;
    case M_VWS:
      if (isWs(byte)) {
        if (t.c < MAX_WHITESPACE) out.push(same(t, 0, t.b, t.c + 1, M_VWS));
      } else start(n.child!, same(t, 0, t.b, 0, M_VALUE), byte, out);
      return;
    case M_AFTER:
      if (isWs(byte)) {
        if (t.c < MAX_WHITESPACE) out.push(same(t, 0, t.b, t.c + 1, M_AFTER));
      } else if (byte === 0x2c) {
        out.push(same(t, 0, t.b, 0, M_COMMA));
      } else if (byte === 0x7d) out.push(done(t.up!));
      return;
  }
}

function feedArray(t: Th, n: GNode, byte: number, out: Th[]): void {
  switch (t.phase) {
    case 0:
      if (byte === 0x5b) out.push(same(t, 0, 0, 0, A_OPEN));
      return;
    case A_OPEN:
    case A_COMMA:
      if (isWs(byte)) {
        if (t.c < MAX_WHITESPACE) out.push(same(t, 0, t.b, t.c + 1, t.phase));
      } else if (byte === 0x5d && t.phase === A_OPEN) {
        if (n.minItems === 0) out.push(done(t.up!));
      } else if (t.b < n.maxItems) start(n.child!, same(t, 0, t.b + 1, 0, A_VALUE), byte, out);
      return;
    case A_AFTER:
      if (isWs(byte)) {
        if (t.c < MAX_WHITESPACE) out.push(same(t, 0, t.b, t.c + 1, A_AFTER));
      } else if (byte === 0x2c) {
        if (t.b < n.maxItems) out.push(same(t, 0, t.b, 0, A_COMMA));
      } else if (byte === 0x5d && t.b >= n.minItems) out.push(done(t.up!));
      return;
  }
}

function equal(x: Th, y: Th): boolean {
  while (x !== y) {
    if (!x.up || !y.up || x.node !== y.node || x.phase !== y.phase || x.a !== y.a || x.b !== y.b || x.c !== y.c) return false;
    x = x.up;
    y = y.up;
  }
  return true;
}

/** A set of threads: the automaton's state. Empty: no way on. */
export type State = readonly Th[];

/** The state before the first byte of a value of `root` that ends the document. */
export function initial(root: GNode): State {
  return (root.kind === Kind.Alt ? root.flat : [root]).map((n) => new Th(n, 0, 0, 0, 0, END_TH));
}

/** The state after `byte`; threads that reach the same stack are kept once. */
export function step(s: State, byte: number): State {
  const out: Th[] = [];
  for (const t of s) feed(t, byte, out);
  if (out.length < 2) return out;
  const kept: Th[] = [];
  for (const t of out) if (kept.length < MAX_THREADS && !kept.some((k) => equal(k, t))) kept.push(t);
  return kept;
}

/** The fewest bytes that complete the document from s (0: it may end here; Infinity: s is empty). */
export function rest(s: State): number {
  let m = Infinity;
  for (const t of s) m = Math.min(m, t.cost + t.base);
  return m;
}

/** Whether nothing may follow: every thread is at the document's end. */
export function finished(s: State): boolean {
  return s.length > 0 && s.every((t) => t.node.kind === Kind.End);
}

/** Whether `bytes` are a whole value of `node` (the enum filter of schema.ts). */
export function acceptsValue(node: GNode, bytes: Uint8Array): boolean {
  let s = initial(node);
  for (const b of bytes) {
    s = step(s, b);
    if (!s.length) return false;
  }
  return rest(s) === 0;
}

/** The threads of s when every one is inside a string's characters (constraint.ts's fast path), else null. */
export function plainStringTops(s: State): readonly Th[] | null {
  if (!s.length) return null;
  for (const t of s) if (!(t.node.kind === Kind.Str && t.phase === S_CONTENT && t.b === 0)) return null;
  return s;
}
