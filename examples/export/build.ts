// Bundles the export page (LiteRT.js and onnxruntime-web, no torchts) with esbuild and serves it
// with the runtimes' WebAssembly files and a folder of converted models:
//   node --import tsx examples/export/build.ts [models dir]   # http://localhost:8080
// `npx torchts convert --model DIR --to tflite|onnx` writes the models the page loads.
import { build } from "esbuild";
import { createServer, type Server } from "node:http";
import { createReadStream, existsSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
const require = createRequire(import.meta.url);
const litertWasm = join(dirname(require.resolve("@litertjs/core/package.json")), "wasm");
// onnxruntime-web exports no package.json: find its dist folder from the main entry
const ortDist = dirname(require.resolve("onnxruntime-web"));

export async function bundle(): Promise<string> {
  const r = await build({
    entryPoints: [join(here, "main.ts")],
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    write: false,
    logLevel: "error",
  });
  return r.outputFiles[0]!.text;
}

const TYPES: Record<string, string> = { ".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm", ".html": "text/html", ".json": "application/json" };

function sendFile(res: import("node:http").ServerResponse, root: string, rel: string): void {
  const p = normalize(join(root, rel));
  if (!p.startsWith(root) || !existsSync(p) || !statSync(p).isFile()) {
    res.writeHead(404);
    res.end();
    return;
  }
  const ext = p.slice(p.lastIndexOf("."));
  res.writeHead(200, { "content-type": TYPES[ext] ?? "application/octet-stream", "content-length": statSync(p).size });
  createReadStream(p).pipe(res);
}

/** Serve the page; `models` is the folder served under /models/. Resolves with the server and its URL. */
export async function serve(models: string, port = 0): Promise<{ server: Server; url: string }> {
  const js = await bundle();
  const html = readFileSync(join(here, "index.html"), "utf8");
  const server = createServer((req, res) => {
    const url = decodeURIComponent((req.url ?? "/").split("?")[0]!);
    if (url === "/" || url === "/index.html") {
      res.writeHead(200, { "content-type": "text/html" });
      res.end(html);
    } else if (url === "/main.js") {
      res.writeHead(200, { "content-type": "text/javascript" });
      res.end(js);
    } else if (url.startsWith("/litert-wasm/")) sendFile(res, litertWasm, url.slice(13));
    else if (url.startsWith("/ort/")) sendFile(res, ortDist, url.slice(5));
    else if (url.startsWith("/models/")) sendFile(res, models, url.slice(8));
    else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((ok) => server.listen(port, "127.0.0.1", ok));
  const addr = server.address() as { port: number };
  return { server, url: `http://127.0.0.1:${addr.port}/` };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { url } = await serve(process.argv[2] ?? join(here, "models"), Number(process.env.PORT ?? 8080));
  console.log(`serving ${url}`);
}
