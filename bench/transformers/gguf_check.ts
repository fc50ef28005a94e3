// Cross-check of the GGUF writer against llama.cpp itself: the golden llama-family checkpoints,
// written by torchts as GGUF (f32 and q8_0), must give llama.cpp the same 16-token greedy
// continuations as transformers.   node --import tsx bench/transformers/gguf_check.ts
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AutoModelForCausalLM, saveGGUF } from "../../packages/torchts/src/transformers/index.js";

const FIX = new URL("../../packages/torchts/test/fixtures/hf/", import.meta.url).pathname;
const { getLlama } = await import("node-llama-cpp");
const llama = await getLlama({ gpu: false, build: "never" });
const dir = mkdtempSync(join(tmpdir(), "torchts-gguf-check-"));
let failures = 0;
try {
  for (const name of ["llama_gqa", "qwen2_tied", "qwen3_qknorm"]) {
    const exp = JSON.parse(readFileSync(join(FIX, name, "expected.json"), "utf8")) as { prompts: { input_ids: number[]; greedy_continuation: number[] }[] };
    const m = await AutoModelForCausalLM.fromPretrained(join(FIX, name));
    for (const type of ["f32", "q8_0"] as const) {
      const file = join(dir, `${name}.${type}.gguf`);
      await saveGGUF(m, file, { type });
      const model = await llama.loadModel({ modelPath: file });
      for (const [i, p] of exp.prompts.entries()) {
        const ctx = await model.createContext({ contextSize: 64 });
        const seq = ctx.getSequence();
        const got: number[] = [];
        for await (const t of seq.evaluate(p.input_ids as never, { temperature: 0 })) {
          got.push(t as number);
          if (got.length >= 16) break;
        }
        await ctx.dispose();
        const same = got.join() === p.greedy_continuation.join();
        const agree = got.findIndex((t, k) => t !== p.greedy_continuation[k]);
        if (!same && type === "f32") failures++;
        console.log(`${name} ${type} prompt ${i}: ${same ? "identical" : `differs from step ${agree}`} ${same ? "" : JSON.stringify(got)}`);
      }
      await model.dispose();
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.exitCode = failures ? 1 : 0;
