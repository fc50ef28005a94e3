// OpenAI's structured-output request fields (response_format, tools, tool_choice,
// parallel_tool_calls) checked and turned into a grammar, and the tool-call text the grammar makes
// turned back into OpenAI's tool_calls, whole or as stream deltas.
import { randomUUID } from "node:crypto";
import type { PreTrainedTokenizer } from "torchts/transformers";
import { acceptsValue } from "./automaton.js";
import { jsonObjectGrammar, schemaGrammar } from "./grammar.js";
import { JsonConstraint } from "./json_constraint.js";
import { compileToolCall, SchemaError, ToolSchemaError, type Grammar } from "./schema.js";
import { vocabOf, VocabError } from "./vocab.js";

/** A client mistake in these fields: the server answers 400 with this param. */
export class StructuredRequestError extends Error {
  constructor(
    message: string,
    readonly param: string,
  ) {
    super(message);
  }
}

/** What a request asks for: a grammar, and whether its output is a tool call. */
export interface StructuredSpec {
  grammar: Grammar;
  toolCall: boolean;
}

type Body = Record<string, unknown>;
const isObj = (v: unknown): v is Body => typeof v === "object" && v !== null && !Array.isArray(v);
/** OpenAI's rule for function and schema names. */
const NAME = /^[a-zA-Z0-9_-]{1,64}$/;

function schemaError(e: unknown, param: string, where: string): never {
  if (e instanceof SchemaError) throw new StructuredRequestError(`${where}: ${e.message}`, param);
  throw e;
}

function responseFormat(rf: unknown): Grammar | null {
  if (rf === undefined || rf === null) return null;
  const bad = (m: string): never => {
    throw new StructuredRequestError(`response_format: ${m}`, "response_format");
  };
  if (!isObj(rf)) bad("must be an object");
  const r = rf as Body;
  if (r.type === "text") return null;
  if (r.type === "json_object") return jsonObjectGrammar();
  if (r.type !== "json_schema") return bad(`type must be 'text', 'json_object' or 'json_schema', got ${JSON.stringify(r.type)}`);
  const js = r.json_schema;
  if (!isObj(js)) return bad("type 'json_schema' needs a json_schema object");
  if (typeof js.name !== "string" || !NAME.test(js.name)) bad("json_schema.name must be 1 to 64 letters, digits, '_' or '-'");
  if (js.description !== undefined && js.description !== null && typeof js.description !== "string") bad("json_schema.description must be a string");
  if (js.strict !== undefined && js.strict !== null && typeof js.strict !== "boolean") bad("json_schema.strict must be a boolean");
  if (js.schema !== undefined && js.schema !== null && !isObj(js.schema)) bad("json_schema.schema must be an object");
  try {
    // no schema: any JSON value (OpenAI's schema field is optional)
    return schemaGrammar(js.schema ?? undefined);
  } catch (e) {
    return schemaError(e, "response_format", "response_format.json_schema.schema");
  }
}

interface Tool {
  name: string;
  parameters: unknown;
}

function toolList(tools: unknown): Tool[] {
  if (tools === undefined || tools === null) return [];
  if (!Array.isArray(tools)) throw new StructuredRequestError("tools must be an array", "tools");
  const names = new Set<string>();
  return tools.map((t, i) => {
    const bad = (m: string): never => {
      throw new StructuredRequestError(`tools[${i}]: ${m}`, "tools");
    };
    if (!isObj(t) || t.type !== "function" || !isObj(t.function)) return bad("must be {type: 'function', function: {name, parameters}}");
    const f = t.function;
    if (typeof f.name !== "string" || !NAME.test(f.name)) bad("function.name must be 1 to 64 letters, digits, '_' or '-'");
    if (names.has(f.name as string)) bad(`the function name '${f.name}' is used twice`);
    names.add(f.name as string);
    if (f.description !== undefined && f.description !== null && typeof f.description !== "string") bad("function.description must be a string");
    if (f.strict !== undefined && f.strict !== null && typeof f.strict !== "boolean") bad("function.strict must be a boolean");
    // no parameters: a function that takes none (OpenAI)
    const p = f.parameters ?? { type: "object", properties: {}, additionalProperties: false };
    if (!isObj(p)) return bad("function.parameters must be a JSON Schema object");
    if ("type" in p && p.type !== "object") bad("function.parameters must describe an object (type 'object')");
    // a schema that says nothing of its kind (e.g. only properties) still describes an object
    const shaped = ["type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const"].some((k) => k in p);
    return { name: f.name as string, parameters: shaped ? p : { ...p, type: "object" } };
  });
}

/**
 * The grammar a chat request asks for, or null (plain text). tool_choice 'required' or a named
 * function forces one call; 'auto' and 'none' leave the output plain text. parallel_tool_calls
 * is accepted and the output is one call (which it allows).
 */
export function structuredSpec(b: Body, chat: boolean): StructuredSpec | null {
  if (!chat) {
    if (b.tools !== undefined && b.tools !== null) throw new StructuredRequestError("tools are for /v1/chat/completions", "tools");
    const g = responseFormat(b.response_format);
    return g && { grammar: g, toolCall: false };
  }
  const tools = toolList(b.tools);
  const ptc = b.parallel_tool_calls;
  if (ptc !== undefined && ptc !== null && typeof ptc !== "boolean") throw new StructuredRequestError("parallel_tool_calls must be a boolean", "parallel_tool_calls");
  const tc = b.tool_choice ?? (tools.length ? "auto" : "none");
  let forced: Tool[] = [];
  if (tc === "required") {
    if (!tools.length) throw new StructuredRequestError("tool_choice 'required' needs tools", "tool_choice");
    forced = tools;
  } else if (isObj(tc)) {
    const name = isObj(tc.function) ? tc.function.name : undefined;
    if (tc.type !== "function" || typeof name !== "string") throw new StructuredRequestError("tool_choice must be 'none', 'auto', 'required' or {type: 'function', function: {name}}", "tool_choice");
    const t = tools.find((x) => x.name === name);
    if (!t) throw new StructuredRequestError(`tool_choice names the function '${name}', which is not in tools`, "tool_choice");
    forced = [t];
  } else if (tc !== "auto" && tc !== "none") throw new StructuredRequestError("tool_choice must be 'none', 'auto', 'required' or {type: 'function', function: {name}}", "tool_choice");
  if (forced.length) {
    try {
      return { grammar: compileToolCall(forced, acceptsValue), toolCall: true };
    } catch (e) {
      if (e instanceof ToolSchemaError) throw new StructuredRequestError(`tools[${tools.indexOf(forced[e.tool]!)}].function.parameters: ${e.message}`, "tools");
      throw e;
    }
  }
  const g = responseFormat(b.response_format);
  return g && { grammar: g, toolCall: false };
}

/** A fresh constraint of the spec over the tokenizer's vocabulary (one per choice). */
export function makeConstraint(spec: StructuredSpec, tok: PreTrainedTokenizer, eos: readonly number[]): JsonConstraint {
  try {
    return new JsonConstraint(spec.grammar, vocabOf(tok), eos);
  } catch (e) {
    if (e instanceof VocabError) throw new StructuredRequestError(e.message, spec.toolCall ? "tools" : "response_format");
    throw e;
  }
}

/** A tool call's id, as OpenAI writes them. */
export const toolCallId = () => `call_${randomUUID().replace(/-/g, "").slice(0, 24)}`;

// {"name": "NAME", "arguments": ARGS} as the tool grammar writes it (names need no escapes), up to ARGS's first byte
const HEAD = /^\{\s*"name":\s*"([a-zA-Z0-9_-]+)"\s*,\s*"arguments":\s*(?=\S)/;

/**
 * Reads the tool grammar's output as it arrives: the function name once it is whole, then the
 * arguments' text (exactly as generated, without the closing brace of the outer object).
 */
export class ToolCallReader {
  private text = "";
  name: string | null = null;
  private argsAt = -1;
  /** End of the arguments (exclusive) once they are closed. */
  private argsEnd = -1;
  private scan = 0;
  private depth = 0;
  private inString = false;
  private escaped = false;
  private sent = 0;

  /** Add text; returns the name when it has just become known and the new arguments text. */
  push(delta: string): { name: string | null; args: string } {
    this.text += delta;
    let name: string | null = null;
    if (this.argsAt < 0) {
      const m = HEAD.exec(this.text);
      if (!m) return { name: null, args: "" };
      this.name = name = m[1]!;
      this.argsAt = this.scan = this.sent = m[0].length;
    }
    const t = this.text;
    for (; this.argsEnd < 0 && this.scan < t.length; this.scan++) {
      const ch = t[this.scan]!;
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (ch === "\\") this.escaped = true;
        else if (ch === '"') this.inString = false;
      } else if (ch === '"') this.inString = true;
      else if (ch === "{" || ch === "[") this.depth++;
      else if (ch === "}" || ch === "]") {
        if (--this.depth === 0) this.argsEnd = this.scan + 1;
      }
    }
    const upTo = this.argsEnd >= 0 ? this.argsEnd : t.length;
    const args = t.slice(this.sent, upTo);
    this.sent = upTo;
    return { name, args };
  }

  /** The call, once the whole text is a JSON object with the name and closed arguments; else null. */
  result(): { name: string; arguments: string } | null {
    let whole: { arguments?: unknown };
    try {
      whole = JSON.parse(this.text) as { arguments?: unknown };
    } catch {
      return null;
    }
    if (this.name === null) return null;
    // arguments that are not an object or array (a parameters anyOf may allow that) have no closing bracket to find
    return { name: this.name, arguments: this.argsEnd >= 0 ? this.text.slice(this.argsAt, this.argsEnd) : JSON.stringify(whole.arguments) };
  }
}

/** The tool call in a whole output text, or null when it is not one (cut short by max_tokens or a stop string). */
export function parseToolCall(text: string): { name: string; arguments: string } | null {
  const r = new ToolCallReader();
  r.push(text);
  return r.result();
}
