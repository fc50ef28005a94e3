// Shared by the structured-output tests: a seeded RNG, a seeded generator of JSON schemas, a
// driver that decodes a constraint from random scores (a model that knows nothing), and ajv.
import { readFileSync } from "node:fs";
import { Ajv2020 } from "ajv/dist/2020.js";
import { mulberry32, PreTrainedTokenizer } from "torchts/transformers";
import type { JsonConstraint } from "../src/structured/json_constraint.js";

const HF = new URL("../../torchts/test/fixtures/hf/byte_tokenizer/", import.meta.url).pathname;

/** torchts's byte-level tokenizer fixture (256 tokens, one per byte). */
export function byteTokenizer(): PreTrainedTokenizer {
  const tj = JSON.parse(readFileSync(HF + "tokenizer.json", "utf8")) as Record<string, unknown>;
  const cfg = JSON.parse(readFileSync(HF + "tokenizer_config.json", "utf8")) as Record<string, unknown>;
  return new PreTrainedTokenizer(tj, cfg);
}

/** mulberry32 (torchts's): seeded floats in [0, 1). */
export const rng: (seed: number) => () => number = mulberry32;

export const ajv = () => new Ajv2020({ strict: false, allErrors: true });

/**
 * Decode with random scores until the constraint is complete or `maxTokens` are spent: each step
 * masks, then samples from softmax(scores * 3) over what is left. Returns the tokens (eos included).
 */
export function decode(c: JsonConstraint, vocabSize: number, maxTokens: number, r: () => number): number[] {
  const out: number[] = [];
  for (let left = maxTokens; left > 0 && !c.isComplete(); left--) {
    const s = new Float64Array(vocabSize);
    for (let i = 0; i < vocabSize; i++) s[i] = r() * 3;
    c.mask(s, left);
    let z = 0;
    for (const x of s) z += Math.exp(x);
    let u = r() * z;
    let pick = -1;
    for (let i = 0; i < s.length; i++) {
      if (s[i] === -Infinity) continue;
      pick = i;
      u -= Math.exp(s[i]!);
      if (u <= 0) break;
    }
    c.accept(pick);
    out.push(pick);
  }
  return out;
}

const NAMES = ["id", "name", "tags", "value", "ok", "x_1", "ünï", 'q"uote', "a\\b", "nested", "list", "count"];
const STRINGS = ["a", "bc", 'say "hi"', "é", "日本", "\n", "tab\t", "", "emoji 🎉", "back\\slash"];

/**
 * A seeded random JSON schema: objects (required and optional properties, additionalProperties
 * false or not), arrays with count bounds, strings with length bounds, numbers, integers,
 * booleans, null, enums and consts of mixed values, anyOf/oneOf of distinct types, type arrays,
 * and $defs with $ref (sometimes recursive through an optional property).
 */
export function randomSchema(r: () => number): Record<string, unknown> {
  const pick = <T>(xs: T[]): T => xs[Math.floor(r() * xs.length)]!;
  const int = (lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));
  const shuffled = <T>(xs: T[]): T[] => {
    const a = [...xs];
    for (let i = a.length - 1; i > 0; i--) {
      const j = int(0, i);
      [a[i], a[j]] = [a[j]!, a[i]!];
    }
    return a;
  };
  const defs: Record<string, unknown> = {};
  const scalar = (): Record<string, unknown> => {
    switch (int(0, 7)) {
      case 0: {
        const s: Record<string, unknown> = { type: "string" };
        if (r() < 0.5) s.minLength = int(0, 3);
        if (r() < 0.5) s.maxLength = ((s.minLength as number | undefined) ?? 0) + int(0, 6);
        return s;
      }
      case 1:
        return { type: "integer" };
      case 2:
        return { type: "number" };
      case 3:
        return { type: "boolean" };
      case 4:
        return { type: "null" };
      case 5:
        return { enum: Array.from({ length: int(1, 4) }, () => pick<unknown>([pick(STRINGS), int(-50, 50), 2.5, null, true, { k: pick(STRINGS) }, [1, "x"]])) };
      case 6:
        return { const: pick<unknown>([pick(STRINGS), int(0, 9), false, { a: [null] }]) };
      default:
        return { type: pick([["string", "null"], ["integer", "boolean"], ["number", "string"]]) };
    }
  };
  const value = (depth: number): Record<string, unknown> => {
    const k = depth >= 3 ? 0 : int(0, 9);
    if (k <= 3) return scalar();
    if (k <= 5) {
      const props: Record<string, unknown> = {};
      const names = shuffled(NAMES).slice(0, int(1, 4));
      for (const n of names) props[n] = value(depth + 1);
      const s: Record<string, unknown> = { type: "object", properties: props, required: names.filter(() => r() < 0.6) };
      if (r() < 0.5) s.additionalProperties = false;
      return s;
    }
    if (k <= 7) {
      const s: Record<string, unknown> = { type: "array", items: value(depth + 1) };
      if (r() < 0.5) s.minItems = int(0, 2);
      if (r() < 0.5) s.maxItems = ((s.minItems as number | undefined) ?? 0) + int(0, 3);
      return s;
    }
    if (k === 8) {
      // options of distinct kinds, so that one and only one matches (oneOf holds too)
      const opts = [{ type: "string", maxLength: 4 }, { type: "integer" }, { type: "object", properties: { v: value(depth + 1) }, required: ["v"], additionalProperties: false }, { type: "null" }];
      return { [pick(["anyOf", "oneOf"])]: shuffled(opts).slice(0, int(2, 3)) };
    }
    const name = `d${Object.keys(defs).length}`;
    // recursive through an optional property: a finite value exists (the property left out)
    defs[name] = { type: "object", properties: { v: scalar(), next: { $ref: `#/$defs/${name}` } }, required: ["v"], additionalProperties: false };
    return { $ref: `#/$defs/${name}` };
  };
  const props: Record<string, unknown> = {};
  const names = shuffled(NAMES).slice(0, int(2, 4));
  for (const n of names) props[n] = value(1);
  const root: Record<string, unknown> = { type: "object", properties: props, required: names.filter(() => r() < 0.7), additionalProperties: false };
  if (Object.keys(defs).length) root.$defs = defs;
  return root;
}
