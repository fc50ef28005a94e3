// The grammars structured output offers: a JSON Schema's (response_format json_schema, a tool's
// parameters) and any JSON object (response_format json_object).
import { acceptsValue } from "./automaton.js";
import { compileSchema, type Grammar } from "./schema.js";

/** The grammar of a JSON Schema (undefined: any JSON value). Throws SchemaError naming the keyword it cannot enforce. */
export function schemaGrammar(schema: unknown): Grammar {
  return compileSchema(schema, acceptsValue);
}

/** Any JSON object. */
export function jsonObjectGrammar(): Grammar {
  return compileSchema(undefined, acceptsValue, { anyObject: true });
}
