// The bytes of every token of a tokenizer, and byte tries over them, built once per tokenizer so
// that constraint.ts can mask a 150k-token vocabulary per step by walking only the trie branches
// the grammar allows. Token bytes come from the vocabulary itself (not decode([id]), which turns
// a token that ends inside a UTF-8 character into U+FFFD): byte-level BPE maps each character back
// through GPT-2's byte table; SentencePiece writes bytes as <0xNN> and spaces as U+2581.
import type { PreTrainedTokenizer } from "torchts/transformers";

/** A byte trie in arrays; node 0 is the root. */
export interface Trie {
  /** Children of node n: kids[kidStart[n] .. kidStart[n+1]-1], in byte order. */
  kidStart: Int32Array;
  kids: Int32Array;
  /** The byte leading into node n. */
  byte: Uint8Array;
  /** Tokens ending at node n: tokIds[tokStart[n] .. tokStart[n+1]-1]. */
  tokStart: Int32Array;
  tokIds: Int32Array;
  /** The longest token below n, in bytes past n. */
  height: Int32Array;
}

export interface Vocab {
  /** Token ids are 0 .. size-1. */
  size: number;
  /** Each token's bytes; null for special tokens and ids with no text (never allowed inside JSON). */
  bytes: (Uint8Array | null)[];
  /** All tokens with bytes. */
  full: Trie;
  /** Tokens that are not plain string text (see plainIds): the string fast path walks only these. */
  irregular: Trie;
  /** Tokens that are whole UTF-8 characters >= U+0020 without '"' or '\': inside a JSON string each is just its characters. Sorted by plainChars. */
  plainIds: Int32Array;
  plainChars: Int32Array;
}

/** The tokenizer cannot back structured output (the server answers 400). */
export class VocabError extends Error {}

/** GPT-2's printable stand-ins for bytes, inverted: character code -> byte. */
function byteLevelTable(): Map<number, number> {
  const bs: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const cs = [...bs];
  let k = 0;
  for (let b = 0; b < 256; b++)
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + k++);
    }
  return new Map(cs.map((c, i) => [c, bs[i]!]));
}

type Raw = Record<string, unknown>;

/** The decoder types of tokenizer.json, nested Sequences included. */
function decoderTypes(d: unknown): string[] {
  if (!d || typeof d !== "object") return [];
  const r = d as Raw;
  const inner = Array.isArray(r.decoders) ? r.decoders.flatMap(decoderTypes) : [];
  return [String(r.type), ...inner];
}

const utf8 = new TextEncoder();

/** Each id's token string from tokenizer.json (model vocab, then added tokens) and which ids are special. */
function tokenStrings(tj: Raw): { strings: (string | undefined)[]; special: Set<number>; added: Set<number> } {
  const model = (tj.model ?? {}) as Raw;
  const strings: (string | undefined)[] = [];
  const v = model.vocab;
  if (Array.isArray(v)) v.forEach((e, i) => (strings[i] = Array.isArray(e) ? String(e[0]) : undefined)); // Unigram: [piece, score]
  else if (v && typeof v === "object") for (const [s, id] of Object.entries(v as Record<string, number>)) strings[id] = s;
  const special = new Set<number>();
  const added = new Set<number>();
  for (const a of (tj.added_tokens ?? []) as { id: number; content: string; special?: boolean }[]) {
    strings[a.id] = a.content;
    added.add(a.id);
    if (a.special) special.add(a.id);
  }
  return { strings, special, added };
}

/** The bytes of every token of a tokenizer.json; throws VocabError for kinds it cannot read. */
export function tokenBytes(tj: Raw): (Uint8Array | null)[] {
  const { strings, special, added } = tokenStrings(tj);
  const types = decoderTypes(tj.decoder);
  const model = (tj.model ?? {}) as Raw;
  let map: (s: string) => Uint8Array | null;
  if (types.includes("ByteLevel")) {
    const table = byteLevelTable();
    map = (s) => {
      const out = new Uint8Array(s.length);
      let k = 0;
      for (const ch of s) {
        const b = table.get(ch.codePointAt(0)!);
        if (b === undefined) return null;
        out[k++] = b;
      }
      return out.subarray(0, k);
    };
  } else if (types.includes("ByteFallback") || types.includes("Metaspace") || model.byte_fallback === true || model.type === "Unigram") {
    map = (s) => {
      const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(s);
      if (m) return Uint8Array.of(parseInt(m[1]!, 16));
      return utf8.encode(s.replace(/\u2581/g, " "));
    };
  } else throw new VocabError(`structured output needs a byte-level BPE or SentencePiece tokenizer; this one's decoder is ${types.join("/") || "none"}`);
  return strings.map((s, id) => {
    if (s === undefined || special.has(id)) return null;
    const b = added.has(id) ? utf8.encode(s) : map(s);
    return b && b.length ? b : null;
  });
}

/** Whether the bytes are whole UTF-8 characters (no overlongs or surrogates); returns the count, or -1. */
function utf8Chars(b: Uint8Array, plainOnly: boolean): number {
  let n = 0;
  for (let i = 0; i < b.length; ) {
    const x = b[i]!;
    let k: number;
    let lo = 0x80;
    let hi = 0xbf;
    if (x < 0x80) {
      if (plainOnly && (x < 0x20 || x === 0x22 || x === 0x5c)) return -1;
      k = 0;
    } else if (x >= 0xc2 && x <= 0xdf) k = 1;
    else if (x >= 0xe0 && x <= 0xef) {
      k = 2;
      if (x === 0xe0) lo = 0xa0;
      if (x === 0xed) hi = 0x9f;
    } else if (x >= 0xf0 && x <= 0xf4) {
      k = 3;
      if (x === 0xf0) lo = 0x90;
      if (x === 0xf4) hi = 0x8f;
    } else return -1;
    if (k && i + k >= b.length) return -1;
    for (let j = 1; j <= k; j++) {
      const y = b[i + j]!;
      if (y < (j === 1 ? lo : 0x80) || y > (j === 1 ? hi : 0xbf)) return -1;
    }
    i += k + 1;
    n++;
  }
  return n;
}

function compare(a: Uint8Array, b: Uint8Array): number {
  const m = Math.min(a.length, b.length);
  for (let i = 0; i < m; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

/** The trie of the given token ids, built from their bytes in sorted order (no per-node maps). */
export function buildTrie(bytes: (Uint8Array | null)[], ids: number[]): Trie {
  const sorted = ids.filter((i) => bytes[i]).sort((x, y) => compare(bytes[x]!, bytes[y]!) || x - y);
  let total = 1;
  for (const i of sorted) total += bytes[i]!.length;
  // nodes in preorder: parent and byte per node, and the node each token ends at
  const parent = new Int32Array(total);
  const byteOf = new Uint8Array(total);
  const ends = new Int32Array(sorted.length);
  const path: number[] = [0];
  let count = 1;
  let prev: Uint8Array = new Uint8Array(0);
  sorted.forEach((id, k) => {
    const b = bytes[id]!;
    let l = 0;
    while (l < b.length && l < prev.length && b[l] === prev[l]) l++;
    for (let d = l; d < b.length; d++) {
      parent[count] = path[d]!;
      byteOf[count] = b[d]!;
      path[d + 1] = count++;
    }
    ends[k] = path[b.length]!;
    prev = b;
  });
  // children lists (preorder meets each node's children in byte order)
  const kidStart = new Int32Array(count + 1);
  for (let n = 1; n < count; n++) kidStart[parent[n]! + 1]!++;
  for (let n = 0; n < count; n++) kidStart[n + 1]! += kidStart[n]!;
  const kids = new Int32Array(Math.max(0, count - 1));
  const at = kidStart.slice(0, count);
  for (let n = 1; n < count; n++) kids[at[parent[n]!]!++] = n;
  const tokStart = new Int32Array(count + 1);
  for (const e of ends) tokStart[e + 1]!++;
  for (let n = 0; n < count; n++) tokStart[n + 1]! += tokStart[n]!;
  const tokIds = new Int32Array(sorted.length);
  const fill = tokStart.slice(0, count);
  sorted.forEach((id, k) => (tokIds[fill[ends[k]!]!++] = id));
  const height = new Int32Array(count);
  for (let n = count - 1; n > 0; n--) height[parent[n]!] = Math.max(height[parent[n]!]!, height[n]! + 1);
  return { kidStart, kids, byte: byteOf.slice(0, count), tokStart, tokIds, height };
}

/** The index of a vocabulary given each id's bytes (null: never allowed). Throws VocabError. */
export function buildVocab(bytes: (Uint8Array | null)[]): Vocab {
  const single = new Set<number>();
  for (const b of bytes) if (b && b.length === 1) single.add(b[0]!);
  // the shortest completion is spelt one byte per token, in printable ASCII
  for (let x = 0x20; x <= 0x7e; x++)
    if (!single.has(x)) throw new VocabError(`structured output needs a single-byte token for every printable ASCII character; this vocabulary has none for ${JSON.stringify(String.fromCharCode(x))}`);
  // a token that stops inside a UTF-8 character needs the rest one byte at a time; without those tokens, such tokens are left out
  let continuation = true;
  for (let x = 0x80; x <= 0xbf; x++) if (!single.has(x)) continuation = false;
  const usable = bytes.map((b) => (b && (continuation || utf8Chars(b, false) >= 0) ? b : null));
  const plain: number[] = [];
  const irregular: number[] = [];
  const chars: number[] = [];
  usable.forEach((b, id) => {
    if (!b) return;
    const c = utf8Chars(b, true);
    if (c >= 0) {
      plain.push(id);
      chars[id] = c;
    } else irregular.push(id);
  });
  plain.sort((x, y) => chars[x]! - chars[y]! || x - y);
  const all = usable.flatMap((b, id) => (b ? [id] : []));
  return {
    size: bytes.length,
    bytes: usable,
    full: buildTrie(usable, all),
    irregular: buildTrie(usable, irregular),
    plainIds: Int32Array.from(plain),
    plainChars: Int32Array.from(plain, (id) => chars[id]!),
  };
}

const cache = new WeakMap<PreTrainedTokenizer, Vocab>();

/** The tokenizer's vocabulary index, built on first use and kept with the tokenizer. */
export function vocabOf(tok: PreTrainedTokenizer): Vocab {
  let v = cache.get(tok);
  if (!v) cache.set(tok, (v = buildVocab(tokenBytes(tok.tokenizerJson))));
  return v;
}
