#!/usr/bin/env node
// Builds the optional native bridge (native/blas.c with torchts' AVX-512 GEMM, attention (long and decode queries) and int8
// GEMM, native/*_avx512.c, and its AVX2 GEMM and int8 GEMV, native/gemm_avx2.c, qgemv_avx2.c -> build/native/torchts_blas.node) with
// the system C compiler against the headers of the running Node. Runs at install; a machine
// without a compiler or headers just keeps the wasm GEMM (the reason is printed, the install
// goes on; TORCHTS_REQUIRE_BLAS=1, as CI sets, then makes the missing bridge a test failure).
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, renameSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const headers = [join(dirname(process.execPath), "..", "include", "node"), "/usr/include/node", "/usr/local/include/node"].find((d) =>
  existsSync(join(d, "node_api.h")),
);
const cc = process.env.CC || "cc";
const out = join(root, "build", "native", "torchts_blas.node");

function fail(why) {
  console.warn(`torchts: native BLAS bridge not built (${why}); float32 products use the wasm GEMM`);
  process.exit(0);
}

if (process.platform === "win32") fail("Windows is not supported by the bridge yet");
if (!headers) fail("Node's headers (node_api.h) were not found");
mkdirSync(dirname(out), { recursive: true });
const tmp = `${out}.${process.pid}.tmp`;
try {
  execFileSync(
    cc,
    ["-O2", "-ffp-contract=off", "-shared", "-fPIC", "-DNODE_GYP_MODULE_NAME=torchts_blas", `-I${headers}`, join(root, "native", "blas.c"), join(root, "native", "gemm_avx512.c"), join(root, "native", "gemm_avx2.c"), join(root, "native", "qgemv_avx2.c"), join(root, "native", "qgemv_avx512.c"), join(root, "native", "sgemv_avx512.c"), join(root, "native", "attention_avx512.c"), join(root, "native", "attention_decode_avx512.c"), join(root, "native", "w8a8_avx512.c"), join(root, "native", "im2col.c"), join(root, "native", "thread_scratch.c"), "-o", tmp, "-ldl", "-lm", "-lpthread"],
    { stdio: ["ignore", "inherit", "inherit"] },
  );
} catch (e) {
  fail(`${cc} failed: ${e.message.split("\n")[0]}`);
}
renameSync(tmp, out); // a half-written addon is never loaded
console.log(`torchts: built ${out}`);
