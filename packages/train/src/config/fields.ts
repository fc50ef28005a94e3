// A typed schema for TorchTitan-style job configs: sections of keys, each with a type, a default,
// a help line and its own checks. The parsed config's TypeScript type is inferred from the schema, so
// a key the trainer reads is a key the parser knows (and validates).

export type Kind = "int" | "float" | "bool" | "string" | "string[]";

export interface Field<T> {
  kind: Kind;
  default: T;
  help: string;
  /** Allowed values of a string field. */
  choices?: readonly string[];
  /** An error message when the value is out of range, else null. */
  check?: (v: T) => string | null;
}

type Opts<T> = { choices?: readonly string[]; check?: (v: T) => string | null };

export const int = (d: number, help: string, o: Opts<number> & { min?: number } = {}): Field<number> => ({
  kind: "int",
  default: d,
  help,
  check: (v) => (o.min !== undefined && v < o.min ? `must be >= ${o.min}` : (o.check?.(v) ?? null)),
});
export const float = (d: number, help: string, o: Opts<number> & { min?: number; max?: number } = {}): Field<number> => ({
  kind: "float",
  default: d,
  help,
  check: (v) => (o.min !== undefined && v < o.min ? `must be >= ${o.min}` : o.max !== undefined && v > o.max ? `must be <= ${o.max}` : (o.check?.(v) ?? null)),
});
export const bool = (d: boolean, help: string): Field<boolean> => ({ kind: "bool", default: d, help });
export const str = <S extends string = string>(d: NoInfer<S>, help: string, o: { choices?: readonly S[] } = {}): Field<S> => ({ kind: "string", default: d, help, choices: o.choices });
export const strList = (d: string[], help: string): Field<string[]> => ({ kind: "string[]", default: d, help });

export type Schema = Record<string, Record<string, Field<any>>>;
/** The parsed config a schema describes: section -> key -> value. */
export type ConfigOf<S extends Schema> = { [Sec in keyof S]: { [K in keyof S[Sec]]: S[Sec][K] extends Field<infer T> ? T : never } };
