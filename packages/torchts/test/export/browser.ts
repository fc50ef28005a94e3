// Headless Chromium (playwright-core, /usr/bin/chromium) on the examples/export page: runs
// .tflite files with LiteRT.js and .onnx files with onnxruntime-web from a models folder.
import { existsSync } from "node:fs";
import type { Browser, Page } from "playwright-core";
import * as torch from "../../src/index.js";
import type { Tensor } from "../../src/index.js";
import { serve } from "../../../../examples/export/build.js";
import { decode, encode, type HostDtype, type HostTensor } from "../../../../examples/export/host_tensor.js";
import type { Run } from "../../../../examples/export/runtimes.js";

export const chromiumPath = process.env.TORCHTS_CHROMIUM ?? "/usr/bin/chromium";
export const haveChromium = existsSync(chromiumPath);

export interface BrowserRuntimes {
  page: Page;
  url: string;
  logs: string[];
  /** run a .tflite: each run's signature (null: the default) and inputs (int64 is sent as int32) */
  tflite(file: string, runs: { signature?: string | null; inputs: Tensor[] }[]): Promise<Tensor[][]>;
  onnx(file: string, inputSets: Tensor[][]): Promise<Tensor[][]>;
  close(): Promise<void>;
}

/** A torchts tensor as the page takes it (int64 as int32 for LiteRT, which has no int64 inputs). */
export function toHost(t: Tensor, dtype?: HostDtype): HostTensor {
  const d: HostDtype = dtype ?? (t.dtype === "float32" ? "float32" : t.dtype === "bool" ? "bool" : "int64");
  const host = t.contiguous()._contiguousHost() as ArrayLike<number>;
  const a = d === "float32" ? Float32Array.from(host) : d === "int32" ? Int32Array.from(host) : d === "int64" ? BigInt64Array.from(Array.from(host, (v) => BigInt(v))) : Uint8Array.from(host);
  return encode(a, t.shape, d);
}

export function fromHost(h: HostTensor): Tensor {
  const a = decode(h);
  const data = a instanceof BigInt64Array ? Array.from(a, Number) : Array.from(a as ArrayLike<number>);
  return torch.tensor(data, { dtype: h.dtype === "float32" ? "float32" : "int64" }).reshape(h.shape);
}

/** Start the page on a folder of models; close() stops the browser and the server. */
export async function openRuntimes(models: string): Promise<BrowserRuntimes> {
  const { chromium } = await import("playwright-core");
  const { server, url } = await serve(models);
  let browser: Browser;
  try {
    browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox"] });
  } catch (e) {
    server.close();
    throw e;
  }
  const page = await browser.newPage();
  const logs: string[] = [];
  page.on("console", (m) => logs.push(m.text()));
  page.on("pageerror", (e) => logs.push(String(e)));
  await page.goto(url);
  await page.waitForFunction(() => (window as unknown as { __runtimes?: unknown }).__runtimes !== undefined, null, { timeout: 60_000 });
  const call = async (fn: "runTflite" | "runOnnx", file: string, sets: Run[]) => {
    const r = await page.evaluate(
      async ([fn, file, sets]) => {
        try {
          const rt = (window as unknown as { __runtimes: Record<string, (u: string, s: unknown) => Promise<unknown>> }).__runtimes;
          return { ok: await rt[fn]!(`/models/${file}`, sets) };
        } catch (e) {
          return { error: String(e) };
        }
      },
      [fn, file, sets] as const,
    );
    if ("error" in r) throw new Error(`${fn}(${file}): ${r.error}\n${logs.filter((l) => !l.startsWith("INFO")).slice(-10).join("\n")}`);
    return (r.ok as HostTensor[][]).map((outs) => outs.map(fromHost));
  };
  return {
    page,
    url,
    logs,
    tflite: (file, runs) => call("runTflite", file, runs.map((r) => ({ ...(r.signature ? { signature: r.signature } : {}), inputs: r.inputs.map((t) => toHost(t, t.dtype === "int64" ? "int32" : undefined)) }))),
    onnx: (file, inputSets) => call("runOnnx", file, inputSets.map((ins) => ({ inputs: ins.map((t) => toHost(t)) }))),
    close: async () => {
      await browser.close();
      server.close();
    },
  };
}
