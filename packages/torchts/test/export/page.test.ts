// examples/export in headless Chromium: the page classifies its image with ResNet-18 converted by
// torchts, as .tflite in LiteRT.js and as .onnx in onnxruntime-web. The numbers it shows must be
// torchts's logits for the same pixels (within 1e-4), the top-1 the same; a screenshot is taken.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as torch from "../../src/index.js";
import { prepareModels } from "../../../../examples/export/prepare.js";
import { decode } from "../../../../examples/export/host_tensor.js";
import type { DemoResult } from "../../../../examples/export/main.js";
import { haveChromium, openRuntimes } from "./browser.js";
import { resnet18 } from "./models.js";

const skip = haveChromium ? false : "no Chromium (set TORCHTS_CHROMIUM)";

test("examples/export: the page's LiteRT.js and onnxruntime-web results are torchts's, and it renders them", { skip, timeout: 180_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "torchts-page-"));
  await prepareModels(dir);
  const rt = await openRuntimes(dir);
  try {
    const { page, url } = rt;
    await page.goto(`${url}?demo&seed=3`);
    await page.waitForFunction(() => (window as unknown as { __demo?: unknown }).__demo !== undefined, null, { timeout: 120_000 });
    const r = (await page.evaluate(() => (window as unknown as { __demo: unknown }).__demo)) as DemoResult & { error?: string };
    assert.equal(r.error, undefined, `page error: ${r.error}\n${rt.logs.slice(-5).join("\n")}`);
    const x = torch.tensor(Array.from(decode({ ...r.input, dtype: "float32" }) as Float32Array)).reshape(r.input.shape);
    const c = await resnet18();
    const want = (await torch.noGrad(() => (c.module as unknown as { forward(x: torch.Tensor): torch.Tensor }).forward(x)).reshape([-1]).tolist()) as number[];
    const diff = (got: number[]) => Math.max(...got.map((v, i) => Math.abs(v - want[i]!)));
    assert.ok(diff(r.tflite) < 1e-4, `LiteRT.js logits ${diff(r.tflite)} from torchts`);
    assert.ok(diff(r.onnx) < 1e-4, `onnxruntime-web logits ${diff(r.onnx)} from torchts`);
    const top = want.indexOf(Math.max(...want));
    assert.deepEqual(r.top1, { tflite: top, onnx: top });
    const text = (await page.textContent("#out")) ?? "";
    assert.match(text, new RegExp(`top-1: LiteRT\\.js class ${top}, onnxruntime-web class ${top}`));
    // the table shows each class's logits as the runtimes returned them
    for (let k = 0; k < 10; k++) assert.match(text, new RegExp(`class ${k} .* ${r.tflite[k]!.toFixed(5).replace(".", "\\.").replace("-", "\\-")} `));
    const shot = join(dir, "page.png");
    await page.screenshot({ path: shot, fullPage: true });
    assert.ok(statSync(shot).size > 10_000, "the screenshot has the rendered image and results");
    if (process.env.TORCHTS_SCREENSHOT) await page.screenshot({ path: process.env.TORCHTS_SCREENSHOT, fullPage: true });
  } finally {
    await rt.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
