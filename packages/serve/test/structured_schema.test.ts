// The JSON-Schema-to-grammar compiler and the byte automaton: which documents a grammar accepts
// (declared property order, optional properties, string escapes and UTF-8, number forms, counts,
// bounded whitespace, $ref and recursion, enum values filtered by their siblings) and the errors
// for schemas it cannot enforce, each naming the keyword.
import { test } from "node:test";
import assert from "node:assert/strict";
import { acceptsValue, MAX_WHITESPACE } from "../src/structured/automaton.js";
import { jsonObjectGrammar, schemaGrammar } from "../src/structured/grammar.js";
import { SchemaError } from "../src/structured/schema.js";

const enc = new TextEncoder();
const accepts = (schema: unknown, doc: string | Uint8Array) => acceptsValue(schemaGrammar(schema).root, typeof doc === "string" ? enc.encode(doc) : doc);

test("objects: required properties always, optional ones may be left out, in declared order, no undeclared keys", () => {
  const s = { type: "object", properties: { a: { type: "integer" }, b: { type: "string" }, c: { type: "boolean" } }, required: ["b"] };
  for (const ok of ['{"b":""}', '{"a":1,"b":"x"}', '{"b":"x","c":true}', '{"a":-3,"b":"","c":false}', '{ "a": 1, "b": "x" }', '{\n  "b": "x"\n}'])
    assert.ok(accepts(s, ok), ok);
  for (const bad of ["{}", '{"a":1}', '{"b":"x","a":1}', '{"b":"x","d":1}', '{"b":"x",}', '{"b":"x"', ' {"b":""}', '{"b":""} ', '{"b" :""}'])
    assert.ok(!accepts(s, bad), bad);
  // required properties not in 'properties' take any value (additionalProperties allows them)
  assert.ok(accepts({ type: "object", required: ["z"] }, '{"z":[1,{"q":null}]}'));
  assert.ok(!accepts({ type: "object", required: ["z"] }, "{}"));
});

test("json_object and schemas without properties: any keys, any values", () => {
  const any = jsonObjectGrammar().root;
  for (const ok of ["{}", '{"x":1}', '{"":{"a":[true,null,"s",1.5e-3]},"y":[]}']) assert.ok(acceptsValue(any, enc.encode(ok)), ok);
  for (const bad of ["[]", '"s"', "1", '{"x"}', '{1:2}']) assert.ok(!acceptsValue(any, enc.encode(bad)), bad);
  assert.ok(accepts({ type: "object", additionalProperties: { type: "integer" } }, '{"a":1,"b":2}'));
  assert.ok(!accepts({ type: "object", additionalProperties: { type: "integer" } }, '{"a":"x"}'));
  assert.ok(accepts({ type: "object", additionalProperties: false }, "{}"));
  assert.ok(!accepts({ type: "object", additionalProperties: false }, '{"a":1}'));
});

test("strings: escapes, no lone surrogates, no raw control characters, valid UTF-8 only, lengths in code points", () => {
  const s = { type: "string", minLength: 1, maxLength: 3 };
  for (const ok of ['"a"', '"日本"', '"\\u00e9"', '"\\n\\t\\""', '"\\/"', '"🎉"', '"\\uD7FF"']) assert.ok(accepts(s, ok), ok);
  for (const bad of ['""', '"abcd"', '"\\ud800"', '"\\uDC00"', '"\\x"', '"a\nb"', "'a'", '"a']) assert.ok(!accepts(s, bad), bad);
  assert.ok(!accepts(s, Uint8Array.of(0x22, 0xc0, 0xaf, 0x22)), "overlong");
  assert.ok(!accepts(s, Uint8Array.of(0x22, 0xed, 0xa0, 0x80, 0x22)), "UTF-8 surrogate");
  assert.ok(!accepts(s, Uint8Array.of(0x22, 0xe6, 0x97, 0x22)), "cut character");
  assert.ok(!accepts(s, Uint8Array.of(0x22, 0xff, 0x22)));
});

test("numbers and integers", () => {
  for (const ok of ["0", "-0", "12", "-7", "1.5", "0.25e-3", "3E+2", "123456789012345"]) assert.ok(accepts({ type: "number" }, ok), ok);
  for (const bad of ["01", "-", "1.", ".5", "+1", "1e", "NaN", "1.5.2", "1234567890123456"]) assert.ok(!accepts({ type: "number" }, bad), bad);
  assert.ok(accepts({ type: "integer" }, "-42"));
  for (const bad of ["1.0", "1e2", "0.5"]) assert.ok(!accepts({ type: "integer" }, bad), bad);
});

test("arrays: items, minItems, maxItems; enum and const; boolean and null; type arrays; anyOf and oneOf", () => {
  const a = { type: "array", items: { type: "integer" }, minItems: 1, maxItems: 2 };
  for (const ok of ["[1]", "[1,2]", "[ 1 , 2 ]"]) assert.ok(accepts(a, ok), ok);
  for (const bad of ["[]", "[1,2,3]", '["x"]', "[1,]"]) assert.ok(!accepts(a, bad), bad);
  const e = { enum: ["a", 'b"c', 3, null, { k: [1] }] };
  for (const ok of ['"a"', '"b\\"c"', "3", "null", '{"k":[1]}']) assert.ok(accepts(e, ok), ok);
  for (const bad of ['"b"', "4", '{"k": [1]}']) assert.ok(!accepts(e, bad), bad);
  assert.ok(accepts({ const: "x" }, '"x"') && !accepts({ const: "x" }, '"y"'));
  assert.ok(accepts({ type: "boolean" }, "false") && !accepts({ type: "boolean" }, "0"));
  assert.ok(accepts({ type: ["string", "null"] }, "null") && accepts({ type: ["string", "null"] }, '"s"') && !accepts({ type: ["string", "null"] }, "1"));
  const alt = { oneOf: [{ type: "object", properties: { t: { const: "a" } }, required: ["t"] }, { type: "object", properties: { t: { const: "b" }, n: { type: "integer" } }, required: ["t", "n"] }] };
  assert.ok(accepts(alt, '{"t":"a"}') && accepts(alt, '{"t":"b","n":1}') && !accepts(alt, '{"t":"b"}') && !accepts(alt, '{"t":"a","n":1}'));
  // enum values the other keywords reject are dropped
  assert.ok(accepts({ type: "string", enum: ["a", 1] }, '"a"') && !accepts({ type: "string", enum: ["a", 1] }, "1"));
  assert.ok(!accepts({ enum: ["abc", "x"], maxLength: 2 }, '"abc"'));
});

test("whitespace inside objects and arrays is bounded, and none around the root", () => {
  assert.ok(accepts({ type: "array" }, `[${" ".repeat(MAX_WHITESPACE)}1]`));
  assert.ok(!accepts({ type: "array" }, `[${" ".repeat(MAX_WHITESPACE + 1)}1]`));
  assert.ok(!accepts({ type: "array" }, " []") && !accepts({ type: "array" }, "[] "));
});

test("$ref to $defs, definitions and the root, recursion through optional properties", () => {
  const list = { $defs: { node: { type: "object", properties: { v: { type: "integer" }, next: { $ref: "#/$defs/node" } }, required: ["v"] } }, $ref: "#/$defs/node" };
  assert.ok(accepts(list, '{"v":1,"next":{"v":2,"next":{"v":3}}}'));
  assert.ok(!accepts(list, '{"v":1,"next":{}}'));
  const tree = { type: "object", properties: { kids: { type: "array", items: { $ref: "#" } } } };
  assert.ok(accepts(tree, '{"kids":[{},{"kids":[{}]}]}'));
  const d7 = { definitions: { "a/b": { type: "string" } }, type: "object", properties: { x: { $ref: "#/definitions/a~1b" } }, required: ["x"] };
  assert.ok(accepts(d7, '{"x":"s"}') && !accepts(d7, '{"x":1}'));
  assert.ok(accepts({ allOf: [{ type: "null" }], title: "t" }, "null"));
  // annotations and unknown keywords are ignored
  assert.ok(accepts({ type: "integer", description: "d", title: "t", default: 3, examples: [1], "x-extra": 1 }, "5"));
});

test("schemas it cannot enforce are errors that name the keyword", () => {
  const cases: [unknown, string | null, RegExp][] = [
    [{ type: "string", pattern: "^a" }, "pattern", /'pattern' is not supported/],
    [{ type: "object", properties: { d: { type: "string", format: "date-time" } } }, "format", /'format'.*properties\/d/],
    [{ type: "integer", minimum: 0 }, "minimum", /'minimum'/],
    [{ not: { type: "null" } }, "not", /'not'/],
    [{ type: "array", uniqueItems: true }, "uniqueItems", /'uniqueItems'/],
    [{ type: "array", items: [{ type: "string" }] }, "items", /tuple form/],
    [{ allOf: [{ type: "string" }, { maxLength: 3 }] }, "allOf", /exactly one schema/],
    [{ anyOf: [{ type: "string" }], maxLength: 3 }, "anyOf", /beside other keywords/],
    [{ $ref: "https://example.com/s.json" }, "$ref", /only local references/],
    [{ $ref: "#/$defs/missing" }, "$ref", /points to nothing/],
    [{ $defs: { a: { $ref: "#/$defs/a" } }, $ref: "#/$defs/a" }, "$ref", /refers to itself/],
    [{ $defs: { a: { anyOf: [{ $ref: "#/$defs/a" }, { type: "null" }] } }, $ref: "#/$defs/a" }, "$ref", /refers to itself/],
    [{ type: "object", properties: { me: { $ref: "#" } }, required: ["me"] }, "$ref", /no finite value/],
    [{ type: "string", minLength: 4, maxLength: 2 }, "minLength", /larger than/],
    [{ type: "integer", enum: ["a"] }, "enum", /no value/],
    [{ type: "object", properties: {}, required: ["x"], additionalProperties: false }, "required", /not in 'properties'/],
    [{ type: "strng" }, "type", /'type' must be/],
    [false, null, /allows no value/],
    [{ type: "string", maxLength: -1 }, "maxLength", /non-negative integer/],
  ];
  for (const [schema, keyword, message] of cases) {
    assert.throws(
      () => schemaGrammar(schema),
      (e: unknown) => e instanceof SchemaError && e.keyword === keyword && message.test(e.message),
      JSON.stringify(schema),
    );
  }
});

test("a schema nested too deep is an error, not a stack overflow", () => {
  let s: Record<string, unknown> = { type: "null" };
  for (let i = 0; i < 10_000; i++) s = { type: "array", items: s };
  assert.throws(() => schemaGrammar(s), (e: unknown) => e instanceof SchemaError && /nested deeper/.test(e.message));
});
