// Job config = schema defaults, then the TOML file, then `--section.key value` overrides (TorchTitan's
// precedence). Every key is checked: an unknown section or key, a wrong type or an out-of-range value
// is a ConfigError that names the key and where it came from (file:line or the command-line flag).
import { parse as parseToml, TomlError } from "smol-toml";
import type { ConfigOf, Field, Schema } from "./fields.js";

export class ConfigError extends Error {}

/** Edit distance, for "did you mean" hints. */
function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...new Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++)
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
  return d[a.length]![b.length]!;
}

function suggest(name: string, known: string[]): string {
  let best: string | null = null;
  let bestD = Infinity;
  for (const k of known) {
    const dd = distance(name, k);
    if (dd < bestD) [best, bestD] = [k, dd];
  }
  return best !== null && bestD <= Math.max(2, Math.floor(name.length / 2)) ? ` (did you mean '${best}'?)` : "";
}

/** The 1-based line of `key` in `[section]` of a TOML text (0 when not found). */
function lineOf(text: string, section: string, key?: string): number {
  const lines = text.split(/\r?\n/);
  let cur = "";
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i]!.trim();
    const h = /^\[\s*([^\]]+?)\s*\]/.exec(l);
    if (h) {
      cur = h[1]!;
      if (key === undefined && cur === section) return i + 1;
      continue;
    }
    if (key !== undefined && cur === section && new RegExp(`^["']?${key.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}["']?\\s*=`).test(l)) return i + 1;
  }
  return 0;
}

function typeName(v: unknown): string {
  if (Array.isArray(v)) return "an array";
  if (v === null) return "null";
  if (typeof v === "object") return "a table";
  return `a ${typeof v}`;
}

/** A TOML value checked against its field (null when it fits, else what is wrong). */
function fromToml(f: Field<unknown>, v: unknown): { value?: unknown; error?: string } {
  switch (f.kind) {
    case "int":
      if (typeof v === "number" && Number.isSafeInteger(v)) return { value: v };
      return { error: `expected an integer, got ${typeof v === "number" ? v : typeName(v)}` };
    case "float":
      if (typeof v === "number" && Number.isFinite(v)) return { value: v };
      return { error: `expected a number, got ${typeName(v)}` };
    case "bool":
      if (typeof v === "boolean") return { value: v };
      return { error: `expected true or false, got ${typeName(v)}` };
    case "string":
      if (typeof v === "string") return { value: v };
      return { error: `expected a string, got ${typeName(v)}` };
    case "string[]":
      if (Array.isArray(v) && v.every((x) => typeof x === "string")) return { value: [...v] };
      return { error: `expected an array of strings, got ${typeName(v)}` };
  }
}

/** A command-line string converted to its field's type. */
function fromFlag(f: Field<unknown>, s: string): { value?: unknown; error?: string } {
  switch (f.kind) {
    case "int":
      if (/^[-+]?\d+$/.test(s.trim()) && Number.isSafeInteger(Number(s))) return { value: Number(s) };
      return { error: `expected an integer, got '${s}'` };
    case "float": {
      const n = Number(s);
      if (s.trim() !== "" && Number.isFinite(n)) return { value: n };
      return { error: `expected a number, got '${s}'` };
    }
    case "bool":
      if (s === "true" || s === "1") return { value: true };
      if (s === "false" || s === "0") return { value: false };
      return { error: `expected true or false, got '${s}'` };
    case "string":
      return { value: s };
    case "string[]":
      return { value: s === "" ? [] : s.split(",").map((x) => x.trim()) };
  }
}

function validate(f: Field<unknown>, v: unknown): string | null {
  if (f.choices && !f.choices.includes(v as string)) return `must be one of ${f.choices.map((c) => `'${c}'`).join(", ")}, got '${String(v)}'`;
  return f.check ? f.check(v) : null;
}

export interface ParsedArgs {
  /** `--section.key value` pairs in order. */
  overrides: [string, string][];
  /** Other `--flag value` arguments (e.g. --config); boolean flags map to "true". */
  flags: Map<string, string>;
  help: boolean;
}

/**
 * Split argv into `--section.key value` overrides and the other flags. A dotted flag's value may be
 * given as `--a.b=v`; a bool key given alone (`--compile.enable`) means true.
 */
export function splitArgs<S extends Schema>(schema: S, argv: string[], flagNames: readonly string[], boolFlags: readonly string[] = []): ParsedArgs {
  const overrides: [string, string][] = [];
  const flags = new Map<string, string>();
  let help = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "-h" || a === "--help") {
      help = true;
      continue;
    }
    if (!a.startsWith("--")) throw new ConfigError(`unexpected argument '${a}' (options are --config FILE and --section.key value)`);
    const eq = a.indexOf("=");
    const name = a.slice(2, eq < 0 ? undefined : eq);
    let value: string | undefined = eq < 0 ? undefined : a.slice(eq + 1);
    const dotted = name.includes(".");
    if (!dotted && boolFlags.includes(name)) {
      if (value !== undefined && value !== "true" && value !== "false") throw new ConfigError(`option '--${name}' takes no value`);
      flags.set(name, value ?? "true");
      continue;
    }
    if (!dotted && !flagNames.includes(name)) throw new ConfigError(`unknown option '--${name}'${suggest(name, [...flagNames, ...boolFlags])}`);
    if (value === undefined) {
      const next = argv[i + 1];
      const [sec, key] = name.split(".", 2) as [string, string];
      const isBool = dotted && schema[sec]?.[key]?.kind === "bool";
      if (next === undefined || (isBool && next.startsWith("--"))) {
        if (!isBool) throw new ConfigError(`option '--${name}' needs a value`);
        value = "true";
      } else value = argv[++i]!;
    }
    if (dotted) overrides.push([name, value]);
    else flags.set(name, value);
  }
  return { overrides, flags, help };
}

/** Defaults, then `toml` (named `source` in errors), then the overrides. */
export function buildConfig<S extends Schema>(schema: S, toml: string | null, source: string, overrides: [string, string][] = []): ConfigOf<S> {
  const out: Record<string, Record<string, unknown>> = {};
  for (const [sec, fields] of Object.entries(schema)) {
    out[sec] = {};
    for (const [k, f] of Object.entries(fields)) out[sec]![k] = structuredClone(f.default);
  }
  const sections = Object.keys(schema);
  if (toml !== null) {
    let doc: Record<string, unknown>;
    try {
      doc = parseToml(toml) as Record<string, unknown>;
    } catch (e) {
      if (e instanceof TomlError) throw new ConfigError(`${source}:${e.line}:${e.column}: ${e.message.split("\n")[0]}`);
      throw e;
    }
    for (const [sec, table] of Object.entries(doc)) {
      const fields = schema[sec];
      if (!fields) throw new ConfigError(`${source}:${lineOf(toml, sec)}: unknown section [${sec}]${suggest(sec, sections)}; sections are ${sections.map((s) => `[${s}]`).join(", ")}`);
      if (table === null || typeof table !== "object" || Array.isArray(table)) throw new ConfigError(`${source}: '${sec}' must be a table ([${sec}])`);
      for (const [k, v] of Object.entries(table as Record<string, unknown>)) {
        const f = fields[k];
        const at = `${source}:${lineOf(toml, sec, k)}`;
        if (!f) throw new ConfigError(`${at}: unknown key '${sec}.${k}'${suggest(k, Object.keys(fields))}`);
        const r = fromToml(f, v);
        if (r.error) throw new ConfigError(`${at}: ${sec}.${k}: ${r.error}`);
        const bad = validate(f, r.value);
        if (bad) throw new ConfigError(`${at}: ${sec}.${k} ${bad}`);
        out[sec]![k] = r.value;
      }
    }
  }
  for (const [name, s] of overrides) {
    const dot = name.indexOf(".");
    const [sec, k] = [name.slice(0, dot), name.slice(dot + 1)];
    const fields = schema[sec];
    if (!fields) throw new ConfigError(`--${name}: unknown section '${sec}'${suggest(sec, sections)}`);
    const f = fields[k];
    if (!f) throw new ConfigError(`--${name}: unknown key '${name}'${suggest(k, Object.keys(fields)).replace("'", `'${sec}.`)}`);
    const r = fromFlag(f, s);
    if (r.error) throw new ConfigError(`--${name}: ${r.error}`);
    const bad = validate(f, r.value);
    if (bad) throw new ConfigError(`--${name} ${bad}`);
    out[sec]![k] = r.value;
  }
  return out as ConfigOf<S>;
}

/** `[section]` / `key = default  # help` lines: the --help text and a starting config. */
export function describeSchema(schema: Schema): string {
  const lines: string[] = [];
  for (const [sec, fields] of Object.entries(schema)) {
    lines.push(`[${sec}]`);
    for (const [k, f] of Object.entries(fields)) {
      const d = JSON.stringify(f.default);
      const choices = f.choices ? ` (${f.choices.join(" | ")})` : "";
      lines.push(`  ${k} = ${d}${" ".repeat(Math.max(1, 34 - k.length - d.length))}# ${f.help}${choices}`);
    }
  }
  return lines.join("\n");
}
