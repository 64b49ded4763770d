/**
 * Hostile agents against the real server: random frame streams on the
 * agents' WebSocket and on the direct port, before the handshake and after a
 * valid HELLO with a real token, while a visitor's request (HTTP, WebSocket
 * or TCP) is in flight on the hostile tunnel, so the mux and the edge's
 * stream handling get random stream ids, WINDOW overflows, DATA without
 * OPEN, REPLYs of any shape, RST codes of random bytes, FIN twice, and so on.
 *
 * The edge may answer with an ERROR frame (and close), just close, or go on;
 * it never sends bytes that are not frames, never crashes, never logs at
 * error level, and the visitor gets what the agent said, a 502/503/504 or a
 * closed connection. After all of it a real agent's tunnel still answers and
 * the server's memory did not run away.
 *
 * FUZZ_SEED=<seed> replays a failure fast-check reported.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Socket } from "bun";
import fc from "fast-check";
import { FrameType, MAX_PAYLOAD, PROTOCOL_VERSION } from "../../src/protocol/wire.ts";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { agentWebSocketPeer } from "../harness/agent-peer.ts";
import { startAgent, tunnelFetch, type TestAgent } from "../harness/agent.ts";
import {
  faultLines,
  frameAligned,
  fuzzParams,
  hostileDirect,
  hostileWebSocket,
  rawExchange,
  rawFrame,
  rssBytes,
  sendInPieces,
  settle,
  settledRss,
  type HostilePeer,
} from "../harness/fuzz.ts";
import { freeRange } from "../harness/ports.ts";
import { startServer, type TestServer } from "../harness/server.ts";

const RUNS = 150;
const TIME_LIMIT_MS = 20_000;
const TEST_TIMEOUT_MS = 45_000;
/** Longest a step of a run waits for the edge (READY, OPEN, PONG, a close). */
const WAIT_MS = 3_000;
const RSS_GROWTH_LIMIT = 64 * 1024 * 1024;
const encoder = new TextEncoder();

let server: TestServer;
let api: AdminClient;
let steady: TestAgent;
let hostileToken: string;
let rssBefore: number;
/** Session ids from READYs so far, for HELLOs that ask to resume one. */
const sessions: string[] = [];
const tally = new Map<string, number>();
const count = (what: string) => tally.set(what, (tally.get(what) ?? 0) + 1);
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("still here") });

beforeAll(async () => {
  const tcp = freeRange(16);
  server = await startServer({
    // The handshake throttle turns an address away (RATE_LIMITED) after ~20 failed handshakes a
    // minute; this file fails hundreds on purpose, and a throttled HELLO is never parsed, which
    // would hide the very paths under test.
    // A stream the agent never answers leaves its visitor waiting for the response timeout; a
    // fifth of a second keeps such runs short, and the REPLYs sent here come within milliseconds
    // of their OPEN.
    args: ["--handshake-limit", "100000", "--tcp-ports", `${tcp.first}-${tcp.last}`, "--response-timeout", "0.2"],
  });
  api = await signedIn(server);
  const steadyToken = await api.createToken(await api.createUser("steady"));
  hostileToken = await api.createToken(await api.createUser("hostile"));
  steady = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token: steadyToken, args: ["--subdomain", "steady"] });
  expect(await (await tunnelFetch(server.edgePort, "steady", "/")).text()).toBe("still here");
  rssBefore = rssBytes(server.proc.pid);
});
afterAll(async () => {
  console.log("agent-frames fuzz outcomes:", Object.fromEntries([...tally].sort()));
  await steady?.stop();
  await server?.stop();
  upstream.stop(true);
});

// -- frames, as a hostile agent writes them ---------------------------------------------------------

const json = (value: unknown) => encoder.encode(JSON.stringify(value));
const u32 = (n: number) => {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, n >>> 0);
  return b;
};
function filled(size: number, seed: number): Uint8Array {
  const out = new Uint8Array(size);
  for (let i = 0; i < size; i++) out[i] = (seed + i * 31) & 0xff;
  return out;
}

/** Which stream a frame names: the visitor's (the id of the OPEN the edge sent, plus an offset) or a fixed id. */
type StreamRef = { visitor: number } | { id: number };
const streamRef: fc.Arbitrary<StreamRef> = fc.oneof(
  { arbitrary: fc.constantFrom(0, 0, 0, 2, -2, 1).map((visitor) => ({ visitor })), weight: 5 },
  { arbitrary: fc.constantFrom(0, 1, 2, 3, 4, 5, 0x7fff_ffff, 0x8000_0000, 0xffff_fffe, 0xffff_ffff).map((id) => ({ id })), weight: 2 },
  { arbitrary: fc.integer({ min: 0, max: 0xffff_ffff }).map((id) => ({ id })), weight: 1 },
);

const text = (max: number) => fc.string({ unit: "binary", maxLength: max });
const headerPair = fc.tuple(
  fc.oneof(fc.constantFrom("content-length", "content-type", "set-cookie", "transfer-encoding", "connection", "upgrade", "x-a", "location", "date"), text(12)),
  fc.oneof(fc.constantFrom("0", "5", "-1", "999999999999", "chunked", "close", "text/html", "a\r\nb: c", ""), text(40)),
);
/**
 * REPLY heads, with any status the protocol allows (100-999): those no visitor can be given (1xx
 * but 101, 600-999) must get the visitor a 502, as any other status its own answer.
 */
const replyHead = fc.record({
  status: fc.oneof({ arbitrary: fc.integer({ min: 200, max: 599 }), weight: 3 }, fc.constantFrom(101, 100, 103, 199, 600, 999), fc.integer({ min: 100, max: 999 })),
  headers: fc.array(headerPair, { maxLength: 6 }),
});
/**
 * REPLY for a ws stream: the subprotocol the local service chose. Any string: one the visitor
 * offered (its WebSocket offers chat and superchat) opens, anything else (not offered, no token,
 * no valid header value) gets the visitor a 502.
 */
const OFFERED = ["chat", "superchat"];
const wsReply = fc
  .record({ protocol: fc.option(fc.oneof(fc.string({ unit: "binary", maxLength: 20 }), fc.constantFrom(...OFFERED, "other", "chat, superchat", "a, b", "")), { nil: undefined }) })
  .map(json);
const anyJson = fc.jsonValue({ maxDepth: 3 }).map(json);
const randomBytes = fc.uint8Array({ maxLength: 64 });

/** A payload to suit a frame type: well-formed, nearly so, or anything. */
function payloadFor(type: number): fc.Arbitrary<Uint8Array> {
  switch (type & 0x7f) {
    case FrameType.WINDOW:
      return fc.oneof(fc.constantFrom(0, 1, 0x10000, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff).map(u32), fc.integer({ min: 0, max: 0xffff_ffff }).map(u32), randomBytes);
    case FrameType.DATA:
      return fc.oneof(
        { arbitrary: randomBytes, weight: 6 },
        // enough to overrun a 512 KiB window in two or three frames
        { arbitrary: fc.constantFrom(MAX_PAYLOAD, 200_000).map((n) => filled(n, n)), weight: 1 },
      );
    case FrameType.REPLY:
      return fc.oneof({ arbitrary: replyHead.map(json), weight: 4 }, { arbitrary: wsReply, weight: 1 }, anyJson, randomBytes);
    case FrameType.RST:
      return fc.oneof(
        fc.constantFrom("CANCELLED", "UPSTREAM_FAILED", "UPSTREAM_FAILED refused", "").map((s) => encoder.encode(s)),
        randomBytes,
        text(300).map((s) => encoder.encode(s)),
      );
    case FrameType.OPEN:
      return fc.oneof(fc.record({ tunnel: text(8), kind: fc.constantFrom("http", "ws", "tcp"), remote: text(8) }).map(json), anyJson, randomBytes);
    case FrameType.HELLO:
      return fc.oneof(fc.constant(null).map(() => json({ version: PROTOCOL_VERSION, token: hostileToken, tunnels: [{ protocol: "http" }] })), anyJson, randomBytes);
    case FrameType.ERROR:
      return fc.oneof(fc.record({ code: text(20), message: text(40) }).map(json), anyJson, randomBytes);
    default:
      return fc.oneof(fc.constant(new Uint8Array(0)), fc.nat().map(u32), anyJson, randomBytes);
  }
}

const KNOWN = Object.values(FrameType) as number[];
const typeByte = fc.oneof(
  { arbitrary: fc.constantFrom(...KNOWN), weight: 8 },
  { arbitrary: fc.constantFrom(FrameType.OPEN, FrameType.REPLY, FrameType.DATA).map((t) => t | 0x80), weight: 3 },
  { arbitrary: fc.nat(255), weight: 1 },
);

/** One piece of what a hostile agent sends: a frame, an oversized header, or junk. */
type Piece = { kind: "frame"; type: number; stream: StreamRef; payload: Uint8Array } | { kind: "bytes"; bytes: Uint8Array };
const frame = (type: fc.Arbitrary<number>, stream: fc.Arbitrary<StreamRef>, payload: (type: number) => fc.Arbitrary<Uint8Array>): fc.Arbitrary<Piece> =>
  type.chain((t) => fc.record({ kind: fc.constant("frame" as const), type: fc.constant(t), stream, payload: payload(t) }));

/** What an agent may say on the visitor's stream, mostly well formed, so that runs go on long enough to reach the stream's later states. */
const onVisitorStream = frame(
  fc.constantFrom(FrameType.REPLY, FrameType.REPLY | 0x80, FrameType.DATA, FrameType.DATA, FrameType.DATA | 0x80, FrameType.WINDOW, FrameType.FIN, FrameType.RST),
  fc.constant({ visitor: 0 }),
  (t) =>
    (t & 0x7f) === FrameType.REPLY
      ? fc.oneof({ arbitrary: replyHead.map(json), weight: 3 }, { arbitrary: wsReply, weight: 1 })
      : (t & 0x7f) === FrameType.WINDOW
        ? fc.oneof(fc.integer({ min: 1, max: 0x10000 }).map(u32), fc.constantFrom(0x7fff_ffff, 0xffff_ffff).map(u32))
        : (t & 0x7f) === FrameType.FIN
          ? fc.constant(new Uint8Array(0))
          : payloadFor(t),
);
const keepalive = frame(fc.constantFrom(FrameType.PING, FrameType.PONG), fc.constant({ id: 0 }), () => fc.uint8Array({ minLength: 4, maxLength: 4 }));

const piece: fc.Arbitrary<Piece> = fc.oneof(
  { arbitrary: onVisitorStream, weight: 10 },
  { arbitrary: keepalive, weight: 1 },
  { arbitrary: frame(typeByte, streamRef, payloadFor), weight: 4 },
  { arbitrary: fc.record({ kind: fc.constant("bytes" as const), bytes: fc.uint8Array({ minLength: 1, maxLength: 40 }) }), weight: 1 },
  {
    arbitrary: fc.integer({ min: MAX_PAYLOAD + 1, max: 0xffff_ffff }).map((length) => {
      const header = rawFrame(FrameType.DATA, 2, new Uint8Array(0));
      new DataView(header.buffer).setUint32(5, length);
      return { kind: "bytes" as const, bytes: header };
    }),
    weight: 1,
  },
);
/** Messages (for the WebSocket; back to back on the direct port), each of one or more pieces; a piece now and then repeated (FIN twice). */
const messages = fc.array(
  fc.array(piece, { minLength: 1, maxLength: 3 }).chain((ps) => fc.boolean().map((twice) => (twice ? [...ps, ps[ps.length - 1]!] : ps))),
  { minLength: 1, maxLength: 3 },
);

const streamId = (ref: StreamRef, visitorStream: number) => ("visitor" in ref ? Math.max(0, visitorStream + ref.visitor) : ref.id);

function encodePiece(p: Piece, visitorStream: number): Uint8Array {
  return p.kind === "bytes" ? p.bytes : rawFrame(p.type, streamId(p.stream, visitorStream), p.payload);
}
const concat = (parts: Uint8Array[]) => new Uint8Array(Buffer.concat(parts));

const decoder = new TextDecoder();
/** The edge's answers are whole frames, and each ERROR is a refusal {code, message} after which it closes. */
async function expectSaneAnswers(peer: HostilePeer): Promise<void> {
  expect(peer.bad).toEqual([]);
  const errors = peer.frames.filter((f) => f.type === FrameType.ERROR);
  for (const e of errors) {
    const refusal = JSON.parse(decoder.decode(e.payload));
    expect(typeof refusal.code).toBe("string");
    expect(typeof refusal.message).toBe("string");
  }
  if (errors.length > 0) expect(await peer.until(() => peer.closed, WAIT_MS)).toBe(true);
}

async function checkServer(from: number): Promise<void> {
  // the server writes its log line before it answers; a moment more lets the pipe bring it here,
  // so a fault is blamed on the run that caused it (which fast-check's shrinking relies on)
  await Bun.sleep(10);
  if (server.proc.exitCode !== null || server.proc.signalCode !== null) throw new Error(`the server exited (${server.proc.exitCode ?? server.proc.signalCode})`);
  // a line may come a moment late and be blamed on the next run; the final check sees them all
  const faults = faultLines(server.output.lines.slice(from));
  if (faults.length > 0) throw new Error(`the server logged:\n${faults.join("\n")}`);
}

// -- visitors of the hostile tunnel ---------------------------------------------------------------

type VisitorKind = "none" | "http" | "post" | "ws" | "tcp";
interface VisitorResult {
  /** HTTP status, or 0 for a close; undefined for ws and tcp. */
  status?: number;
  /** Nothing ended it within VISITOR_WAIT_MS: the edge left the visitor hanging. */
  timedOut: boolean;
}
/** The response timeout (0.2 s) and then some: every visitor is answered or closed by then once its agent is gone. */
const VISITOR_WAIT_MS = 5_000;

/** Starts a visitor of the granted tunnel; resolves (bounded) with what it got once the run is over. */
function startVisitor(kind: VisitorKind, granted: { subdomain?: string; port?: number }): Promise<VisitorResult> {
  const host = `${granted.subdomain}.localhost:${server.edgePort}`;
  if (kind === "http" || kind === "post") {
    const request =
      kind === "http"
        ? `GET /visit HTTP/1.1\r\nHost: ${host}\r\nX-Burrow-Skip-Warning: 1\r\n\r\n`
        : `POST /visit HTTP/1.1\r\nHost: ${host}\r\nX-Burrow-Skip-Warning: 1\r\nContent-Length: 5\r\n\r\nhello`;
    return rawExchange(server.edgePort, request, VISITOR_WAIT_MS).then((ex) => ({ status: ex.status, timedOut: ex.timedOut && ex.status === 0 }));
  }
  if (kind === "ws") {
    return new Promise((resolve) => {
      const ws = new WebSocket(`ws://127.0.0.1:${server.edgePort}/visit`, { headers: { Host: host }, protocols: OFFERED } as any);
      const done = (timedOut = false) => {
        clearTimeout(timer);
        try {
          ws.close();
        } catch {}
        resolve({ timedOut });
      };
      const timer = setTimeout(() => done(true), VISITOR_WAIT_MS);
      ws.onopen = () => ws.send("from the visitor");
      ws.onclose = () => done();
      ws.onerror = () => done();
    });
  }
  return new Promise((resolve) => {
    let sock: Socket<undefined> | undefined;
    const done = (timedOut = false) => {
      clearTimeout(timer);
      sock?.terminate();
      resolve({ timedOut });
    };
    const timer = setTimeout(() => done(true), VISITOR_WAIT_MS);
    // the edge half-closing (end) is as good as a close: the tunnel said all it will
    const handlers = { open: (s: Socket<undefined>) => void s.write("from the visitor"), data() {}, end: () => done(), close: () => done(), error: () => done() };
    Bun.connect({ hostname: "127.0.0.1", port: granted.port!, socket: handlers }).then(
      (s) => (sock = s),
      () => done(),
    );
  });
}

// -- the properties ---------------------------------------------------------------------------------

const subdomain = fc.oneof(fc.constant(undefined), fc.stringMatching(/^[a-z][a-z0-9]{2,10}$/), fc.constantFrom("steady", "www", "a--b", "UPPER"));
const scenario = fc.record({
  transport: fc.constantFrom("websocket", "direct"),
  protocol: fc.constantFrom("http", "http", "http", "tcp"),
  subdomain,
  /** Only honoured on the WebSocket: direct there means MOVE, and the run ends early. */
  direct: fc.oneof({ arbitrary: fc.constant(false), weight: 9 }, { arbitrary: fc.constant(true), weight: 1 }),
  resume: fc.oneof({ arbitrary: fc.constant(-1), weight: 4 }, { arbitrary: fc.nat(), weight: 1 }),
  visitor: fc.constantFrom<VisitorKind>("none", "http", "http", "post", "ws", "tcp"),
  messages,
  cuts: fc.array(fc.nat(), { maxLength: 8 }),
});
type Scenario = typeof scenario extends fc.Arbitrary<infer S> ? S : never;

/** Statuses a visitor may see: what the hostile agent said in a REPLY on its stream, or what a tunnel says when its agent fails. */
function allowedStatuses(s: Scenario, visitorStream: number): Set<number> {
  const allowed = new Set([0, 502, 503, 504]);
  for (const m of s.messages) {
    for (const p of m) {
      if (p.kind !== "frame" || (p.type & 0x7f) !== FrameType.REPLY || streamId(p.stream, visitorStream) !== visitorStream) continue;
      try {
        const status = JSON.parse(decoder.decode(p.payload)).status;
        if (typeof status === "number") allowed.add(status);
      } catch {}
    }
  }
  return allowed;
}

async function runScenario(s: Scenario): Promise<void> {
  const from = server.output.lines.length;
  const peer = s.transport === "websocket" ? await hostileWebSocket(server.edgePort, WAIT_MS) : await hostileDirect(server.agentPort!);
  let visitor: Promise<VisitorResult> | undefined;
  try {
    const hello = {
      version: PROTOCOL_VERSION,
      token: hostileToken,
      tunnels: [s.protocol === "http" ? { protocol: "http", ...(s.subdomain ? { subdomain: s.subdomain } : {}) } : { protocol: "tcp" }],
      direct: s.direct,
      ...(s.resume >= 0 && sessions.length > 0 ? { resume: sessions[s.resume % sessions.length] } : {}),
    };
    peer.send(rawFrame(FrameType.HELLO, 0, json(hello)));
    const answered = () => peer.frames.some((f) => f.type === FrameType.READY || f.type === FrameType.ERROR || f.type === FrameType.MOVE);
    await peer.until(() => answered() || peer.closed, WAIT_MS);
    const ready = peer.frames.find((f) => f.type === FrameType.READY);
    const refusal = peer.frames.find((f) => f.type === FrameType.ERROR);
    const move = peer.frames.some((f) => f.type === FrameType.MOVE);
    count(`${s.transport} hello ${ready ? "ready" : move ? "move" : refusal ? JSON.parse(decoder.decode(refusal.payload)).code : peer.closed ? "closed" : "nothing"}`);
    let visitorStream = 2;
    let opened = false;
    let kind: VisitorKind = "none";
    if (ready) {
      const granted = JSON.parse(decoder.decode(ready.payload));
      sessions.push(granted.session);
      const tunnel = granted.tunnels[0];
      // a tcp tunnel gets a tcp visitor, an http tunnel any other
      kind = s.visitor === "none" ? "none" : tunnel.protocol === "tcp" ? "tcp" : s.visitor === "tcp" ? "http" : s.visitor;
      if (kind !== "none") {
        visitor = startVisitor(kind, tunnel);
        const open = () => peer.frames.find((f) => f.type === FrameType.OPEN);
        await peer.until(() => open() !== undefined || peer.closed, WAIT_MS);
        opened = open() !== undefined;
        visitorStream = open()?.stream ?? 2;
      }
    }
    // the hostile part: one message at a time on the WebSocket, back to back in random pieces on the direct port
    const sent = s.messages.map((m) => concat(m.map((p) => encodePiece(p, visitorStream))));
    if (s.transport === "websocket") for (const m of sent) peer.send(m);
    else sendInPieces(peer, concat(sent), s.cuts);
    // a partial frame left at the end of the direct stream swallows the PING: then only a close can be waited for
    const outcome = s.transport === "direct" && !frameAligned(concat(sent)) ? ((await peer.until(() => peer.closed, 300)) ? "closed" : "waiting") : await settle(peer, WAIT_MS);
    count(`${s.transport} after ${outcome}`);
    if (outcome === "timeout") throw new Error("the edge neither answered the PING nor closed");
    await expectSaneAnswers(peer);
    peer.close();
    if (visitor) {
      const result = await visitor;
      if (result.timedOut) throw new Error(`the ${kind} visitor was neither answered nor closed within ${VISITOR_WAIT_MS} ms of its agent leaving`);
      if (result.status !== undefined) {
        count(`visitor ${result.status}`);
        const allowed = allowedStatuses(s, visitorStream);
        if (!opened) allowed.add(404); // the tunnel may be gone before the request reached it
        if (!allowed.has(result.status)) throw new Error(`the visitor got ${result.status}; allowed: ${[...allowed].join(", ")}`);
      }
    }
  } finally {
    peer.close();
    await visitor;
  }
  await checkServer(from);
}

describe("a hostile agent", () => {
  test(
    "random messages on the agents' WebSocket, then a fatal frame: the edge answers ERROR frames or nothing, and closes",
    async () => {
      const junk = fc.array(fc.oneof(piece.map((p) => encodePiece(p, 2)), fc.uint8Array({ maxLength: 40 })), { minLength: 1, maxLength: 5 });
      // a frame of an unknown type: a protocol error whatever came before, so every run ends with a close
      const fatal = rawFrame(0x7f, 0, new Uint8Array(0));
      await fc.assert(
        fc.asyncProperty(junk, fc.boolean(), async (msgs, asText) => {
          const from = server.output.lines.length;
          const sent: (string | Uint8Array)[] = asText ? [...msgs.slice(1), decoder.decode(msgs[0])] : msgs;
          const { frames, closed } = await agentWebSocketPeer(server.edgePort, [...sent.filter((m) => typeof m === "string" || m.byteLength > 0), fatal], WAIT_MS);
          count(`websocket junk ${closed ? "closed" : "open"}`);
          expect(closed).toBe(true);
          for (const f of frames.filter((f) => f.type === FrameType.ERROR)) expect(typeof JSON.parse(decoder.decode(f.payload)).code).toBe("string");
          await checkServer(from);
        }),
        fuzzParams(RUNS, TIME_LIMIT_MS),
      );
    },
    TEST_TIMEOUT_MS,
  );

  test(
    "random bytes on the direct port, cut anywhere: the edge answers ERROR frames or nothing, and closes on a fatal frame",
    async () => {
      const bytes = fc.array(fc.oneof(piece.map((p) => encodePiece(p, 2)), fc.uint8Array({ maxLength: 40 })), { minLength: 1, maxLength: 6 }).map(concat);
      await fc.assert(
        fc.asyncProperty(bytes, fc.array(fc.nat(), { maxLength: 10 }), async (all, cuts) => {
          const from = server.output.lines.length;
          const peer = await hostileDirect(server.agentPort!);
          try {
            sendInPieces(peer, all, cuts);
            if (frameAligned(all)) {
              peer.send(rawFrame(0x7f, 0, new Uint8Array(0)));
              const closed = await peer.until(() => peer.closed, WAIT_MS);
              count(`direct junk ${closed ? "closed" : "open"}`);
              expect(closed).toBe(true);
            } else count("direct junk unaligned");
            await expectSaneAnswers(peer);
          } finally {
            peer.close();
          }
          await checkServer(from);
        }),
        fuzzParams(RUNS, TIME_LIMIT_MS),
      );
    },
    TEST_TIMEOUT_MS,
  );

  test(
    "a valid HELLO with a real token, a visitor in flight, then random frames on either transport: ERROR, close or goes on, and the visitor gets what the agent said or a 502",
    async () => {
      await fc.assert(fc.asyncProperty(scenario, runScenario), fuzzParams(RUNS * 2, TIME_LIMIT_MS, { timeout: 20_000 }));
    },
    TEST_TIMEOUT_MS,
  );
});

// Found by this file and fixed since, each with a regression test (test/e2e/hostile-agent.test.ts
// unless named); the property above covers them all again:
// - a REPLY whose status is valid for the protocol (an integer 100-999) but outside what a Response
//   may carry (101, 200-599) made the edge answer 500 and log an error; from burrow's own agent too,
//   for a local service answering `HTTP/1.1 600 Weird` (also test/e2e/pages-errors.test.ts);
// - a stream reset in the same read as its REPLY (the agent's RST, a protocol error that closes the
//   connection, or the edge's own reset of a ws stream whose early DATA is no valid record) came
//   before the edge attached its listeners, a microtask later, and was never seen: the visitor hung
//   for ever (also test/protocol/mux.test.ts);
// - a ws REPLY whose `protocol` is no valid header value (e.g. {"protocol":"\u0100"}) made
//   server.upgrade() throw: a 500 and an error line; the edge now takes only a subprotocol the
//   visitor offered;
// - an agent whose connection ends (or that resets its stream) while a visitor's response body
//   streams made Bun print the body stream's error, `error: stream reset: GOING_AWAY` with a source
//   excerpt and a stack, to the server's stderr once per visitor cut off.

// Also fixed since: a stream the agent ended (FIN) without a REPLY left its visitor waiting for
// --response-timeout (60 s by default); the edge now answers 502 within one sweep of its waiting
// requests (50 ms). Regression test: "an agent that ends ... without any REPLY" in
// test/e2e/hostile-agent.test.ts.

describe("after all of it", () => {
  test("the server is alive, logged no error, its memory stayed bounded, and a real agent's tunnel answers", async () => {
    expect(server.proc.exitCode).toBeNull();
    expect(faultLines(server.output.lines)).toEqual([]);
    const res = await tunnelFetch(server.edgePort, "steady", "/");
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("still here");
    expect(steady.proc.exitCode).toBeNull();
    expect((await api.get("/api/auth/me")).status).toBe(200);
    const growth = (await settledRss(server.proc.pid, rssBefore + RSS_GROWTH_LIMIT)) - rssBefore;
    console.log(`server RSS: ${(rssBefore / 2 ** 20).toFixed(1)} MiB before, ${(growth / 2 ** 20).toFixed(1)} MiB growth`);
    expect(growth).toBeLessThan(RSS_GROWTH_LIMIT);
  });
});
