// Bundles the page (main.ts + torchts sources) for the browser with esbuild, and serves it.
//   node --import tsx examples/browser/build.ts        # build and serve on http://localhost:8080
// Node built-ins that some torchts modules import for file IO become stubs that throw when used.
import { build, type Plugin } from "esbuild";
import { createServer, type Server } from "node:http";
import { readFileSync } from "node:fs";

const here = new URL(".", import.meta.url);

const nodeStubs: Plugin = {
  name: "node-stubs",
  setup(b) {
    b.onResolve({ filter: /^node:/ }, (a) => ({ path: a.path, namespace: "node-stub" }));
    b.onLoad({ filter: /.*/, namespace: "node-stub" }, (a) => ({
      contents: `module.exports = new Proxy({}, { get: (_, k) => k === "__esModule" ? false : () => { throw new Error("${a.path} is not available in the browser"); } });`,
      loader: "js",
    }));
  },
};

/** The page's JavaScript, bundled in memory. */
export async function bundle(): Promise<string> {
  const r = await build({
    entryPoints: [new URL("main.ts", here).pathname],
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    write: false,
    plugins: [nodeStubs],
    logLevel: "error",
  });
  return r.outputFiles[0]!.text;
}

/** Serve index.html and the bundle; resolves with the server and its URL. */
export async function serve(port = 0): Promise<{ server: Server; url: string }> {
  const js = await bundle();
  const html = readFileSync(new URL("index.html", here), "utf8");
  const server = createServer((req, res) => {
    if (req.url === "/main.js") {
      res.writeHead(200, { "content-type": "text/javascript" });
      res.end(js);
    } else if (req.url === "/" || req.url === "/index.html") {
      res.writeHead(200, { "content-type": "text/html" });
      res.end(html);
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((ok) => server.listen(port, "127.0.0.1", ok));
  const addr = server.address() as { port: number };
  return { server, url: `http://127.0.0.1:${addr.port}/` };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { url } = await serve(Number(process.env.PORT ?? 8080));
  console.log(`serving ${url} (open it in a browser with WebGPU)`);
}
