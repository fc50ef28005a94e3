// The structured-output constraint decoded from random scores (a model that knows nothing) over
// torchts's byte tokenizer and over a synthetic vocabulary with multi-byte tokens: outputs parse and
// validate with ajv within max_tokens, even when max_tokens is the shortest document; mask() agrees
// token for token with a check of each token alone; whitespace stays bounded; special tokens never
// appear and eos only ends a whole document.
import { test } from "node:test";
import assert from "node:assert/strict";
import { MAX_WHITESPACE } from "../src/structured/automaton.js";
import { jsonObjectGrammar, schemaGrammar } from "../src/structured/grammar.js";
import { JsonConstraint, minTokens } from "../src/structured/json_constraint.js";
import { buildVocab, tokenBytes, vocabOf, type Vocab } from "../src/structured/vocab.js";
import { ajv, byteTokenizer, decode, randomSchema, rng } from "./structured_helpers.js";

const tok = byteTokenizer();
const bytesVocab = vocabOf(tok);
/** The tiny llama fixture's eos id (the engine's stop token); in this vocabulary it is byte 0x02. */
const EOS = [2];
const text = (v: Vocab, ids: number[]) => Buffer.concat(ids.filter((i) => !EOS.includes(i)).map((i) => v.bytes[i]!)).toString("utf8");

test("20 random schemas: output from random scores parses and validates, with room to spare and with max_tokens = the shortest document", () => {
  const validator = ajv();
  let longer = 0;
  for (let seed = 1; seed <= 20; seed++) {
    const schema = randomSchema(rng(seed));
    const validate = validator.compile(schema);
    const g = schemaGrammar(schema);
    const need = minTokens(new JsonConstraint(g, bytesVocab, EOS));
    for (const budget of [need, need + 7, 300]) {
      const c = new JsonConstraint(g, bytesVocab, EOS);
      const ids = decode(c, 256, budget, rng(seed * 1000 + budget));
      const what = `seed ${seed}, max_tokens ${budget}, schema ${JSON.stringify(schema)}`;
      assert.ok(c.isComplete(), `${what}: not complete after ${ids.length} tokens: ${JSON.stringify(text(bytesVocab, ids))}`);
      assert.ok(ids.length <= budget, what);
      const out = text(bytesVocab, ids);
      let value: unknown;
      assert.doesNotThrow(() => (value = JSON.parse(out)), `${what}: ${JSON.stringify(out)}`);
      assert.ok(validate(value), `${what}: ${out} fails: ${JSON.stringify(validate.errors)}`);
      if (budget === 300 && ids.length > need) longer++;
    }
  }
  // the random model is not held to the shortest document when it has room
  assert.ok(longer >= 10, `only ${longer} of 20 outputs were longer than the shortest document`);
});

test("json_object: any JSON object, within max_tokens from 2 ('{}') up", () => {
  for (const budget of [2, 3, 10, 60, 200]) {
    const c = new JsonConstraint(jsonObjectGrammar(), bytesVocab, EOS);
    assert.equal(c.minTokens, 2);
    const ids = decode(c, 256, budget, rng(budget));
    const v = JSON.parse(text(bytesVocab, ids)) as unknown;
    assert.ok(typeof v === "object" && v !== null && !Array.isArray(v), text(bytesVocab, ids));
    assert.ok(ids.length <= budget);
  }
});

test("the shortest document is what minTokens says", () => {
  const cases: [unknown, string][] = [
    [{ type: "object", properties: { name: { type: "string", minLength: 3 } }, required: ["name"] }, '{"name":"aaa"}'],
    [{ type: "object", properties: { a: { type: "integer" }, b: { type: "boolean" } }, required: ["a", "b"] }, '{"a":0,"b":true}'],
    [{ type: "object", properties: { a: { type: "integer" } } }, "{}"],
    [{ type: "array", items: { enum: ["xy", 7] }, minItems: 3 }, "[7,7,7]"],
    [{ anyOf: [{ type: "string", minLength: 5 }, { type: "null" }] }, "null"],
    [{ type: ["number", "boolean"] }, "0"],
  ];
  for (const [schema, shortest] of cases) assert.equal(new JsonConstraint(schemaGrammar(schema), bytesVocab, EOS).minTokens, shortest.length, JSON.stringify(schema));
});

/** A vocabulary with multi-byte tokens (structure, words, escapes, whole and split UTF-8 characters) over all 256 bytes, and two special ids. */
function mixedVocab(): Vocab {
  const enc = new TextEncoder();
  const pieces = [
    '{"', '"}', '":', '",', '": "', '":"', '{"name', 'name', '"name":', "true", "false", "null", "[]", "{}", "[{", "}]", "},{", '"]', '["',
    "123", "0.", "e-", "-1", "00", "\\n", '\\"', "\\u00", "\\ud8", "\\uD83", "é", "日本", " the", "the", "ab", "abc", "  ", "\n  ", "\n", ', "', "0", "1", "12",
  ];
  const bytes: (Uint8Array | null)[] = Array.from({ length: 256 }, (_, b) => Uint8Array.of(b));
  for (const p of pieces) bytes.push(enc.encode(p));
  const ri = enc.encode("日");
  bytes.push(ri.subarray(0, 2), ri.subarray(2), ri.subarray(1), Uint8Array.of(0xf0, 0x9f));
  bytes.push(null, null); // special tokens: the first never allowed, the last is eos
  return buildVocab(bytes);
}

test("mask() allows exactly the tokens that fit, checked one by one, along random walks over a multi-byte vocabulary", () => {
  const v = mixedVocab();
  const eos = [v.size - 1];
  const schemas: unknown[] = [
    undefined,
    // strings with both length bounds, and two string options undecided at once (the fast path per thread)
    { type: "object", properties: { s: { type: "string", minLength: 4, maxLength: 9 } }, required: ["s"] },
    { type: "array", items: { anyOf: [{ type: "string", maxLength: 5 }, { type: "string", minLength: 3 }] }, minItems: 2 },
    ...Array.from({ length: 6 }, (_, i) => randomSchema(rng(100 + i))),
  ];
  let steps = 0;
  for (const [k, schema] of schemas.entries()) {
    const g = schema === undefined ? jsonObjectGrammar() : schemaGrammar(schema);
    for (const budget of [new JsonConstraint(g, v, eos).minTokens + 3, 120]) {
      const c = new JsonConstraint(g, v, eos);
      const r = rng(k * 31 + budget);
      for (let left = budget; left > 0 && !c.isComplete(); left--) {
        const ok = c.allowedTokens(left).slice();
        const allowed: number[] = [];
        for (let id = 0; id < v.size; id++) {
          assert.equal(ok[id] === 1, c.allows(id, left), `schema ${k}, ${left} left, token ${id}`);
          if (ok[id]) allowed.push(id);
        }
        assert.ok(allowed.length > 0);
        assert.ok(!ok[v.size - 2], "a special token was allowed");
        c.accept(allowed[Math.floor(r() * allowed.length)]!);
        steps++;
      }
      assert.ok(c.isComplete(), `schema ${k} at max_tokens ${budget}`);
    }
  }
  assert.ok(steps > 200, `only ${steps} steps were checked`);
});

test("whitespace is bounded: scores that favour whitespace still give a whole document, with runs of at most MAX_WHITESPACE", () => {
  const schema = { type: "object", properties: { a: { type: "array", items: { type: "integer" } }, b: { type: "object", properties: { c: { type: "null" } }, required: ["c"] } }, required: ["a", "b"] };
  const c = new JsonConstraint(schemaGrammar(schema), bytesVocab, EOS);
  const ids: number[] = [];
  const r = rng(5);
  for (let left = 200; left > 0 && !c.isComplete(); left--) {
    const s = new Float64Array(256).map((_, i) => (i === 0x20 || i === 0x0a || i === 0x09 ? 50 : 0) + r());
    c.mask(s, left);
    let best = 0;
    for (let i = 1; i < 256; i++) if (s[i]! > s[best]!) best = i;
    c.accept(best);
    ids.push(best);
  }
  assert.ok(c.isComplete());
  const out = text(bytesVocab, ids);
  assert.ok(ajv().validate(schema, JSON.parse(out)), out);
  const runs = out.match(/[ \n\t]+/g) ?? [];
  assert.ok(runs.length > 0 && Math.max(...runs.map((x) => x.length)) === MAX_WHITESPACE, JSON.stringify(out));
});

test("eos only once the document is whole; a number at the root ends on eos", () => {
  const c = new JsonConstraint(schemaGrammar({ type: "integer" }), bytesVocab, EOS);
  assert.equal(c.allows(2, 10), false, "eos before any digit");
  assert.throws(() => c.accept(2), /before the document is whole/);
  c.accept(0x31);
  c.accept(0x32);
  assert.equal(c.isComplete(), false, "more digits may follow");
  assert.equal(c.allows(2, 10), true);
  assert.equal(c.allows(0x2e, 10), false, "an integer has no fraction");
  c.accept(2);
  assert.equal(c.isComplete(), true);
  assert.throws(() => c.accept(0x33), /after the end/);
});

test("a token the mask forbids is refused by accept", () => {
  const c = new JsonConstraint(schemaGrammar({ type: "object", properties: { a: { const: 1 } }, required: ["a"] }), bytesVocab, EOS);
  assert.throws(() => c.accept(0x5b), /does not fit/);
  for (const ch of '{"a":1}') c.accept(ch.charCodeAt(0));
  assert.equal(c.isComplete(), true);
});

test("token bytes: byte-level BPE through GPT-2's byte table, SentencePiece's <0xNN> and U+2581, special tokens left out", () => {
  assert.deepEqual([...bytesVocab.bytes[0x20]!], [0x20]);
  assert.deepEqual([...bytesVocab.bytes[0x0a]!], [0x0a]);
  assert.deepEqual([...bytesVocab.bytes[0xe9]!], [0xe9]);
  const bl = tokenBytes({
    model: { type: "BPE", vocab: { "Ġhi": 0, "Ã©": 1, "{\"": 2 } },
    decoder: { type: "ByteLevel" },
    added_tokens: [{ id: 3, content: "<|end|>", special: true }, { id: 4, content: "<tool_call>", special: false }],
  });
  assert.equal(Buffer.from(bl[0]!).toString(), " hi");
  assert.equal(Buffer.from(bl[1]!).toString(), "é");
  assert.equal(Buffer.from(bl[2]!).toString(), '{"');
  assert.equal(bl[3], null);
  assert.equal(Buffer.from(bl[4]!).toString(), "<tool_call>");
  const sp = tokenBytes({
    model: { type: "BPE", byte_fallback: true, vocab: { "<0x0A>": 0, "▁the": 1, "<s>": 2 } },
    decoder: { type: "Sequence", decoders: [{ type: "Replace" }, { type: "ByteFallback" }, { type: "Fuse" }] },
    added_tokens: [{ id: 2, content: "<s>", special: true }],
  });
  assert.deepEqual([...sp[0]!], [0x0a]);
  assert.equal(Buffer.from(sp[1]!).toString(), " the");
  assert.equal(sp[2], null);
  assert.throws(() => tokenBytes({ model: { type: "WordPiece", vocab: { a: 0 } }, decoder: { type: "WordPiece" } }), /byte-level BPE or SentencePiece/);
  assert.throws(() => buildVocab([Uint8Array.of(0x41)]), /single-byte token for every printable ASCII/);
});
