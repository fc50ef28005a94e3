// Shared by the webgpu tests: find an adapter once per test file. Without one the tests skip with
// the reason, unless TORCHTS_REQUIRE_WEBGPU=1 (set by .ci/run), where a missing adapter fails.
import { after, test } from "node:test";
import * as torch from "../../../src/index.js";

// init() throws when there is no adapter; isAvailable() asks first
const ok = (await torch.webgpu.isAvailable()) && (await torch.webgpu.init());
/** false when webgpu runs, else the skip reason. */
export const skip: string | false = ok ? false : `no WebGPU adapter: ${torch.webgpu.unavailableReason()}`;

if (!ok && process.env.TORCHTS_REQUIRE_WEBGPU === "1")
  test("a WebGPU adapter is available (TORCHTS_REQUIRE_WEBGPU=1)", () => {
    throw new Error(`webgpu tests must run here but ${skip}`);
  });

// Dawn keeps a Node process alive while the device exists
after(() => torch.webgpu.shutdown());
