// The page's entry point: use WebGPU when the browser has an adapter, else cpu, and show the result.
import * as torch from "../../packages/torchts/src/index.js";
import { program } from "./program.js";

const out = document.getElementById("out")!;
try {
  const ok = (await torch.webgpu.isAvailable()) && (await torch.webgpu.init());
  const device = ok ? "webgpu" : "cpu";
  out.textContent = `running on ${device}${ok ? ` (${torch.webgpu.getDeviceInfo().adapter})` : ` (${torch.webgpu.unavailableReason()})`}...`;
  const r = await program(torch, device);
  out.textContent =
    `device: ${r.device}\nloss before/after one SGD step: ${r.loss0.toFixed(6)} -> ${r.loss1.toFixed(6)}\n` +
    `softmax row 0: ${r.probs.slice(0, 16).map((p) => p.toFixed(4)).join(" ")}`;
  (window as unknown as { __torchts: unknown }).__torchts = { ...r, reason: torch.webgpu.unavailableReason() };
} catch (e) {
  out.textContent = `error: ${(e as Error).stack ?? e}`;
  (window as unknown as { __torchts: unknown }).__torchts = { error: String((e as Error).stack ?? e) };
}
