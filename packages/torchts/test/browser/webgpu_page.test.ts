// examples/browser in headless Chromium (WebGPU on SwiftShader): the page must run its tensor
// program on webgpu and show numbers equal to the same program on cpu here.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import * as torch from "../../src/index.js";
import { serve } from "../../../../examples/browser/build.js";
import { program, type ProgramResult } from "../../../../examples/browser/program.js";

const chromium = process.env.TORCHTS_CHROMIUM ?? "/usr/bin/chromium";
const required = process.env.TORCHTS_REQUIRE_WEBGPU === "1";
const skip = !required && !existsSync(chromium) ? `no Chromium at ${chromium} (set TORCHTS_CHROMIUM)` : false;

test("examples/browser runs on WebGPU in headless Chromium and matches cpu", { skip, timeout: 120_000 }, async () => {
  const { chromium: pw } = await import("playwright-core");
  const { server, url } = await serve();
  // a browser that fails to start must not leave the server holding the test process open
  const browser = await pw
    .launch({
      executablePath: chromium,
      headless: false, // the flag below selects Chrome's new headless mode, which has WebGPU
      args: ["--headless=new", "--enable-unsafe-webgpu", "--no-sandbox", "--disable-gpu-sandbox"],
    })
    .catch((e: unknown) => {
      server.close();
      throw e;
    });
  try {
    const page = await browser.newPage();
    const logs: string[] = [];
    page.on("console", (m) => logs.push(m.text()));
    page.on("pageerror", (e) => logs.push(String(e)));
    await page.goto(url);
    await page.waitForFunction(() => (window as unknown as { __torchts?: unknown }).__torchts !== undefined, null, { timeout: 90_000 });
    const got = (await page.evaluate(() => (window as unknown as { __torchts: unknown }).__torchts)) as ProgramResult & { error?: string; reason?: string };
    assert.equal(got.error, undefined, `page error: ${got.error}\n${logs.join("\n")}`);
    assert.equal(got.device, "webgpu", `the page fell back to cpu: ${got.reason}`);
    const text = await page.textContent("#out");
    assert.match(text ?? "", /device: webgpu/);
    const want = await program(torch, "cpu");
    const close = (a: number, b: number) => Math.abs(a - b) <= 1e-5 + 1e-4 * Math.abs(b);
    assert.ok(close(got.loss0, want.loss0), `loss0 ${got.loss0} vs cpu ${want.loss0}`);
    assert.ok(close(got.loss1, want.loss1), `loss1 ${got.loss1} vs cpu ${want.loss1}`);
    assert.ok(want.loss1 < want.loss0, "the SGD step lowers the loss");
    assert.equal(got.probs.length, want.probs.length);
    got.probs.forEach((p, i) => assert.ok(close(p, want.probs[i]!), `probs[${i}] ${p} vs cpu ${want.probs[i]}`));
  } finally {
    await browser.close();
    server.close();
  }
});
