// The built package works from a separate project: `import * as torch from "torchts"`
// resolves to dist/ through package.json "exports", at run time and for the type checker.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, mkdirSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const pkgRoot = fileURLToPath(new URL("../..", import.meta.url));
const distEntry = join(pkgRoot, "dist", "index.js");

function newestMtime(dir: string): number {
  let m = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    m = Math.max(m, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return m;
}

/** `npm run build` unless dist/ is newer than every source file. */
function ensureBuilt(): void {
  if (existsSync(distEntry) && statSync(distEntry).mtimeMs >= newestMtime(join(pkgRoot, "src"))) return;
  const r = spawnSync("npm", ["run", "build", "--silent"], { cwd: pkgRoot, encoding: "utf8" });
  assert.equal(r.status, 0, `npm run build failed:\n${r.stdout}\n${r.stderr}`);
  assert.ok(existsSync(distEntry));
}

function makeConsumer(): string {
  const dir = mkdtempSync(join(tmpdir(), "torchts-consumer-"));
  writeFileSync(
    join(dir, "package.json"),
    JSON.stringify({ name: "consumer", private: true, type: "module", dependencies: { torchts: `file:${pkgRoot}` } }),
  );
  mkdirSync(join(dir, "node_modules"));
  symlinkSync(pkgRoot, join(dir, "node_modules", "torchts"), "dir"); // what `npm install` of a file: dep creates
  return dir;
}

test("consumer: a separate project imports the built package and computes", { timeout: 120_000 }, (t) => {
  ensureBuilt();
  const dir = makeConsumer();
  t.after(() => rmSync(dir, { recursive: true, force: true }));

  writeFileSync(
    join(dir, "main.js"),
    `import * as torch from "torchts";
const a = torch.tensor([[1, 2], [3, 4]], { dtype: torch.float32, requiresGrad: true });
const y = a.matmul(a).sum();
y.backward();
console.log(JSON.stringify({ y: await y.item(), grad: await a.grad.tolist(), s: String(a.detach().t()) }));
`,
  );
  const r = spawnSync(process.execPath, ["main.js"], { cwd: dir, encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  // PyTorch: (a @ a).sum() = 54; grad = ones @ a.T + a.T @ ones = [[7, 11], [9, 13]]
  assert.deepEqual(JSON.parse(r.stdout), {
    y: 54,
    grad: [
      [7, 11],
      [9, 13],
    ],
    s: "tensor([[1., 3.],\n        [2., 4.]])",
  });
});

test("consumer: the published types check in a TypeScript project", { timeout: 120_000 }, (t) => {
  ensureBuilt();
  const dir = makeConsumer();
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(
    join(dir, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        lib: ["ES2022", "ESNext.Disposable"], // Tensor implements Symbol.dispose (`using`)
        module: "NodeNext",
        moduleResolution: "NodeNext",
        strict: true,
        noEmit: true,
        types: [],
      },
      files: ["main.ts"],
    }),
  );
  writeFileSync(
    join(dir, "main.ts"),
    `import * as torch from "torchts";
const x: torch.Tensor = torch.randn(2, 3).relu();
const n: Promise<number> = x.sum().item();
const d: torch.DType = x.dtype;
// @ts-expect-error: shapes are numbers
torch.zeros("2");
export { n, d };
`,
  );
  const tsc = join(
    dirname(createRequire(join(pkgRoot, "package.json")).resolve("typescript/package.json")),
    "bin",
    "tsc",
  );
  const r = spawnSync(process.execPath, [tsc, "-p", dir], { cwd: dir, encoding: "utf8" });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
});
