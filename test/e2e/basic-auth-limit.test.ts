/**
 * --basic-auth-limit on a real server: an address that gets a tunnel's
 * password wrong that many times is refused unheard (429, Retry-After),
 * the right password included; another address still gets in.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { connect } from "node:net";
import { burrowCommand } from "../harness/server.ts";
import { withTunnel, type Tunnel } from "../harness/tunnel.ts";

let tunnel: Tunnel;

beforeAll(async () => {
  tunnel = await withTunnel({
    server: { args: ["--basic-auth-limit", "2"] },
    username: "limited-guess",
    upstream: () => new Response("inside"),
    args: ["--subdomain", "guarded", "--basic-auth", "ann:right-one", "--log", "text", "--no-inspect"],
  });
});
afterAll(() => tunnel?.close());

/** One request with these credentials, from the local address `from`: its status line. */
function ask(from: string, credentials: string): Promise<string> {
  const auth = Buffer.from(credentials).toString("base64");
  return new Promise((resolve, reject) => {
    let got = "";
    const timer = setTimeout(() => (sock.destroy(), reject(new Error("no answer in 5 s"))), 5_000);
    const sock = connect({ host: "127.0.0.1", port: tunnel.server.edgePort, localAddress: from }, () =>
      sock.write(`GET / HTTP/1.1\r\nHost: guarded.localhost:${tunnel.server.edgePort}\r\nAuthorization: Basic ${auth}\r\nConnection: close\r\n\r\n`),
    );
    sock.on("data", (d) => (got += d.toString("latin1")));
    sock.on("error", reject);
    sock.on("close", () => (clearTimeout(timer), resolve(got.split("\r\n")[0] ?? "")));
  });
}

test("two wrong passwords (the flag's 2), then 429 even with the right one; another address gets in", async () => {
  expect(await ask("127.0.0.31", "ann:wrong-1")).toContain(" 401 ");
  expect(await ask("127.0.0.31", "ann:wrong-2")).toContain(" 401 ");
  expect(await ask("127.0.0.31", "ann:right-one")).toContain(" 429 ");
  expect(await ask("127.0.0.32", "ann:right-one")).toContain(" 200 ");
});

test("a --basic-auth-limit that is not a positive whole number is a usage error", async () => {
  const run = Bun.spawnSync([...burrowCommand(), "server", "--basic-auth-limit", "0"], { stdout: "pipe", stderr: "pipe" });
  expect(run.exitCode).toBe(2);
  expect(run.stderr.toString()).toContain("--basic-auth-limit");
});
