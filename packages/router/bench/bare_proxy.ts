// The reference for bench/overhead.ts: a bare node:http pass-through proxy (pipe, keep-alive), the least a
// proxy in Node adds. node --import tsx bench/bare_proxy.ts http://replica:port
import http from "node:http";
const target = new URL(process.argv[2]!);
const agent = new http.Agent({ keepAlive: true });
const srv = http.createServer((req, res) => {
  const up = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers, agent }, (ur) => { res.writeHead(ur.statusCode!, ur.headers); ur.pipe(res); });
  req.pipe(up);
});
srv.listen(0, "127.0.0.1", () => console.log(`listening on http://127.0.0.1:${(srv.address() as any).port}`));
