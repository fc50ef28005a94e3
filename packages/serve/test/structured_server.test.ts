// Structured output through the server and the official openai SDK, with the tiny random-weight
// model (it knows nothing, so every well-formed result is the constraint's doing): json_schema and
// json_object content that parses and validates, n > 1, /v1/completions, forced tool calls as
// OpenAI's tool_calls (streamed deltas assembled by the SDK's stream helper equal the
// non-streamed call for the same seed), and 400s naming the param for what cannot be served.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import type { ChatCompletionChunk, ChatCompletionTool, ParsedFunctionToolCall } from "openai/resources/chat/completions";
import { load, modelDir } from "./helpers.js";
import { assertOpenAIError } from "./robust_helpers.js";
import { post, startServer, type Running } from "./server_helpers.js";
import { ajv } from "./structured_helpers.js";

let srv: Running;
let openai: OpenAI;
before(async () => {
  const { model, tokenizer } = await load(modelDir());
  srv = await startServer(model, tokenizer, { maxNumSeqs: 4 });
  openai = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60000 });
});
after(async () => {
  await srv.close();
});

const MESSAGES = [{ role: "user" as const, content: "Describe a person." }];
const PERSON = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 8 },
    age: { type: "integer" },
    tags: { type: "array", items: { enum: ["a", "b", 3] }, maxItems: 2 },
    address: { type: "object", properties: { city: { type: "string", minLength: 1 } }, required: ["city"], additionalProperties: false },
  },
  required: ["name", "age", "tags"],
  additionalProperties: false,
};
const validatePerson = ajv().compile(PERSON);
const MAX = 90;

test("response_format json_schema: content parses and validates, streamed and not, for each of n choices; the SDK's parse() reads it", async () => {
  const rf = { type: "json_schema" as const, json_schema: { name: "person", schema: PERSON, strict: true } };
  const r = await openai.chat.completions.create({ model: "tiny-llama", messages: MESSAGES, max_tokens: MAX, seed: 11, n: 2, response_format: rf });
  assert.equal(r.choices.length, 2);
  for (const c of r.choices) {
    const v = JSON.parse(c.message.content!) as unknown;
    assert.ok(validatePerson(v), `${c.message.content}: ${JSON.stringify(validatePerson.errors)}`);
    assert.equal(c.finish_reason, "stop");
  }
  assert.ok(r.usage!.completion_tokens <= 2 * MAX);
  assert.notEqual(r.choices[0]!.message.content, r.choices[1]!.message.content, "two choices, two samples");

  const parsed = await openai.chat.completions.parse({ model: "tiny-llama", messages: MESSAGES, max_tokens: MAX, seed: 12, response_format: rf });
  assert.ok(validatePerson(parsed.choices[0]!.message.parsed));

  const stream = await openai.chat.completions.create({ model: "tiny-llama", messages: MESSAGES, max_tokens: MAX, seed: 11, response_format: rf, stream: true });
  let content = "";
  let finish: string | null = null;
  for await (const ch of stream) {
    content += ch.choices[0]?.delta.content ?? "";
    finish = ch.choices[0]?.finish_reason ?? finish;
  }
  // the same seed as the first choice above: the same document
  assert.equal(content, r.choices[0]!.message.content);
  assert.equal(finish, "stop");
});

test("response_format json_object on chat, and json_schema on /v1/completions", async () => {
  const r = await openai.chat.completions.create({ model: "tiny-llama", messages: MESSAGES, max_tokens: 40, seed: 3, response_format: { type: "json_object" } });
  const v = JSON.parse(r.choices[0]!.message.content!) as unknown;
  assert.ok(typeof v === "object" && v !== null && !Array.isArray(v));
  const schema = { type: "array", items: { type: "boolean" }, minItems: 2, maxItems: 4 };
  const c = await openai.completions.create({ model: "tiny-llama", prompt: "flags:", max_tokens: 40, seed: 4, response_format: { type: "json_schema", json_schema: { name: "flags", schema } } } as OpenAI.CompletionCreateParamsNonStreaming);
  assert.ok(ajv().validate(schema, JSON.parse(c.choices[0]!.text)), c.choices[0]!.text);
});

const WEATHER = { type: "object", properties: { city: { type: "string", maxLength: 10 }, unit: { enum: ["c", "f"] } }, required: ["city", "unit"], additionalProperties: false };
const TIME = { type: "object", properties: { tz: { type: "string", maxLength: 6 }, utc: { type: "boolean" } }, required: ["tz"], additionalProperties: false };
const TOOLS: ChatCompletionTool[] = [
  { type: "function", function: { name: "get_weather", description: "Weather in a city", parameters: WEATHER, strict: true } },
  { type: "function", function: { name: "get_time", parameters: TIME, strict: true } },
];
const PARAMS: Record<string, unknown> = { get_weather: WEATHER, get_time: TIME };

function checkCall(call: { id: string; type: string; function: { name: string; arguments: string } }): void {
  assert.match(call.id, /^call_[0-9a-f]{24}$/);
  assert.equal(call.type, "function");
  assert.ok(call.function.name in PARAMS, call.function.name);
  const args = JSON.parse(call.function.arguments) as unknown;
  assert.ok(ajv().validate(PARAMS[call.function.name]!, args), `${call.function.name}(${call.function.arguments})`);
}

test("tool_choice 'required': one well-formed tool call (content null, finish_reason tool_calls); the stream's deltas give the same call", async () => {
  const body = { model: "tiny-llama", messages: [{ role: "user" as const, content: "Weather?" }], max_tokens: MAX, seed: 21, tools: TOOLS, tool_choice: "required" as const };
  const r = await openai.chat.completions.create(body);
  const c = r.choices[0]!;
  assert.equal(c.finish_reason, "tool_calls");
  assert.equal(c.message.content, null);
  assert.equal(c.message.tool_calls!.length, 1);
  const call = c.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
  checkCall(call);

  // streamed through the SDK's helper, which assembles tool_calls deltas and reports each call's arguments when done
  const chunks: ChatCompletionChunk[] = [];
  const done: { name: string; arguments: string }[] = [];
  const stream = openai.chat.completions.stream({ ...body, stream: true });
  stream.on("chunk", (ch) => chunks.push(ch));
  stream.on("tool_calls.function.arguments.done", (e) => done.push({ name: e.name, arguments: e.arguments }));
  const final = await stream.finalChatCompletion();
  const fc = final.choices[0]!;
  assert.equal(fc.finish_reason, "tool_calls");
  assert.equal(fc.message.content, null);
  const scall = fc.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
  checkCall(scall);
  assert.deepEqual({ name: scall.function.name, arguments: scall.function.arguments }, { name: call.function.name, arguments: call.function.arguments });
  assert.deepEqual(done, [{ name: call.function.name, arguments: call.function.arguments }]);
  // OpenAI's delta shape: the first tool_calls delta names the call (id, type, name, empty arguments), the later ones carry arguments only
  const deltas = chunks.flatMap((ch) => ch.choices[0]?.delta.tool_calls ?? []);
  assert.deepEqual(deltas[0], { index: 0, id: scall.id, type: "function", function: { name: call.function.name, arguments: "" } });
  assert.ok(deltas.length > 2, "arguments come in pieces");
  for (const d of deltas.slice(1)) assert.deepEqual(Object.keys(d).sort(), ["function", "index"]);
  assert.equal(deltas.map((d) => d.function?.arguments ?? "").join(""), call.function.arguments);
  assert.equal(chunks.at(-1)!.choices[0]!.finish_reason, "tool_calls");
});

test("a named tool_choice calls that function; the SDK's parse() reads strict arguments; parallel_tool_calls is accepted", async () => {
  const r = await openai.chat.completions.parse({
    model: "tiny-llama",
    messages: [{ role: "user", content: "Time?" }],
    max_tokens: 60,
    seed: 5,
    tools: TOOLS,
    tool_choice: { type: "function", function: { name: "get_time" } },
    parallel_tool_calls: true,
  });
  const call = r.choices[0]!.message.tool_calls![0]! as ParsedFunctionToolCall;
  assert.equal(call.function.name, "get_time");
  checkCall(call);
  assert.deepEqual(call.function.parsed_arguments, JSON.parse(call.function.arguments));
  // tool_choice 'none' and 'auto' leave the output plain text
  const plain = await openai.chat.completions.create({ model: "tiny-llama", messages: MESSAGES, max_tokens: 5, seed: 5, tools: TOOLS, tool_choice: "none" });
  assert.equal(plain.choices[0]!.message.tool_calls?.length ?? 0, 0);
  assert.notEqual(plain.choices[0]!.finish_reason, "tool_calls");
});

test("400 with the param for what cannot be served", async () => {
  const url = `${srv.url}/v1/chat/completions`;
  const base = { model: "tiny-llama", messages: MESSAGES, max_tokens: 30 };
  const rf = (schema: unknown) => ({ type: "json_schema", json_schema: { name: "s", schema } });
  const cases: [Record<string, unknown>, string, RegExp][] = [
    [{ response_format: rf({ type: "string", pattern: "^a+$" }) }, "response_format", /'pattern' is not supported/],
    [{ response_format: rf({ type: "object", properties: { when: { type: "string", format: "date" } } }) }, "response_format", /'format'/],
    [{ response_format: rf({ $ref: "#/$defs/none" }) }, "response_format", /points to nothing/],
    [{ response_format: { type: "xml" } }, "response_format", /type must be/],
    [{ response_format: { type: "json_schema", json_schema: { schema: {} } } }, "response_format", /json_schema.name/],
    [{ response_format: rf({ type: "object", properties: { a: { type: "string", minLength: 40 } }, required: ["a"] }) }, "max_tokens", /max_tokens too small for the response_format/],
    [{ tools: TOOLS, tool_choice: { type: "function", function: { name: "nope" } } }, "tool_choice", /not in tools/],
    [{ tool_choice: "required" }, "tool_choice", /needs tools/],
    [{ tools: TOOLS, tool_choice: "always" }, "tool_choice", /must be 'none'/],
    [{ tools: [{ type: "function", function: { name: "bad name" } }], tool_choice: "required" }, "tools", /function.name/],
    [{ tools: [TOOLS[0], TOOLS[0]], tool_choice: "required" }, "tools", /used twice/],
    [{ tools: [{ type: "function", function: { name: "f", parameters: { type: "array" } } }], tool_choice: "required" }, "tools", /describe an object/],
    [{ tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: { n: { type: "integer", maximum: 3 } } } } }], tool_choice: "required" }, "tools", /tools\[0\].*'maximum'/],
    [{ tools: TOOLS, tool_choice: "required", parallel_tool_calls: "yes" }, "parallel_tool_calls", /boolean/],
  ];
  for (const [extra, param, message] of cases) {
    const r = await post(url, { ...base, ...extra });
    assert.equal(r.status, 400, `${JSON.stringify(extra)}: ${r.text}`);
    assertOpenAIError(400, r.text, JSON.stringify(extra));
    const e = r.json().error as { message: string; param: string };
    assert.equal(e.param, param, r.text);
    assert.match(e.message, message);
  }
  // the engine is still healthy and serves a constrained request after all that
  const ok = await post(url, { ...base, max_tokens: 20, response_format: { type: "json_object" } });
  assert.equal(ok.status, 200, ok.text);
});
