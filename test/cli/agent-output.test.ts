/**
 * The agent's outputs without a process: the screen's counters (rates over
 * sliding windows, percentiles over a bounded sample), the JSON events and
 * their fields, --log-level filtering, the choice of output from --log and
 * the terminal, and the screen's drawing at any size.
 */
import { describe, expect, test } from "bun:test";
import type { ReadyView } from "../../src/agent/output.ts";
import { paint } from "../../src/cli/colours.ts";
import { chooseOutput } from "../../src/cli/agent-output/choose.ts";
import { DURATION_SAMPLE, RATE_SPAN_S, TrafficCounters } from "../../src/cli/agent-output/counters.ts";
import { jsonOutput, requestFields } from "../../src/cli/agent-output/json.ts";
import { lineOutput } from "../../src/cli/agent-output/lines.ts";
import { shown } from "../../src/cli/agent-output/levels.ts";
import { flushLines, printable } from "../../src/cli/agent-output/print.ts";
import { Recent } from "../../src/cli/agent-output/recent.ts";
import { fit, renderScreen, type Activity, type ScreenState } from "../../src/cli/agent-output/screen-view.ts";
import { UsageError } from "../../src/usage-error.ts";

/** A clock the test moves by hand. */
function clock(start = 1_700_000_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => void (now += ms) };
}

describe("TrafficCounters", () => {
  test("total counts every arrival; open is what has not finished, and never goes below zero", () => {
    const c = new TrafficCounters(clock().now);
    c.arrived();
    c.arrived();
    c.arrived();
    expect([c.total, c.open]).toEqual([3, 3]);
    c.finished(5);
    expect([c.total, c.open]).toEqual([3, 2]);
    c.finished(5);
    c.finished(5);
    c.finished(5); // one more finish than arrivals (a replayed request): open stays at zero
    expect([c.total, c.open]).toEqual([3, 0]);
  });

  test("rates are arrivals per second over the last 1 and 5 minutes, sliding second by second", () => {
    const t = clock();
    const c = new TrafficCounters(t.now);
    for (let i = 0; i < 120; i++) c.arrived(); // 120 in this second
    expect(c.rate(60)).toBeCloseTo(2, 9);
    expect(c.rate(300)).toBeCloseTo(0.4, 9);
    t.advance(59_000); // still inside the minute
    expect(c.rate(60)).toBeCloseTo(2, 9);
    t.advance(1_000); // that second has left the minute, not the five minutes
    expect(c.rate(60)).toBe(0);
    expect(c.rate(300)).toBeCloseTo(0.4, 9);
    for (let i = 0; i < 30; i++) c.arrived();
    expect(c.rate(60)).toBeCloseTo(0.5, 9);
    expect(c.rate(300)).toBeCloseTo(0.5, 9);
    t.advance(240_000); // the first burst is 300 s old: gone from every window
    expect(c.rate(300)).toBeCloseTo(0.1, 9);
    t.advance(60_000);
    expect(c.rate(300)).toBe(0);
  });

  test("a bucket reused after the ring wraps holds only its own second", () => {
    const t = clock();
    const c = new TrafficCounters(t.now);
    for (let i = 0; i < 50; i++) c.arrived();
    t.advance(RATE_SPAN_S * 1000); // the same bucket, 300 s later
    c.arrived();
    expect(c.rate(60)).toBeCloseTo(1 / 60, 9);
    expect(c.rate(300)).toBeCloseTo(1 / 300, 9);
  });

  test("an arrival every second for ten minutes: the windows see only their own span", () => {
    const t = clock();
    const c = new TrafficCounters(t.now);
    for (let s = 0; s < 600; s++) {
      c.arrived();
      c.arrived();
      t.advance(1000);
    }
    t.advance(-1000); // back to the last second that had arrivals
    expect(c.rate(60)).toBeCloseTo(2, 9);
    expect(c.rate(300)).toBeCloseTo(2, 9);
    expect(c.total).toBe(1200);
  });

  test("p50 and p90 are nearest-rank over the recorded durations", () => {
    const c = new TrafficCounters(clock().now);
    expect(c.percentiles()).toBeUndefined();
    for (const ms of [50, 10, 40, 20, 30, 100, 90, 60, 80, 70]) c.finished(ms);
    expect(c.percentiles()).toEqual({ p50: 50, p90: 90 });
    const one = new TrafficCounters(clock().now);
    one.finished(7);
    expect(one.percentiles()).toEqual({ p50: 7, p90: 7 });
  });

  test("percentiles cover only the most recent DURATION_SAMPLE durations", () => {
    const c = new TrafficCounters(clock().now);
    for (let i = 0; i < DURATION_SAMPLE; i++) c.finished(1000); // old and slow
    for (let i = 0; i < DURATION_SAMPLE; i++) c.finished(i % 10); // recent and fast: 0..9
    expect(c.percentiles()).toEqual({ p50: 4, p90: 8 });
  });
});

describe("Recent", () => {
  test("keeps the newest, newest first, within its capacity", () => {
    const r = new Recent<number>(3);
    expect(r.newest(5)).toEqual([]);
    for (let i = 1; i <= 5; i++) r.add(i);
    expect(r.size).toBe(3);
    expect(r.newest(5)).toEqual([5, 4, 3]);
    expect(r.newest(2)).toEqual([5, 4]);
  });
});

const READY: ReadyView = {
  username: "alice",
  session: "s-1",
  server: "https://tunnels.example.com",
  tunnels: [
    {
      name: "http",
      id: "t1",
      protocol: "http",
      subdomain: "app",
      url: "https://app.tunnels.example.com",
      local: "localhost:3000",
      target: { host: "localhost", port: 3000 },
      inspect: true,
    },
  ],
};

/** A JSON output at `level`, and the objects it wrote. */
function jsonAt(level: "debug" | "info" | "warn" | "error") {
  const lines: string[] = [];
  const out = jsonOutput(level, (l) => lines.push(l));
  return { out, lines, events: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

describe("--log json", () => {
  test("every event is one line of JSON with an ISO time, its level and its name", () => {
    const { out, lines, events } = jsonAt("debug");
    out.ready(READY);
    out.streamOpened!({ tunnel: "http", kind: "http" });
    out.request({ tunnel: "http", method: "GET", path: "/a?b=1", status: 200, ms: 12.345 });
    out.connection({ tunnel: "db", remote: "203.0.113.9:5555", event: "open" });
    out.connection({ tunnel: "db", remote: "203.0.113.9:5555", event: "close", bytesIn: 10, bytesOut: 20, ms: 1500 });
    out.webSocketClosed!({ tunnel: "http", path: "/ws", ms: 3000, opened: true });
    out.latency!(3.21);
    out.notice!("hello");
    out.inspector!("http://127.0.0.1:4040");
    out.reconnecting("connection closed", 1234.4, 2);
    out.restarting!();
    out.tunnelRefused!("db", "PORT_UNAVAILABLE", "port 5432 is taken");
    out.refused("AUTH_FAILED", "unknown token");
    for (const l of lines) expect(l).not.toContain("\n");
    const e = events();
    expect(e.map((x) => x.event)).toEqual([
      "connect",
      "stream_open",
      "request",
      "tcp_open",
      "tcp_close",
      "websocket_close",
      "latency",
      "notice",
      "inspector",
      "disconnect",
      "reconnecting",
      "restarting",
      "tunnel_refused",
      "refusal",
    ]);
    for (const x of e) {
      expect(typeof x.time).toBe("string");
      expect(new Date(x.time as string).toISOString()).toBe(x.time as string);
    }
    const by = (name: string) => e.find((x) => x.event === name)!;
    expect(by("connect")).toMatchObject({
      level: "info",
      user: "alice",
      session: "s-1",
      server: "https://tunnels.example.com",
      tunnels: [{ name: "http", protocol: "http", url: "https://app.tunnels.example.com", local: "localhost:3000" }],
    });
    expect(by("request")).toMatchObject({ level: "info", tunnel: "http", method: "GET", path: "/a?b=1", status: 200, duration_ms: 12.3 });
    expect(by("request")).not.toHaveProperty("error");
    expect(by("tcp_close")).toMatchObject({ tunnel: "db", remote: "203.0.113.9:5555", bytes_in: 10, bytes_out: 20, duration_ms: 1500 });
    expect(by("websocket_close")).toMatchObject({ path: "/ws", duration_ms: 3000, opened: true });
    expect(by("latency")).toMatchObject({ level: "debug", ms: 3.2 });
    expect(by("disconnect")).toMatchObject({ level: "warn", reason: "connection closed" });
    expect(by("reconnecting")).toMatchObject({ level: "warn", reason: "connection closed", in_ms: 1234, attempt: 2 });
    expect(by("tunnel_refused")).toMatchObject({ level: "error", tunnel: "db", code: "PORT_UNAVAILABLE", message: "port 5432 is taken" });
    expect(by("refusal")).toMatchObject({ level: "error", code: "AUTH_FAILED", message: "unknown token" });
  });

  test("a request's status is the number the visitor got; what went wrong is in error", () => {
    const base = { tunnel: "http", method: "GET", path: "/", ms: 1 };
    expect(requestFields({ ...base, status: "502 (connection refused)" })).toMatchObject({ status: 502, error: "connection refused" });
    expect(requestFields({ ...base, status: "cancelled" })).toMatchObject({ status: null, error: "cancelled" });
    expect(requestFields({ ...base, status: "101 websocket", kind: "ws" })).toMatchObject({ status: 101, websocket: true });
    expect(requestFields({ ...base, status: "101 websocket", kind: "ws" }).error).toBeUndefined();
    expect(requestFields({ ...base, status: 404 })).toMatchObject({ status: 404 });
  });

  test("disconnect only when a session was up: a first connect that fails is just reconnecting", () => {
    const { out, events } = jsonAt("info");
    out.reconnecting("connection refused", 500, 1);
    out.reconnecting("connection refused", 1000, 2);
    out.ready(READY);
    out.reconnecting("connection closed", 500, 1);
    expect(events().map((x) => x.event)).toEqual(["reconnecting", "reconnecting", "connect", "disconnect", "reconnecting"]);
  });

  test("--log-level filters: info drops debug, warn drops requests, error keeps only refusals", () => {
    const drive = (level: "debug" | "info" | "warn" | "error") => {
      const { out, events } = jsonAt(level);
      out.ready(READY);
      out.latency!(1);
      out.streamOpened!({ tunnel: "http", kind: "http" });
      out.request({ tunnel: "http", method: "GET", path: "/", status: 200, ms: 1 });
      out.reconnecting("lost", 500, 1);
      out.refused("AUTH_FAILED", "no");
      return events().map((x) => x.event);
    };
    expect(drive("debug")).toEqual(["connect", "latency", "stream_open", "request", "disconnect", "reconnecting", "refusal"]);
    expect(drive("info")).toEqual(["connect", "request", "disconnect", "reconnecting", "refusal"]);
    expect(drive("warn")).toEqual(["disconnect", "reconnecting", "refusal"]);
    expect(drive("error")).toEqual(["refusal"]);
  });

  test("levels rank debug < info < warn < error", () => {
    expect(shown("info", "info")).toBe(true);
    expect(shown("debug", "info")).toBe(false);
    expect(shown("error", "warn")).toBe(true);
    expect(shown("warn", "error")).toBe(false);
  });
});

describe("--log text", () => {
  /** What a text output writes to stdout and stderr while `drive` runs. */
  function textOf(drive: (out: ReturnType<typeof lineOutput>) => void): { stdout: string; stderr: string } {
    const stdout: string[] = [];
    const stderr: string[] = [];
    const write = process.stdout.write;
    const error = console.error;
    process.stdout.write = ((chunk: string) => (stdout.push(String(chunk)), true)) as typeof process.stdout.write;
    console.error = (...args: unknown[]) => void stderr.push(args.join(" "));
    try {
      drive(lineOutput("info"));
      flushLines();
    } finally {
      process.stdout.write = write;
      console.error = error;
    }
    return { stdout: Bun.stripANSI(stdout.join("")), stderr: Bun.stripANSI(stderr.join("\n")) };
  }

  test("one tunnel: its lines do not name it", () => {
    const { stdout } = textOf((out) => {
      out.ready(READY);
      out.request({ tunnel: "http", method: "GET", path: "/a", status: 200, ms: 3 });
    });
    expect(stdout).toContain("Forwarding  https://app.tunnels.example.com -> localhost:3000");
    expect(stdout).toMatch(/\d\d:\d\d:\d\d  GET     \/a  200  3 ms/);
  });

  test("several tunnels of which the server refused all but one: the lines still name their tunnel, as the screen does", () => {
    const { stdout, stderr } = textOf((out) => {
      out.tunnelRefused!("api", "SUBDOMAIN_TAKEN", "'api' is in use by another tunnel");
      out.ready(READY);
      out.request({ tunnel: "http", method: "GET", path: "/a", status: 200, ms: 3 });
    });
    expect(stderr).toBe("burrow: tunnel 'api' refused by the server: SUBDOMAIN_TAKEN: 'api' is in use by another tunnel");
    expect(stdout).toContain("Forwarding  http  https://app.tunnels.example.com -> localhost:3000");
    expect(stdout).toMatch(/\d\d:\d\d:\d\d  http  GET     \/a  200  3 ms/);
  });
});

describe("--log text, written in batches", () => {
  /** Each write to stdout while `drive` runs (the batch timer never fires within a synchronous drive). */
  function writesOf(drive: (out: ReturnType<typeof lineOutput>) => void): string[] {
    const writes: string[] = [];
    const write = process.stdout.write;
    process.stdout.write = ((chunk: string) => (writes.push(Bun.stripANSI(String(chunk))), true)) as typeof process.stdout.write;
    try {
      drive(lineOutput("info"));
      flushLines();
    } finally {
      process.stdout.write = write;
    }
    return writes;
  }

  test("a turn's lines go in one write, in the order their events came, each request's line as it would have been", () => {
    const writes = writesOf((out) => {
      out.ready(READY);
      out.request({ tunnel: "http", method: "GET", path: "/a", status: 200, ms: 3.4 });
      out.connection({ tunnel: "http", remote: "1.2.3.4:5", event: "open" });
      out.request({ tunnel: "http", method: "constructor", path: "/b\x1b[2J", status: "502 (refused)", ms: 12, route: "/api" });
      out.request({ tunnel: "http", method: "OPTIONS", path: "*", status: 204, ms: 0 });
    });
    expect(writes.length).toBe(1);
    const lines = writes.join("").trimEnd().split("\n");
    expect(lines.slice(-4).map((l) => l.replace(/^\d\d:\d\d:\d\d  /, ""))).toEqual([
      "GET     /a  200  3 ms",
      "connection from 1.2.3.4:5",
      "constructor /b?[2J  502 (refused)  12 ms  via /api",
      "OPTIONS *  204  0 ms",
    ]);
  });

  test("however fast requests come, at most 4,096 lines wait: past that they are written at once", () => {
    const writes = writesOf((out) => {
      for (let i = 0; i < 10_000; i++) out.request({ tunnel: "http", method: "GET", path: `/${i}`, status: 200, ms: 1 });
    });
    expect(writes.length).toBe(3);
    expect(writes.map((w) => w.split("\n").length - 1)).toEqual([4096, 4096, 1808]);
    expect(writes.join("").split("\n")[9999]).toMatch(/GET     \/9999  200  1 ms$/);
  });
});

describe("choosing the output (--log, --log-level)", () => {
  const tty = { isTTY: true };
  const pipe = { isTTY: false };
  const term = { TERM: "xterm-256color" };
  test("the screen on a terminal, text elsewhere and on a dumb terminal; info by default", () => {
    expect(chooseOutput({}, tty, term)).toEqual({ format: "screen", level: "info" });
    expect(chooseOutput({}, pipe, term)).toEqual({ format: "text", level: "info" });
    expect(chooseOutput({}, tty, { TERM: "dumb" })).toEqual({ format: "text", level: "info" });
  });
  test("--log text and json are used as asked; --log screen without a terminal is text", () => {
    expect(chooseOutput({ log: "text" }, tty, term).format).toBe("text");
    expect(chooseOutput({ log: "json" }, tty, term).format).toBe("json");
    expect(chooseOutput({ log: "json" }, pipe, term).format).toBe("json");
    expect(chooseOutput({ log: "screen" }, pipe, term).format).toBe("text");
    expect(chooseOutput({ logLevel: "debug" }, pipe, term).level).toBe("debug");
  });
  test("a value outside the list is a usage error naming the flag and what it takes", () => {
    expect(() => chooseOutput({ log: "yaml" }, tty, term)).toThrow(new UsageError("--log must be one of screen, text, json (got 'yaml')"));
    expect(() => chooseOutput({ logLevel: "loud" }, tty, term)).toThrow(new UsageError("--log-level must be one of debug, info, warn, error (got 'loud')"));
    expect(() => chooseOutput({ log: "" }, tty, term)).toThrow(UsageError);
  });
});

/** A screen's state with `n` requests in its list. */
function state(n: number, over: Partial<ScreenState> = {}): ScreenState {
  const recent = new Recent<Activity>(200);
  for (let i = 0; i < n; i++) {
    recent.add({ kind: "request", time: "12:00:00", tunnel: "http", method: "GET", path: `/item/${i}/${"x".repeat(i * 7)}`, status: i % 5 === 0 ? 500 : 200, ms: i });
  }
  const counters = new TrafficCounters(() => 1_700_000_000_000);
  for (let i = 0; i < n; i++) counters.arrived();
  for (let i = 0; i < n; i++) counters.finished(i);
  return {
    version: "1.2.3",
    user: "alice",
    server: "https://tunnels.example.com",
    status: { kind: "online" },
    tunnels: [{ name: "http", url: "https://app.tunnels.example.com", local: "localhost:3000", protocol: "http" }],
    refusedTunnels: [],
    counters,
    recent,
    ...over,
  };
}

describe("the screen's drawing", () => {
  const plain = paint(false);
  const colour = paint(true);

  test("shows the session, the tunnel, the counters and the newest requests first", () => {
    const lines = renderScreen(state(3, { latencyMs: 12.4, inspector: "http://127.0.0.1:4040" }), { columns: 120, rows: 40 }, plain, 0);
    const text = lines.join("\n");
    expect(text).toContain("burrow 1.2.3");
    expect(text).toMatch(/Session Status\s+online/);
    expect(text).toMatch(/User\s+alice/);
    expect(text).toMatch(/Latency\s+12 ms/);
    expect(text).toMatch(/Inspector\s+http:\/\/127\.0\.0\.1:4040/);
    expect(text).toMatch(/Forwarding\s+https:\/\/app\.tunnels\.example\.com -> localhost:3000/);
    expect(text).toMatch(/total\s+open\s+rt1\s+rt5\s+p50\s+p90/);
    expect(text).toMatch(/\s3\s+0\s+0\.05\s+0\.01\s+1\.0ms\s+2\.0ms/);
    const requests = lines.filter((l) => l.includes("GET"));
    expect(requests.map((l) => /\/item\/(\d)/.exec(l)![1])).toEqual(["2", "1", "0"]);
    expect(requests[2]).toMatch(/500\s+0 ms$/);
  });

  test("at every size each line fits the width and there are never more lines than rows", () => {
    const s = state(150, { notice: "n".repeat(300), refusedTunnels: [{ name: "db", code: "PORT_UNAVAILABLE", message: "m".repeat(200) }] });
    for (const columns of [1, 5, 20, 40, 79, 80, 120, 250]) {
      for (const rows of [0, 1, 3, 10, 24, 60]) {
        for (const p of [plain, colour]) {
          const lines = renderScreen(s, { columns, rows }, p, 0);
          expect(lines.length).toBeLessThanOrEqual(rows);
          for (const l of lines) expect(Bun.stringWidth(l)).toBeLessThanOrEqual(columns);
        }
      }
    }
  });

  test("a taller terminal lists more requests; a narrow one keeps the status in sight by cutting the path", () => {
    const s = state(100);
    const count = (rows: number) => renderScreen(s, { columns: 120, rows }, plain, 0).filter((l) => l.includes("GET")).length;
    expect(count(20)).toBeLessThan(count(40));
    const narrow = renderScreen(state(30), { columns: 60, rows: 40 }, plain, 0).filter((l) => l.includes("GET"));
    expect(narrow[0]).toContain("…");
    expect(narrow[0]).toMatch(/200\s+29 ms$/);
  });

  test("the session status: reconnecting counts down, a refusal shows its code", () => {
    const now = 1_000_000;
    const at = (status: ScreenState["status"]) => renderScreen(state(0, { status }), { columns: 120, rows: 10 }, plain, now).join("\n");
    expect(at({ kind: "reconnecting", why: "connection refused", at: now + 4200, attempt: 3 })).toMatch(
      /Session Status\s+reconnecting in 5 s \(attempt 3: connection refused\)/,
    );
    expect(at({ kind: "reconnecting", why: "x", at: now - 1, attempt: 1 })).toMatch(/Session Status\s+reconnecting \(attempt 1/);
    expect(at({ kind: "refused", code: "AUTH_FAILED", message: "the token is unknown" })).toMatch(/Session Status\s+refused: AUTH_FAILED the token is unknown/);
    expect(at({ kind: "connecting" })).toMatch(/Session Status\s+connecting/);
    expect(at({ kind: "restarting" })).toMatch(/Session Status\s+reconnecting \(the server is restarting\)/);
  });

  test("colours only when painted: status in its class's colour, nothing otherwise", () => {
    const lines = renderScreen(state(5), { columns: 120, rows: 40 }, colour, 0);
    expect(lines.join("\n")).toContain("\x1b[31m500\x1b[39m");
    expect(lines.join("\n")).toContain("\x1b[32monline\x1b[39m");
    expect(renderScreen(state(5), { columns: 120, rows: 40 }, plain, 0).join("\n")).not.toContain("\x1b");
  });

  test("a visitor's path cannot put escape codes on the terminal", () => {
    const s = state(0);
    s.recent.add({ kind: "request", time: "12:00:00", tunnel: "http", method: "GET", path: "/\x1b[2J\x1b]0;pwned\x07", status: 200, ms: 1 });
    const lines = renderScreen(s, { columns: 120, rows: 40 }, plain, 0);
    expect(lines.join("\n")).not.toContain("\x1b");
    expect(lines.join("\n")).toContain("/?[2J?]0;pwned?");
    expect(printable("/ok")).toBe("/ok");
  });

  test("nor can a server, through its messages, names or addresses", () => {
    const evil = "\x1b[2J\x9b31m";
    const s = state(0, {
      user: `u${evil}`,
      status: { kind: "refused", code: `C${evil}`, message: `m${evil}` },
      notice: `n${evil}`,
      tunnels: [{ name: "web", url: `https://x${evil}`, local: "localhost:3000", protocol: "http" }],
      refusedTunnels: [{ name: "db", code: "PORT_UNAVAILABLE", message: `taken${evil}` }],
    });
    const text = renderScreen(s, { columns: 200, rows: 40 }, plain, 0).join("\n");
    expect(text).not.toMatch(/[\x1b\x9b]/);
    expect(text).toContain("taken?[2J?31m");
  });

  test("several tunnels are named on their lines", () => {
    const s = state(0, {
      tunnels: [
        { name: "web", url: "https://web.example.com", local: "localhost:3000", protocol: "http" },
        { name: "db", url: "tcp://example.com:20001", local: "localhost:5432", protocol: "tcp" },
      ],
    });
    s.recent.add({ kind: "tcp", time: "12:00:01", tunnel: "db", remote: "203.0.113.9:4000", open: false, bytesIn: 5, bytesOut: 7, ms: 2500 });
    const text = renderScreen(s, { columns: 120, rows: 40 }, plain, 0).join("\n");
    expect(text).toMatch(/Forwarding\s+web\s+https:\/\/web\.example\.com -> localhost:3000/);
    expect(text).toMatch(/Forwarding\s+db\s+tcp:\/\/example\.com:20001 -> localhost:5432/);
    expect(text).toContain("Requests and Connections");
    expect(text).toMatch(/12:00:01\s+db\s+TCP\s+203\.0\.113\.9:4000\s+closed\s+in 5 B, out 7 B\s+2\.5 s/);
  });

  test("a udp tunnel's flows: UDP Flows, each with its datagrams and bytes each way, what was dropped, its age and the service's error", () => {
    const s = state(0, { tunnels: [{ name: "udp", url: "udp://example.com:20002", local: "localhost:53", protocol: "udp" }] });
    s.recent.add({ kind: "udp", time: "12:00:01", tunnel: "udp", remote: "203.0.113.9:5353", open: true });
    s.recent.add({ kind: "udp", time: "12:00:02", tunnel: "udp", remote: "203.0.113.9:5353", open: false, datagramsIn: 3, datagramsOut: 2, bytesIn: 90, bytesOut: 240, dropped: 1, ms: 61_000, error: "connection refused" });
    const text = renderScreen(s, { columns: 160, rows: 40 }, plain, 0).join("\n");
    expect(text).toContain("UDP Flows");
    expect(text).toMatch(/12:00:01\s+UDP\s+203\.0\.113\.9:5353\s+new flow/);
    expect(text).toMatch(/12:00:02\s+UDP\s+203\.0\.113\.9:5353\s+ended\s+in 3 \(90 B\), out 2 \(240 B\), 1 dropped\s+1 min 01 s\s+connection refused/);
  });
});

describe("fit", () => {
  test("cuts by terminal columns: escape codes take none, wide characters two", () => {
    expect(fit("hello", 10)).toEqual({ text: "hello", width: 5 });
    expect(fit("hello world", 5)).toEqual({ text: "hello", width: 5 });
    expect(fit("hello world", 6, "…")).toEqual({ text: "hello…", width: 6 });
    expect(fit("\x1b[31mred text\x1b[39m", 3)).toEqual({ text: "\x1b[31mred\x1b[0m", width: 3 });
    expect(fit("日本語です", 5)).toEqual({ text: "日本", width: 4 });
    expect(fit("abc", 0)).toEqual({ text: "", width: 0 });
  });
});
