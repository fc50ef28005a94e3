// Local datasets as one token stream: each document is <bos> tokens <eos> (TorchTitan's
// encode(add_bos=True, add_eos=True)), documents concatenated in file order. A .txt file is one
// document; a .jsonl file has one document per line (its text field). The stream is cached per
// (file contents, tokenizer) under the torchts cache folder, since tokenizing a corpus takes seconds.
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { extname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { PreTrainedTokenizer } from "torchts/transformers";

/** Datasets shipped with the package, by name. */
export const BUILTIN_DATASETS: Record<string, string> = {
  tinyshakespeare: fileURLToPath(new URL("../../assets/tinyshakespeare.txt", import.meta.url)),
};

export class DatasetError extends Error {}

/** The file a (dataset, dataset_path) pair names. */
export function datasetFile(dataset: string, datasetPath: string): string {
  if (datasetPath) return datasetPath;
  const builtin = BUILTIN_DATASETS[dataset];
  if (builtin) return builtin;
  const ext = extname(dataset).toLowerCase();
  if (ext === ".txt" || ext === ".jsonl") return dataset;
  throw new DatasetError(`training.dataset: '${dataset}' is neither a built-in dataset (${Object.keys(BUILTIN_DATASETS).join(", ")}) nor a .txt / .jsonl file`);
}

/** The documents of a .txt (one) or .jsonl (one per line, field `textField`) file. */
export function readDocuments(file: string, textField = "text"): string[] {
  let raw: string;
  try {
    raw = readFileSync(file, "utf8");
  } catch (e) {
    throw new DatasetError(`training.dataset: cannot read ${file}: ${(e as Error).message}`);
  }
  const ext = extname(file).toLowerCase();
  if (ext !== ".jsonl") return [raw];
  const docs: string[] = [];
  raw.split("\n").forEach((line, i) => {
    if (!line.trim()) return;
    let obj: unknown;
    try {
      obj = JSON.parse(line);
    } catch (e) {
      throw new DatasetError(`${file}:${i + 1}: not JSON: ${(e as Error).message}`);
    }
    const text = (obj as Record<string, unknown> | null)?.[textField];
    if (typeof text !== "string") throw new DatasetError(`${file}:${i + 1}: field '${textField}' is not a string (training.dataset_text_field)`);
    docs.push(text);
  });
  if (!docs.length) throw new DatasetError(`${file}: no documents`);
  return docs;
}

function cacheDir(): string {
  const base = process.env.TORCHTS_CACHE_DIR ?? (process.env.XDG_CACHE_HOME ? join(process.env.XDG_CACHE_HOME, "torchts") : join(homedir(), ".cache", "torchts"));
  return join(base, "train-tokens");
}

/** <bos> doc <eos> for every document, concatenated (bos/eos skipped when the tokenizer has none). */
export function tokenizeDocuments(docs: string[], tok: PreTrainedTokenizer): Uint32Array {
  const parts: number[][] = [];
  let n = 0;
  for (const d of docs) {
    const ids = tok.encode(d, { addSpecialTokens: false });
    const withSpecials = [...(tok.bosTokenId !== null ? [tok.bosTokenId] : []), ...ids, ...(tok.eosTokenId !== null ? [tok.eosTokenId] : [])];
    parts.push(withSpecials);
    n += withSpecials.length;
  }
  const out = new Uint32Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** The token stream of `file` (cached on disk by content hash of the file and the tokenizer). */
export function loadTokenStream(file: string, tok: PreTrainedTokenizer, textField = "text"): Uint32Array {
  const docs = readDocuments(file, textField);
  const h = createHash("sha256");
  h.update(JSON.stringify(tok.tokenizerJson));
  h.update(`\0${textField}\0`);
  for (const d of docs) h.update(d).update("\0");
  const key = h.digest("hex").slice(0, 32);
  const path = join(cacheDir(), `${key}.u32`);
  try {
    const b = readFileSync(path);
    if (b.byteLength % 4 === 0) return new Uint32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
  } catch {
    /* not cached yet */
  }
  const tokens = tokenizeDocuments(docs, tok);
  try {
    mkdirSync(cacheDir(), { recursive: true });
    const tmp = `${path}.${process.pid}.tmp`;
    writeFileSync(tmp, tokens);
    renameSync(tmp, path); // atomic: concurrent ranks may write the same entry
  } catch {
    /* a read-only cache is not an error */
  }
  return tokens;
}
