// All samples: every test/ops/opinfo/<family>.ts exports OPINFO; a key defined twice is an error.
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { OpInfos } from "./types.js";

const here = dirname(fileURLToPath(import.meta.url));
const files = readdirSync(here)
  .filter((f) => f.endsWith(".ts") && f !== "index.ts" && f !== "types.ts")
  .sort();
export const ALL_OPINFOS: OpInfos = {};
for (const f of files) {
  const m = (await import(pathToFileURL(join(here, f)).href)) as { OPINFO?: OpInfos };
  if (!m.OPINFO) throw new Error(`test/ops/opinfo/${f} exports no OPINFO`);
  for (const [k, v] of Object.entries(m.OPINFO)) {
    if (k in ALL_OPINFOS) throw new Error(`opinfo: '${k}' has samples in two files (${f})`);
    ALL_OPINFOS[k] = v;
  }
}
