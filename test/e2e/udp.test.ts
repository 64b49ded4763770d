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
import { decodeFrames, encodeFrame, jsonPayload, type Frame } from "../../src/protocol/frames.ts";
import { CONNECT_PATH, FrameType, MAX_DATAGRAM, PROTOCOL_VERSION } from "../../src/protocol/wire.ts";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { refusal, startAgent, type TestAgent } from "../harness/agent.ts";
import { aptInstall } from "../harness/debian-packages.ts";
import { openBrowser } from "../panel/browser.ts";
import { sample, scrape } from "../harness/metrics.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { LineReader } from "../harness/lines.ts";
import { freeTcpAndUdpPort, startUdpEcho, udpClient, type UdpEcho } from "../harness/udp.ts";
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
    const ask = (p: number, type: string) => run([dig, "+short", "+tries=3", "+time=2", "-p", String(p), "@127.0.0.1", "svc.example.test", type]);
    // dnsmasq listens on TCP as well as UDP: a port whose TCP side is taken makes it exit, and another is tried
    let proc: ReturnType<typeof Bun.spawn> | undefined;
    let port = 0;
    for (let attempt = 1; !proc; attempt++) {
      port = await freeTcpAndUdpPort();
      const tried = Bun.spawn(
        [dnsmasq, "--no-daemon", "--conf-file=/dev/null", "--pid-file=", "--no-resolv", "--no-hosts", "--bind-interfaces", "--listen-address=127.0.0.1", `--port=${port}`,
          "--address=/svc.example.test/192.0.2.7", "--txt-record=svc.example.test,through burrow"],
        { stdin: "ignore", stdout: "ignore", stderr: "pipe" },
      );
      let exited = false;
      void tried.exited.then(() => (exited = true));
      await waitUntil(async () => exited || (await ask(port, "A")).out.trim() === "192.0.2.7", 10_000, "dnsmasq answering");
      if (!exited) proc = tried;
      else if (attempt >= 3) throw new Error(`dnsmasq did not start: ${await new Response(tried.stderr as ReadableStream).text()}`);
    }
    const dns = await startAgent({ kind: "udp", target: port, server: server.edgeUrl, token });
    try {
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
    // its server listening before anyone connects: a client through the tunnel must reach iperf3 and nothing else
    let iperfPort = 0;
    let iperfd: ReturnType<typeof Bun.spawn> | undefined;
    for (let attempt = 1; !iperfd; attempt++) {
      iperfPort = await freeTcpAndUdpPort();
      const tried = Bun.spawn([iperf, "-s", "-1", "--forceflush", "-B", "127.0.0.1", "-p", String(iperfPort)], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
      const said = await Promise.race([new LineReader(tried).waitFor(/Server listening on/, 10_000).then(() => "listening", () => "not"), tried.exited.then(() => "exited")]);
      if (said === "listening") iperfd = tried;
      else {
        tried.kill();
        if (attempt >= 3) throw new Error("iperf3 -s did not start");
      }
    }
    const tcp = await startAgent({ kind: "tcp", target: iperfPort, server: open.edgeUrl, token: both });
    const udp = await startAgent({ kind: "udp", target: iperfPort, server: open.edgeUrl, token: both, args: ["--remote-port", String(tcp.port)] });
    try {
      expect(udp.port).toBe(tcp.port!);
      const result = await run([iperf, "-c", "127.0.0.1", "-p", String(tcp.port), "-u", "-b", "20M", "-l", "1400", "-t", "2", "-J"], 30_000);
      expect(result.code).toBe(0);
      const sum = JSON.parse(result.out).end?.sum;
      if (!sum) throw new Error(`iperf3 gave no summary:\n${result.out.slice(-2000)}\n${result.err}`);
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

/** The agent's process ends within `ms`; returns its exit code. */
async function exitWithin(a: TestAgent, ms: number): Promise<number | null> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`agent still running after ${ms} ms:\n${a.output.text()}`)), ms)));
  try {
    const code = await Promise.race([a.proc.exited, late]);
    await a.output.closed();
    return code;
  } finally {
    clearTimeout(timer);
  }
}

/** Sends `text` from `client` until a reply comes (a few tries: UDP may lose), or fails. */
async function ask(client: Awaited<ReturnType<typeof udpClient>>, text: string): Promise<string> {
  const before = client.got.length;
  for (let i = 0; i < 5; i++) {
    client.send(text);
    try {
      return (await client.waitFor(before + 1, 1_000))[before]!.toString();
    } catch {}
  }
  throw new Error(`no reply to '${text}'`);
}

/** Sends a few datagrams from `client` and says whether any reply came within `ms`. */
async function answered(client: Awaited<ReturnType<typeof udpClient>>, ms = 1_000): Promise<boolean> {
  const before = client.got.length;
  for (let i = 0; i < 3; i++) client.send(`probe ${i}`);
  return client.waitFor(before + 1, ms).then(
    () => true,
    () => false,
  );
}

describe("a udp tunnel's limits and rules", () => {
  test("--udp-idle: a flow with no datagram either way ends, and the visitor's next datagram starts a new one", async () => {
    await using idle = await startServer({ args: ["--udp-idle", "1"] });
    const admin = await signedIn(idle);
    const t = await admin.createToken(await admin.createUser("idle", { allowed_protocols: "udp" }));
    await using a = await startAgent({ kind: "udp", target: echo.port, server: idle.edgeUrl, token: t, args: ["--log", "json"], waitFor: /"event":"connect"/ });
    const client = await udpClient(a.port!);
    try {
      expect(await ask(client, "first")).toBe("first");
      const closed = JSON.parse(await a.output.waitFor(/"event":"udp_flow_close"/, 10_000));
      expect(closed).toMatchObject({ tunnel: "udp", remote: `127.0.0.1:${client.port}`, datagrams_in: 1, datagrams_out: 1, bytes_in: 5, bytes_out: 5, dropped: 0 });
      expect(closed.duration_ms).toBeGreaterThanOrEqual(900);
      const m = await scrape(idle.adminUrl, { Cookie: admin.cookie! });
      expect(sample(m, "burrow_udp_flows_open")).toBe(0);
      expect(sample(m, 'burrow_streams_reset_total{by="edge",code="FLOW_ENDED"}')).toBe(1);
      expect(await ask(client, "again")).toBe("again");
      await waitUntil(() => a.output.lines.filter((l) => l.includes('"event":"udp_flow_open"')).length === 2, 5_000, "a second flow");
    } finally {
      client.close();
    }
  });

  test("a service with nothing listening: the agent lives on through its ICMP errors, and the flow's end names the error", async () => {
    await using idle = await startServer({ args: ["--udp-idle", "1"] });
    const admin = await signedIn(idle);
    const t = await admin.createToken(await admin.createUser("nobody-home", { allowed_protocols: "udp" }));
    const gone = await startUdpEcho();
    gone.close(); // a port nothing listens on now
    await using a = await startAgent({ kind: "udp", target: gone.port, server: idle.edgeUrl, token: t, args: ["--log", "json"], waitFor: /"event":"connect"/ });
    const client = await udpClient(a.port!);
    try {
      // a few first (the ICMP error comes back), then a burst: many frames in each read of the agent's link,
      // each datagram's send now failing, none of which may cost the link its framing
      for (let i = 0; i < 5; i++) {
        client.send(`into the void ${i}`);
        await Bun.sleep(5);
      }
      for (let i = 0; i < 500; i++) client.send(`into the void, quickly ${i}`);
      const closed = JSON.parse(await a.output.waitFor(/"event":"udp_flow_close"/, 10_000));
      expect(closed.datagrams_in).toBeGreaterThan(0);
      expect(closed.datagrams_out).toBe(0);
      expect(closed.error).toBeString();
      expect(a.proc.exitCode).toBeNull();
      // one session all along: no refusal, no reconnect
      expect(a.output.lines.filter((l) => l.includes('"event":"connect"'))).toHaveLength(1);
      expect(a.output.text()).not.toContain("refusal");
      // and it still serves: the next flow is opened as any other
      client.send("still there?");
      await waitUntil(() => a.output.lines.filter((l) => l.includes('"event":"udp_flow_open"')).length === 2, 5_000, "a second flow");
    } finally {
      client.close();
    }
  });

  test("--udp-flows: past the cap the oldest idle flow ends to make room; the others carry on", async () => {
    await using few = await startServer({ args: ["--udp-flows", "2"] });
    const admin = await signedIn(few);
    const t = await admin.createToken(await admin.createUser("few", { allowed_protocols: "udp" }));
    await using a = await startAgent({ kind: "udp", target: echo.port, server: few.edgeUrl, token: t, args: ["--log", "json"], waitFor: /"event":"connect"/ });
    const [one, two, three] = await Promise.all([udpClient(a.port!), udpClient(a.port!), udpClient(a.port!)]);
    try {
      expect(await ask(one, "one")).toBe("one");
      expect(await ask(two, "two")).toBe("two");
      expect(await ask(three, "three")).toBe("three"); // one's flow, the oldest idle, made room
      const closed = JSON.parse(await a.output.waitFor(/"event":"udp_flow_close"/, 5_000));
      expect(closed.remote).toBe(`127.0.0.1:${one.port}`);
      expect(await ask(two, "two again")).toBe("two again");
      const m = await scrape(few.adminUrl, { Cookie: admin.cookie! });
      expect(sample(m, "burrow_udp_flows_open")).toBe(2);
    } finally {
      for (const c of [one, two, three]) c.close();
    }
  });

  test("--udp-rate: one source's excess is dropped and counted; another source is not held back by it", async () => {
    await using capped = await startServer({ args: ["--udp-rate", "10"] });
    const admin = await signedIn(capped);
    const t = await admin.createToken(await admin.createUser("capped", { allowed_protocols: "udp" }));
    const counted = await startUdpEcho();
    await using a = await startAgent({ kind: "udp", target: counted.port, server: capped.edgeUrl, token: t });
    const flood = await udpClient(a.port!);
    const other = await udpClient(a.port!, { from: "127.0.0.2" });
    try {
      for (let i = 0; i < 200; i++) flood.send(`flood ${i}`);
      // a burst of twice the rate passes (and what the second that took refills); the rest is dropped
      await waitUntil(async () => sample(await scrape(capped.adminUrl, { Cookie: admin.cookie! }), 'burrow_udp_datagrams_dropped_total{reason="rate"}') >= 150, 5_000, "rate drops counted");
      await Bun.sleep(200);
      expect(counted.received.length).toBeGreaterThanOrEqual(20);
      expect(counted.received.length).toBeLessThanOrEqual(40);
      expect(await ask(other, "not held back")).toBe("not held back");
    } finally {
      flood.close();
      other.close();
      counted.close();
    }
  });

  test("IP rules apply per datagram: a denied visitor's never reach the service, an allowed one's do", async () => {
    const counted = await startUdpEcho();
    await using a = await startAgent({ kind: "udp", target: counted.port, server: server.edgeUrl, token, args: ["--deny-cidr", "127.0.0.2/32"] });
    const denied = await udpClient(a.port!, { from: "127.0.0.2" });
    const allowed = await udpClient(a.port!);
    try {
      const before = sample(await scrape(server.adminUrl, { Cookie: api.cookie! }), 'burrow_udp_datagrams_dropped_total{reason="rules"}');
      expect(await answered(denied)).toBe(false);
      expect(counted.received.filter((r) => r.from.startsWith("127.0.0.2")).length).toBe(0);
      expect(await ask(allowed, "welcome")).toBe("welcome");
      const after = sample(await scrape(server.adminUrl, { Cookie: api.cookie! }), 'burrow_udp_datagrams_dropped_total{reason="rules"}');
      expect(after - before).toBeGreaterThanOrEqual(3);
    } finally {
      denied.close();
      allowed.close();
      counted.close();
    }
  });

  test("revoking the token during a flow: the agent is told and exits, the port answers no more, the tunnel leaves the list", async () => {
    const userId = await api.createUser("revoked-udp", { allowed_protocols: "udp" });
    const made = await api.post(`/api/users/${userId}/tokens`, { device_name: "udp-box" });
    const a = await startAgent({ kind: "udp", target: echo.port, server: server.edgeUrl, token: made.body.token });
    const client = await udpClient(a.port!);
    try {
      expect(await ask(client, "before")).toBe("before");
      expect((await api.delete(`/api/tokens/${made.body.token_id}`)).status).toBe(200);
      expect(await exitWithin(a, 5_000)).toBe(1);
      expect(a.output.text()).toMatch(/^burrow: refused by the server: TOKEN_DISABLED: /m);
      expect(await answered(client)).toBe(false);
      const active = (await api.get("/api/tunnels/active")).body as { port?: number; protocol: string }[];
      expect(active.some((t) => t.protocol === "udp" && t.port === a.port)).toBe(false);
    } finally {
      client.close();
      await a.stop();
    }
  });

  test("a crashed agent's port stays its token's: the same token takes it back, another is refused it", async () => {
    const userId = await api.createUser("grace-udp", { allowed_protocols: "udp" });
    const mine = await api.createToken(userId, "one");
    const first = await startAgent({ kind: "udp", target: echo.port, server: server.edgeUrl, token: mine });
    const port = first.port!;
    await first.stop("SIGKILL");
    await waitUntil(async () => !((await api.get("/api/tunnels/active")).body as { port?: number }[]).some((t) => t.port === port), 5_000, "the crash noticed");
    expect(await refusal({ kind: "udp", target: echo.port, server: server.edgeUrl, token, args: ["--remote-port", String(port)] })).toMatch(
      /^burrow: refused by the server: PORT_UNAVAILABLE: /,
    );
    await using back = await startAgent({ kind: "udp", target: echo.port, server: server.edgeUrl, token: mine, args: ["--remote-port", String(port)] });
    expect(back.port).toBe(port);
    const client = await udpClient(port);
    try {
      expect(await ask(client, "back")).toBe("back");
    } finally {
      client.close();
    }
  });

  test("who may open one: udp in allowed_protocols (else PROTOCOL_DENIED); a server with --udp-ports off says UDP_UNAVAILABLE; a port outside the range is PORT_UNAVAILABLE", async () => {
    const httpOnly = await api.createToken(await api.createUser("no-udp", { allowed_protocols: "http,tcp" }));
    expect(await refusal({ kind: "udp", target: echo.port, server: server.edgeUrl, token: httpOnly })).toMatch(/^burrow: refused by the server: PROTOCOL_DENIED: .*udp/);
    expect(await refusal({ kind: "udp", target: echo.port, server: server.edgeUrl, token, args: ["--remote-port", "40000"] })).toMatch(
      /^burrow: refused by the server: PORT_UNAVAILABLE: port 40000 is outside this server's UDP range 20000-29999/,
    );
    const bad = await api.post("/api/users", { username: "bad-proto", password: "password-123", allowed_protocols: "http,quic" });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain("http, tcp, tls, udp");
    await using off = await startServer({ args: ["--udp-ports", "off"] });
    const admin = await signedIn(off);
    const t = await admin.createToken(await admin.createUser("off", { allowed_protocols: "udp" }));
    expect(await refusal({ kind: "udp", target: echo.port, server: off.edgeUrl, token: t })).toMatch(/^burrow: refused by the server: UDP_UNAVAILABLE: /);
  });

  test("using up the traffic quota with datagrams closes the tunnel with TRAFFIC_EXCEEDED", async () => {
    const userId = await api.createUser("quota-udp", { allowed_protocols: "udp", traffic_limit: 100_000, traffic_period: "daily" });
    const t = await api.createToken(userId);
    const a = await startAgent({ kind: "udp", target: echo.port, server: server.edgeUrl, token: t });
    const client = await udpClient(a.port!);
    try {
      // 60 datagrams of 1,400 bytes, echoed: about 168 kB each way together, past the 100 kB limit
      for (let i = 0; i < 60; i++) {
        client.send(new Uint8Array(1400));
        if (i % 10 === 9) await Bun.sleep(10);
      }
      expect(await exitWithin(a, 5_000)).toBe(1);
      expect(a.output.text()).toMatch(/^burrow: refused by the server: TRAFFIC_EXCEEDED: /m);
    } finally {
      client.close();
      await a.stop();
    }
  });
});

describe("the agent's inspector lists flows, never payloads", () => {
  test("GET /api/flows: an open flow with its counts as they grow, then ended with its age; the page shows them", async () => {
    await using idle = await startServer({ args: ["--udp-idle", "1"] });
    const admin = await signedIn(idle);
    const t = await admin.createToken(await admin.createUser("inspected", { allowed_protocols: "udp" }));
    await using a = await startAgent({ kind: "udp", target: echo.port, server: idle.edgeUrl, token: t, args: ["--inspect-addr", "127.0.0.1:0"] });
    const inspector = /Inspector\s+(http:\/\/\S+)/.exec(a.output.text())![1]!;
    const flows = async () => ((await (await fetch(`${inspector}/api/flows`)).json()) as { flows: any[] }).flows;
    const client = await udpClient(a.port!);
    try {
      expect(await ask(client, "secret payload")).toBe("secret payload");
      await waitUntil(async () => (await flows()).some((f) => f.state === "open" && f.datagrams_out === 1), 5_000, "the open flow with its reply counted");
      const [open] = await flows();
      expect(open).toMatchObject({ tunnel: "udp", remote: `127.0.0.1:${client.port}`, state: "open", datagrams_in: 1, datagrams_out: 1, bytes_in: 14, bytes_out: 14, dropped: 0, error: null });
      expect(JSON.stringify(await flows())).not.toContain("secret");
      await waitUntil(async () => (await flows())[0]?.state === "ended", 10_000, "the flow's idle end");
      const [ended] = await flows();
      expect(ended.age_ms).toBeGreaterThanOrEqual(900);
      expect(((await fetch(`${inspector}/api/flows?tunnel=other`).then((r) => r.json())) as { flows: unknown[] }).flows).toEqual([]);
      expect((await fetch(`${inspector}/api/flows`, { method: "DELETE" })).status).toBe(405);
      // the page: a UDP flows table above the requests, one row per flow, no payload anywhere
      await using browser = await openBrowser();
      await browser.page.goto(inspector);
      const row = browser.page.locator(".flow-row").first();
      await row.waitFor();
      const text = await row.innerText();
      expect(text).toContain(`127.0.0.1:${client.port}`);
      expect(text).toContain("ended");
      expect(text).toContain("1 / 1");
      expect(await browser.page.locator(".flows h2").innerText()).toContain("UDP flows");
      expect(await browser.page.content()).not.toContain("secret payload");
      expect(browser.pageErrors).toEqual([]);
    } finally {
      client.close();
    }
  });
});

describe("a hostile agent holding a udp tunnel", () => {
  test("its datagrams reach the flow's visitor; one past 65,507 bytes or on a stream never opened is PROTOCOL_ERROR, and the others carry on", async () => {
    for (const fault of ["too large", "no such stream"] as const) {
      const ws = new WebSocket(`ws://127.0.0.1:${server.edgePort}${CONNECT_PATH}`);
      ws.binaryType = "arraybuffer";
      const frames: Frame[] = [];
      let closed = false;
      ws.onmessage = (ev) => decodeFrames(new Uint8Array(ev.data as ArrayBuffer).slice(), (f) => frames.push(f));
      ws.onclose = () => (closed = true);
      await new Promise((resolve, reject) => ((ws.onopen = resolve), (ws.onerror = reject)));
      try {
        ws.send(encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: PROTOCOL_VERSION, token, tunnels: [{ protocol: "udp" }], agent: "hostile-test" })));
        await waitUntil(() => frames.some((f) => f.type === FrameType.READY), 5_000, "READY");
        const ready = JSON.parse(new TextDecoder().decode(frames.find((f) => f.type === FrameType.READY)!.payload));
        const visitor = await udpClient(ready.tunnels[0].port);
        try {
          visitor.send("to the agent");
          await waitUntil(() => frames.some((f) => f.type === FrameType.DATAGRAM), 5_000, "the visitor's datagram");
          const open = frames.find((f) => f.type === FrameType.OPEN)!;
          expect(JSON.parse(new TextDecoder().decode(open.payload))).toMatchObject({ kind: "udp", remote: `127.0.0.1:${visitor.port}` });
          expect(new TextDecoder().decode(frames.find((f) => f.type === FrameType.DATAGRAM)!.payload)).toBe("to the agent");
          ws.send(encodeFrame(FrameType.DATAGRAM, open.stream, new TextEncoder().encode("from the agent")));
          expect((await visitor.waitFor(1))[0]!.toString()).toBe("from the agent");
          ws.send(
            fault === "too large"
              ? encodeFrame(FrameType.DATAGRAM, open.stream, new Uint8Array(MAX_DATAGRAM + 1))
              : encodeFrame(FrameType.DATAGRAM, open.stream + 1000, new Uint8Array(8)),
          );
          await waitUntil(() => closed, 5_000, "the edge closing the hostile agent");
          const refusal = frames.find((f) => f.type === FrameType.ERROR);
          expect(JSON.parse(new TextDecoder().decode(refusal!.payload)).code).toBe("PROTOCOL_ERROR");
        } finally {
          visitor.close();
        }
      } finally {
        ws.close();
      }
    }
    // the honest agent's tunnel never noticed
    const client = await udpClient(agent.port!);
    try {
      expect(await ask(client, "still here")).toBe("still here");
    } finally {
      client.close();
    }
  });
});
