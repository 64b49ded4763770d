/**
 * `burrow tcp --proxy-protocol` in front of a real nginx listening with
 * `proxy_protocol`: nginx sees the visitor's address and port (not the
 * agent's) and the server's address the visitor reached, on every
 * connection; without the flag nginx refuses what it gets. (burrow.yml's
 * `proxy_protocol` is read into the same setting: test/agent/tunnels-file.test.ts.)
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import net from "node:net";
import { startNginx, type TestNginx } from "../harness/nginx.ts";
import { freeRange } from "../harness/ports.ts";
import { withServer, type Rig } from "../harness/tunnel.ts";
import { within } from "../harness/wait.ts";

let rig: Rig;
let nginx: TestNginx;
let nginxPort: number;

beforeAll(async () => {
  const range = freeRange(11);
  nginxPort = range.first;
  nginx = await startNginx(
    `server {
    listen 127.0.0.1:${nginxPort} proxy_protocol;
    location / { return 200 "visitor=$proxy_protocol_addr:$proxy_protocol_port reached=$proxy_protocol_server_addr:$proxy_protocol_server_port peer=$remote_addr\\n"; }
  }`,
    nginxPort,
  );
  rig = await withServer({ server: { args: ["--tcp-ports", `${range.first + 1}-${range.last}`] }, username: "proxied" });
});
afterAll(async () => {
  await rig?.close();
  await nginx?.stop();
});

/** One HTTP/1.1 request over a new connection to 127.0.0.1:`port`: the response and the port it came from. */
function ask(port: number): Promise<{ text: string; from: number }> {
  return within(
    new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      const sock = net.connect(port, "127.0.0.1", () => sock.write("GET / HTTP/1.1\r\nHost: example\r\nConnection: close\r\n\r\n"));
      let from = 0;
      sock.on("connect", () => (from = sock.localPort ?? 0));
      sock.on("data", (d: Buffer) => chunks.push(d));
      sock.on("error", reject);
      sock.on("close", () => resolve({ text: Buffer.concat(chunks).toString("latin1"), from }));
    }),
    10_000,
    "an answer through the tunnel",
  );
}

test("nginx sees the visitor's address and port, and the server's port it reached, on every connection", async () => {
  await using agent = await rig.startAgent({ kind: "tcp", target: `127.0.0.1:${nginxPort}`, args: ["--proxy-protocol"] });
  for (let i = 0; i < 3; i++) {
    const { text, from } = await ask(agent.port!);
    expect(text).toStartWith("HTTP/1.1 200 ");
    expect(text).toContain(`visitor=127.0.0.1:${from} reached=127.0.0.1:${agent.port} peer=127.0.0.1`);
  }
});

test("without --proxy-protocol nginx gets no header and refuses the connection's bytes", async () => {
  await using agent = await rig.startAgent({ kind: "tcp", target: `127.0.0.1:${nginxPort}` });
  const { text } = await ask(agent.port!);
  expect(text).not.toContain("visitor=");
});
