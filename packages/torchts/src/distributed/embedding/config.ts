// TorchRec's table configuration (torchrec.modules.embedding_configs): EmbeddingBagConfig and
// PoolingType, validated once here so the collections can trust them.
import { bindArgs, describe, intArg } from "../args.js";

/** How a bag's rows are combined (TorchRec's PoolingType; "sum" and "mean" are accepted too). */
export const PoolingType = { SUM: "SUM", MEAN: "MEAN" } as const;
export type PoolingType = (typeof PoolingType)[keyof typeof PoolingType];
export type PoolingName = PoolingType | "sum" | "mean";

export interface EmbeddingBagConfigOptions {
  numEmbeddings: number;
  embeddingDim: number;
  name: string;
  /** The KeyedJaggedTensor keys this table embeds (each gets its own pooled output). */
  featureNames: string[];
  pooling?: PoolingName;
  /** Initial weights are U(weightInitMin, weightInitMax); default ±sqrt(1 / numEmbeddings), TorchRec's. */
  weightInitMax?: number | null;
  weightInitMin?: number | null;
}

const NAMES = ["numEmbeddings", "embeddingDim", "name", "featureNames", "pooling", "weightInitMax", "weightInitMin"];

/**
 * new EmbeddingBagConfig({ numEmbeddings: 1000, embeddingDim: 16, name: "t_user", featureNames: ["user"] })
 * (or positionally: numEmbeddings, embeddingDim, name, featureNames, pooling, with options last).
 */
export class EmbeddingBagConfig {
  readonly numEmbeddings: number;
  readonly embeddingDim: number;
  readonly name: string;
  readonly featureNames: readonly string[];
  readonly pooling: PoolingType;
  readonly weightInitMax: number;
  readonly weightInitMin: number;

  constructor(opts: EmbeddingBagConfigOptions);
  constructor(numEmbeddings: number, embeddingDim: number, name: string, featureNames: string[], pooling?: PoolingName, opts?: Partial<EmbeddingBagConfigOptions>);
  constructor(...args: unknown[]) {
    const fn = "EmbeddingBagConfig";
    const a = bindArgs(fn, NAMES, args);
    this.numEmbeddings = intArg(fn, "numEmbeddings", a.numEmbeddings, 1);
    this.embeddingDim = intArg(fn, "embeddingDim", a.embeddingDim, 1);
    if (typeof a.name !== "string" || !a.name) throw new TypeError(`${fn}(): argument 'name' must be a non-empty string, got ${describe(a.name)}`);
    this.name = a.name;
    const f = a.featureNames;
    if (!Array.isArray(f) || !f.length || f.some((x) => typeof x !== "string" || !x))
      throw new TypeError(`${fn}(): argument 'featureNames' of table '${this.name}' must be a non-empty list of non-empty strings, got ${describe(f)}`);
    const dup = f.find((x, i) => f.indexOf(x) !== i);
    if (dup !== undefined) throw new Error(`${fn}(): table '${this.name}' lists feature '${dup}' twice`);
    this.featureNames = Object.freeze([...(f as string[])]);
    this.pooling = poolingArg(fn, a.pooling, this.name);
    const bound = Math.sqrt(1 / this.numEmbeddings);
    this.weightInitMax = numOr(fn, "weightInitMax", a.weightInitMax, bound);
    this.weightInitMin = numOr(fn, "weightInitMin", a.weightInitMin, -bound);
    if (!(this.weightInitMin <= this.weightInitMax))
      throw new RangeError(`${fn}(): table '${this.name}': weightInitMin (${this.weightInitMin}) must not exceed weightInitMax (${this.weightInitMax})`);
  }
}

function poolingArg(fn: string, v: unknown, table: string): PoolingType {
  if (v === undefined || v === null) return PoolingType.SUM;
  const up = typeof v === "string" ? v.toUpperCase() : v;
  if (up === "SUM" || up === "MEAN") return up;
  throw new TypeError(`${fn}(): table '${table}': pooling must be PoolingType.SUM or PoolingType.MEAN ("sum" | "mean"), got ${describe(v)}`);
}

function numOr(fn: string, name: string, v: unknown, d: number): number {
  if (v === undefined || v === null) return d;
  if (typeof v !== "number" || !Number.isFinite(v)) throw new TypeError(`${fn}(): argument '${name}' must be a finite number, got ${describe(v)}`);
  return v;
}

/** A list of configs (plain option objects are turned into EmbeddingBagConfigs) with unique table and feature names. */
export function tablesArg(fn: string, tables: unknown): EmbeddingBagConfig[] {
  if (!Array.isArray(tables) || !tables.length) throw new TypeError(`${fn}(): argument 'tables' must be a non-empty list of EmbeddingBagConfig, got ${describe(tables)}`);
  const out = tables.map((t) => (t instanceof EmbeddingBagConfig ? t : new EmbeddingBagConfig(t as EmbeddingBagConfigOptions)));
  const names = new Set<string>();
  const owner = new Map<string, string>();
  for (const t of out) {
    if (names.has(t.name)) throw new Error(`${fn}(): two tables are named '${t.name}'`);
    names.add(t.name);
    for (const f of t.featureNames) {
      // each feature's pooled output is one key of the KeyedTensor, so a feature feeds one table
      if (owner.has(f)) throw new Error(`${fn}(): feature '${f}' is listed by tables '${owner.get(f)}' and '${t.name}' (a feature can feed only one table)`);
      owner.set(f, t.name);
    }
  }
  return out;
}
