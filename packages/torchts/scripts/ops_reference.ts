// Writes docs/ops.md from the op table: every public op with its schema(s) and where it is
// exported. `npm run docs:ops` (repo root) regenerates it; test/ops/docs.test.ts checks it.
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as torch from "../src/index.js";
import { OP_TABLE, type OpDef } from "../src/ops/registry.js";

/** Where an op is exported: torch.x, torch.nn.functional.x, and Tensor.prototype.x (its method form). */
export function exportsOf(def: OpDef): { ns: "torch" | "F" | "Tensor"; name: string }[] {
  const out: { ns: "torch" | "F" | "Tensor"; name: string }[] = [];
  for (const [k, v] of Object.entries(torch)) if (v === def.fn) out.push({ ns: "torch", name: k });
  for (const [k, v] of Object.entries(torch.nn.functional)) if (v === def.fn) out.push({ ns: "F", name: k });
  const P = torch.Tensor.prototype as unknown as Record<string, unknown>;
  // (a descriptor read: some prototype properties are getters)
  for (const k of Object.getOwnPropertyNames(P))
    if (Object.getOwnPropertyDescriptor(P, k)!.value === def.method) out.push({ ns: "Tensor", name: k });
  return out;
}

export function opsReference(): string {
  const defs = [...OP_TABLE.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const lines = [
    "# Op reference",
    "",
    "Generated from the op table (`packages/torchts/src/ops/registry.ts`) by `npm run docs:ops`; do not edit.",
    "Schemas use PyTorch's syntax with torchts's camelCase names (see `packages/torchts/src/ops/README.md`):",
    "positional parameters in this order, or any of them in a trailing options object; those after `*` only there.",
    "",
    `${defs.length} ops.`,
    "",
  ];
  for (const d of defs) {
    const where = exportsOf(d).map((e) => `${e.ns}.${e.name}`);
    lines.push(`### ${d.key}`, "", ...d.schemas.map((s) => `    ${s.text}`), "", where.length ? `Exported as ${where.map((w) => `\`${w}\``).join(", ")}.` : "Not exported.", "");
  }
  return lines.join("\n");
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const out = join(dirname(fileURLToPath(import.meta.url)), "../../../docs/ops.md");
  writeFileSync(out, opsReference());
  console.log(`wrote ${out} (${OP_TABLE.size} ops)`);
}
