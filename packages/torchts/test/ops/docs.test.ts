// docs/ops.md is generated from the op table (`npm run docs:ops`), so the reference a user reads
// is the schema the binder enforces. This test fails when the two differ.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import "../../src/index.js";
import { opsReference } from "../../scripts/ops_reference.js";

const file = join(dirname(fileURLToPath(import.meta.url)), "../../../../docs/ops.md");

test("docs/ops.md is the op table (regenerate with npm run docs:ops)", () => {
  assert.equal(readFileSync(file, "utf8"), opsReference(), "docs/ops.md is stale: run `npm run docs:ops`");
});
