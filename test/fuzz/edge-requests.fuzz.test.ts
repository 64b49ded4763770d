/**
 * Hostile HTTP requests, as raw bytes, against the real server process: to
 * the edge with a Host naming a live tunnel (and mutations of it), and to
 * the admin port. Random request lines, Host headers, header blocks and
 * bodies get a 2xx/3xx/4xx answer or a closed connection, never a server
 * fault; afterwards the process is alive, logged no error, serves the
 * tunnel and the admin API, and its memory did not run away.
 *
 * What counts as a server fault, per port:
 * - admin port: any 5xx. Nothing there waits on anyone else, so a 5xx can
 *   only be a bug (its generic handler answers 500 and logs at error level).
 * - edge: any 5xx but 502, 503 and 504, which are what a tunnel says when
 *   its agent or local service fails, is busy or too slow (or the edge is
 *   over its connection cap): legitimate answers to a visitor. A 500 is
 *   always the edge's own failure (Bun's error handler, logged at error
 *   level); the local service here only ever answers 200.
 * - admin port: Bun's own HTTP parser refuses a request line it cannot read
 *   (a version other than HTTP/1.x, a control character in the target, bare
 *   LF line endings) with a bare `505 HTTP Version Not Supported` and
 *   `Connection: close` before any of burrow's code runs. That head exactly
 *   is accepted, as the parser's 400: burrow has no hook to change it.
 * - edge: burrow's own parser answers 505 to a request line whose version is
 *   not HTTP/1.0 or 1.1, and 501 to a Transfer-Encoding it does not know
 *   (RFC 9112): accepted for such requests only.
 *
 * A request the generator knows to be complete (its body framed as
 * declared) must be answered or closed within EXCHANGE_TIMEOUT_MS; one that
 * announces more body than it sends may be left waiting. After every
 * request to the edge, a plain request to the tunnel must still get the
 * local service's 200: whatever one visitor sends must not spill into the
 * next visitor's exchange (the agent keeps connections to the local
 * service alive between requests).
 *
 * FUZZ_SEED=<seed> replays a failure fast-check reported.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent, tunnelFetch, type TestAgent } from "../harness/agent.ts";
import { faultLines, fuzzParams, rawExchange, rssBytes, settledRss, type Exchange } from "../harness/fuzz.ts";
import { startServer, type TestServer } from "../harness/server.ts";

const RUNS = 300;
const TIME_LIMIT_MS = 15_000;
const TEST_TIMEOUT_MS = 40_000;
const EXCHANGE_TIMEOUT_MS = 2_000;
/** How much the server's RSS may grow over all the properties. */
const RSS_GROWTH_LIMIT = 64 * 1024 * 1024;
/** Bun's parser refusing a request line, before any handler: see the header comment. */
const PARSER_505 = "HTTP/1.1 505 HTTP Version Not Supported\r\nConnection: close";

let server: TestServer;
let agent: TestAgent;
let api: AdminClient;
let adminPort: number;
let tunnelHost: string;
let rssBefore: number;
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("still here") });
/** Every exchange's outcome, for the summary printed at the end. */
const tally = new Map<string, number>();

beforeAll(async () => {
  server = await startServer();
  adminPort = Number(new URL(server.adminUrl).port);
  api = await signedIn(server);
  const token = await api.createToken(await api.createUser("steady"));
  agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token, args: ["--subdomain", "steady"] });
  tunnelHost = `steady.localhost:${server.edgePort}`;
  // warm both ports up once, so the baseline includes what a first request allocates
  expect(await (await tunnelFetch(server.edgePort, "steady", "/")).text()).toBe("still here");
  expect((await api.get("/api/users")).status).toBe(200);
  rssBefore = rssBytes(server.proc.pid);
});
afterAll(async () => {
  console.log("edge-requests fuzz outcomes:", Object.fromEntries([...tally].sort()));
  await agent?.stop();
  await server?.stop();
  upstream.stop(true);
});

// -- generators ------------------------------------------------------------------------------------

const ANY_CHAR = fc.string({ unit: "binary", minLength: 1, maxLength: 1 });
/** Characters that mean something in a request line or a Host. */
const SPECIAL = fc.constantFrom(".", ":", "@", "%", "/", "?", "#", " ", "\t", "\0", "\r", "\n", "[", "]", "\\", "ü", "-", "_", "*", ",", ";", "\x7f");

/** `s` with a few characters inserted, deleted, replaced or upper-cased. */
function mutated(s: string): fc.Arbitrary<string> {
  const edit = fc.record({ kind: fc.constantFrom("insert", "delete", "replace", "upper", "double"), at: fc.nat(), char: fc.oneof(SPECIAL, ANY_CHAR) });
  return fc.array(edit, { minLength: 1, maxLength: 4 }).map((edits) => {
    let out = s;
    for (const e of edits) {
      const at = out.length === 0 ? 0 : e.at % out.length;
      if (e.kind === "insert") out = out.slice(0, at) + e.char + out.slice(at);
      else if (e.kind === "delete") out = out.slice(0, at) + out.slice(at + 1);
      else if (e.kind === "replace") out = out.slice(0, at) + e.char + out.slice(at + 1);
      else if (e.kind === "upper") out = out.toUpperCase();
      else out = out.slice(0, at) + out.slice(at) + out.slice(at);
    }
    return out;
  });
}

const method = fc.oneof(
  { arbitrary: fc.constantFrom("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"), weight: 6 },
  { arbitrary: fc.constantFrom("CONNECT", "TRACE", "get", "FOO", "PRI", "M-SEARCH", "PROPFIND", "", "G ET"), weight: 2 },
  { arbitrary: fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,16}$/), weight: 1 },
  { arbitrary: fc.string({ unit: "binary", maxLength: 10 }), weight: 1 },
);

const segment = fc.oneof(
  fc.webSegment(),
  fc.constantFrom("", ".", "..", "%", "%2", "%zz", "%00", "%2e%2e", "%2F", "%C0%AF", "%ff", "_burrow", "api", "users", "1", "-1", "99999999999999999999", "a b"),
  fc.string({ unit: "binary", maxLength: 8 }),
);
const path = fc.array(segment, { maxLength: 6 }).map((s) => "/" + s.join("/"));
const target = fc.oneof(
  { arbitrary: path, weight: 4 },
  { arbitrary: fc.tuple(path, fc.string({ unit: "binary", maxLength: 20 })).map(([p, q]) => `${p}?${q}`), weight: 2 },
  {
    arbitrary: fc.constantFrom(
      "*", "/", "//", "///", "//x/y", "http://x/", "http://x", "https://steady.localhost/", "http://[::1]/", "http://a@b/", "x", "?", "#", "/?", "/#a", "",
      "/_burrow/connect", "/_burrow/continue?to=%2F", "/_burrow/continue?to=//evil.example", "/_burrow/continue?to=%zz",
      "/api/users", "/api/users/1", "/api/users/abc/tokens", "/api/users/99999999999999999999", "/api/auth/me", "/api/auth/login",
      "/api/analytics/traffic?days=x&user_id=-1", "/api/tunnels/active", "/api/dashboard", "/api/server", "/api/domains", "/index.html",
    ),
    weight: 3,
  },
  { arbitrary: fc.integer({ min: 1_000, max: 90_000 }).map((n) => "/" + "a".repeat(n)), weight: 1 },
  { arbitrary: fc.webUrl({ withQueryParameters: true, withFragments: true }), weight: 1 },
  { arbitrary: mutated("/api/users/1?x=%41"), weight: 1 },
);
const version = fc.oneof(
  { arbitrary: fc.constant("HTTP/1.1"), weight: 8 },
  { arbitrary: fc.constantFrom("HTTP/1.0", "HTTP/2.0", "HTTP/1.2", "HTTP/0.9", "http/1.1", "HTTP/1.1 ", "", "HTTP/1", "HTTP/11"), weight: 2 },
);

/** A Host: the valid one, a mutation of it, a near miss, or anything. */
function hostHeader(valid: string): fc.Arbitrary<string> {
  const port = valid.slice(valid.lastIndexOf(":") + 1);
  return fc.oneof(
    { arbitrary: fc.constant(valid), weight: 3 },
    { arbitrary: mutated(valid), weight: 4 },
    {
      arbitrary: fc.constantFrom(
        "", "localhost", `localhost:${port}`, "[::1]", "[::1]:80", "[::1", "127.0.0.1", `127.0.0.1:${port}`, "steady.localhost", "STEADY.LOCALHOST",
        "steady.localhost.", "a.steady.localhost", "nope.localhost", "localhost:99999999", "localhost:-1", "localhost:", ":80", "x".repeat(300),
        `steady.localhost:${port}:${port}`, "steady.localhost@evil", `www.localhost:${port}`, "admin.localhost",
      ),
      weight: 2,
    },
    { arbitrary: fc.string({ unit: "binary", maxLength: 40 }), weight: 2 },
    { arbitrary: fc.domain(), weight: 1 },
  );
}

/** A raw header line; `framing` marks lines that change how the body is delimited. */
interface HeaderLine {
  text: string;
  framing?: boolean;
}

const headerName = fc.oneof(
  fc.constantFrom(
    "X-A", "Accept", "User-Agent", "Cookie", "Origin", "Sec-Fetch-Site", "X-Forwarded-For", "X-Forwarded-Host", "X-Burrow-Skip-Warning",
    "Connection", "Upgrade", "Via", "Forwarded",
  ),
  fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,30}$/),
  fc.string({ unit: "binary", maxLength: 12 }),
);
const headerValue = fc.oneof(
  fc.constantFrom("", "Mozilla/5.0", "text/html", "websocket", "Upgrade", "close", "keep-alive, Upgrade", "cross-site", "http://evil.example", "1.2.3.4, ::1, x"),
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.string({ maxLength: 200 }),
);

/** A header a parser accepts: a token name, a value of visible characters. */
const printable = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 60 });
const tokenName = fc.oneof(
  { arbitrary: fc.stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,20}$/), weight: 4 },
  { arbitrary: headerName.filter((n) => /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(n)), weight: 2 },
);

/** Lines a parser takes (so that the request reaches burrow), duplicates of a name included. */
const validLine: fc.Arbitrary<HeaderLine> = fc
  .tuple(tokenName, fc.oneof(headerValue.filter((v) => /^[\x20-\x7e]*$/.test(v)), printable))
  .map(([n, v]) => ({ text: `${n}: ${v}` }));

/** Lines that break a rule, or bend it. */
const hostileLine: fc.Arbitrary<HeaderLine> = fc.oneof(
  { arbitrary: fc.tuple(headerName, headerValue).map(([n, v]) => ({ text: `${n}: ${v}` })), weight: 2 },
  // obs-fold: a value continued on the next line
  { arbitrary: fc.tuple(headerName, headerValue, headerValue).map(([n, a, b]) => ({ text: `${n}: ${a}\r\n ${b}` })), weight: 1 },
  // no colon, space before the colon, an empty name, a line that starts with whitespace
  { arbitrary: fc.string({ maxLength: 30 }).map((s) => ({ text: s.replace(/:/g, "") })), weight: 1 },
  { arbitrary: fc.tuple(headerName, headerValue).map(([n, v]) => ({ text: `${n} : ${v}` })), weight: 1 },
  { arbitrary: headerValue.map((v) => ({ text: `: ${v}` })), weight: 1 },
  { arbitrary: fc.tuple(headerName, headerValue).map(([n, v]) => ({ text: ` ${n}: ${v}` })), weight: 1 },
  // huge values, NUL bytes
  { arbitrary: fc.integer({ min: 4_000, max: 120_000 }).map((n) => ({ text: `X-Big: ${"b".repeat(n)}` })), weight: 1 },
  { arbitrary: fc.constantFrom("X-Nul: a\0b", "X-Nul\0: b", "\0: b", "Host: \0").map((text) => ({ text })), weight: 1 },
  // framing that contradicts itself or the body
  {
    arbitrary: fc
      .constantFrom(
        "Content-Length: 0", "Content-Length: 3", "Content-Length: -1", "Content-Length: 1e3", "Content-Length: 0x10", "Content-Length: 99999999999999999999",
        "Content-Length: 3, 4", "Content-Length: ", "Content-Length:  5 ", "Transfer-Encoding: chunked", "Transfer-Encoding: gzip", "Transfer-Encoding: chunked, chunked",
        "Transfer-Encoding:  chunked", "Transfer-Encoding: identity", "Transfer-Encoding: gzip, chunked", "Expect: 100-continue", "Expect: nonsense",
      )
      .map((text) => ({ text, framing: true })),
    weight: 2,
  },
  // a WebSocket upgrade (to a local service that does not take it)
  {
    arbitrary: fc.constant({ text: "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13" }),
    weight: 1,
  },
);

/** A few valid lines with up to three hostile ones among them (none in about half the blocks, so that many reach burrow's code). */
const hostileLines = fc.array(fc.tuple(hostileLine, fc.nat()), { minLength: 1, maxLength: 3 });
const headerBlock: fc.Arbitrary<HeaderLine[]> = fc
  .tuple(fc.array(validLine, { maxLength: 6 }), fc.oneof(fc.constant<[HeaderLine, number][]>([]), hostileLines))
  .map(([valid, hostile]) => {
    const out = [...valid];
    for (const [line, at] of hostile) out.splice(at % (out.length + 1), 0, line);
    return out;
  });

/** How the generated body is framed: declared exactly, chunked, not at all, or declared longer than sent. */
const framing = fc.constantFrom("length", "chunked", "none", "short");

interface HostileRequest {
  line: string;
  host: { mode: "one" | "none" | "two"; value: string; second: string };
  headers: HeaderLine[];
  framing: "length" | "chunked" | "none" | "short";
  body: Uint8Array;
  eol: string;
  /** A few raw bytes overwritten after serialisation (invalid UTF-8, control bytes). */
  bytes: { at: number; value: number }[];
  /** Send the admin's session cookie (admin port, harmless methods only). */
  session: boolean;
}

/** One Host header mostly; none, or two, now and then. */
const hostMode = fc.oneof(
  { arbitrary: fc.constant<HostileRequest["host"]["mode"]>("one"), weight: 8 },
  { arbitrary: fc.constantFrom<HostileRequest["host"]["mode"]>("none", "two"), weight: 2 },
);
const byteEdits: fc.Arbitrary<HostileRequest["bytes"]> = fc.oneof(
  { arbitrary: fc.constant<HostileRequest["bytes"]>([]), weight: 8 },
  { arbitrary: fc.array(fc.record({ at: fc.nat(), value: fc.nat(255) }), { minLength: 1, maxLength: 3 }), weight: 1 },
);

function request(host: fc.Arbitrary<string>, line: fc.Arbitrary<string>, headers: fc.Arbitrary<HeaderLine[]>): fc.Arbitrary<HostileRequest> {
  return fc.record({
    line,
    host: fc.record({ mode: hostMode, value: host, second: host }),
    headers,
    framing,
    body: fc.uint8Array({ maxLength: 64 }),
    eol: fc.oneof({ arbitrary: fc.constant("\r\n"), weight: 12 }, { arbitrary: fc.constantFrom("\n", "\r", "\r\r\n"), weight: 1 }),
    bytes: byteEdits,
    session: fc.boolean(),
  });
}

const requestLine = fc
  .tuple(method, target, version, fc.constantFrom(" ", " ", " ", "  ", "\t"))
  .map(([m, t, v, sp]) => (v === "" ? `${m}${sp}${t}` : `${m}${sp}${t}${sp}${v}`));
const plainLine = fc.tuple(fc.constantFrom("GET", "HEAD", "POST", "OPTIONS"), fc.constantFrom("/", "/a?b=c", "/api/users", "/api/auth/me")).map(([m, t]) => `${m} ${t} HTTP/1.1`);
const fewPlainHeaders = fc.array(fc.constantFrom<HeaderLine>({ text: "Accept: */*" }, { text: "User-Agent: fuzz" }, { text: "X-Burrow-Skip-Warning: 1" }), { maxLength: 2 });

/** The methods and paths with which a request may carry the admin's cookie: nothing that deletes, revokes, disables or signs out. */
function harmless(line: string): boolean {
  const [m = "", t = ""] = line.split(/[ \t]+/);
  if (["GET", "HEAD", "OPTIONS"].includes(m)) return true;
  return m === "POST" && /^\/api\/(users|domains)\/?$/.test(t);
}

function serialize(r: HostileRequest, sessionCookie: string | undefined): { bytes: Buffer; complete: boolean } {
  const lines = [r.line];
  if (r.host.mode !== "none") lines.push(`Host: ${r.host.value}`);
  if (r.host.mode === "two") lines.push(`Host: ${r.host.second}`);
  for (const h of r.headers) lines.push(h.text);
  if (r.session && sessionCookie && harmless(r.line)) lines.push(`Cookie: ${sessionCookie}`);
  let body: Buffer = Buffer.alloc(0);
  if (r.framing === "length" || r.framing === "short") {
    lines.push(`Content-Length: ${r.body.byteLength + (r.framing === "short" ? 5 : 0)}`);
    body = Buffer.from(r.body);
  } else if (r.framing === "chunked") {
    lines.push("Transfer-Encoding: chunked");
    const chunk = r.body.byteLength > 0 ? Buffer.concat([Buffer.from(`${r.body.byteLength.toString(16)}\r\n`), r.body, Buffer.from("\r\n")]) : Buffer.alloc(0);
    body = Buffer.concat([chunk, Buffer.from("0\r\n\r\n")]);
  }
  const bytes = Buffer.concat([Buffer.from(lines.join(r.eol) + r.eol + r.eol, "utf8"), body]);
  for (const b of r.bytes) bytes[b.at % bytes.byteLength] = b.value;
  // complete: every byte the request announces is sent, and nothing but our own framing says otherwise
  const complete = r.framing !== "short" && r.eol === "\r\n" && r.bytes.length === 0 && !r.headers.some((h) => h.framing);
  return { bytes, complete };
}

// -- the property ----------------------------------------------------------------------------------

function fault(port: "edge" | "admin", ex: Exchange, complete: boolean, sent: string): string | undefined {
  if (ex.timedOut) return complete && ex.status === 0 ? `no answer and no close within ${EXCHANGE_TIMEOUT_MS} ms` : undefined;
  if (ex.status === 0 || ex.status < 500) return undefined;
  if (port === "admin" && ex.head === PARSER_505) return undefined;
  if (port === "edge" && [502, 503, 504].includes(ex.status)) return undefined;
  // the edge's own parser: 505 for a version it does not speak, 501 for a transfer coding it does not know
  const requestLine = sent.slice(0, sent.search(/\r\n|\n/) >>> 0);
  if (port === "edge" && ex.status === 505 && !/ HTTP\/1\.[01]$/.test(requestLine)) return undefined;
  if (port === "edge" && ex.status === 501 && /\ntransfer-encoding:/i.test(sent)) return undefined;
  return `status ${ex.status}: ${JSON.stringify(ex.head.slice(0, 300))}`;
}

async function exchange(label: string, port: "edge" | "admin", r: HostileRequest): Promise<void> {
  const { bytes, complete } = serialize(r, port === "admin" ? api.cookie : undefined);
  const ex = await rawExchange(port === "edge" ? server.edgePort : adminPort, bytes, EXCHANGE_TIMEOUT_MS);
  const outcome = `${label} ${port} ${ex.timedOut ? "timeout" : ex.status === 0 ? "closed" : String(ex.status)}`;
  tally.set(outcome, (tally.get(outcome) ?? 0) + 1);
  const why = fault(port, ex, complete, bytes.toString("latin1"));
  if (why) throw new Error(`${port} port: ${why}\nrequest: ${JSON.stringify(bytes.toString("latin1").slice(0, 2_000))}`);
  if (server.proc.exitCode !== null || server.proc.signalCode !== null) throw new Error(`the server exited (${server.proc.exitCode ?? server.proc.signalCode})`);
  if (port === "edge") {
    // whatever that request did, the next visitor's plain request still gets the local service's answer
    const plain = `GET /after HTTP/1.1\r\nHost: ${tunnelHost}\r\nConnection: close\r\n\r\n`;
    let next = await rawExchange(server.edgePort, plain, EXCHANGE_TIMEOUT_MS);
    // the connection budget may count a closed connection until its next look at the kernel's table
    // (at most every 50 ms): a 503 from it is asked again once, later; a state that stays broken still fails
    if (next.status === 503) {
      await Bun.sleep(200);
      next = await rawExchange(server.edgePort, plain, EXCHANGE_TIMEOUT_MS);
    }
    if (next.status !== 200) {
      const request = JSON.stringify(bytes.toString("latin1").slice(0, 2_000));
      throw new Error(`a plain request after this one got ${next.status || "no answer"}: ${JSON.stringify(next.head)}\nrequest: ${request}`);
    }
  }
}

/** Sends each generated request to the edge (Host from `hosts` around the tunnel's) and to the admin port (around its own). */
function bothPorts(label: string, line: fc.Arbitrary<string>, headers: fc.Arbitrary<HeaderLine[]>, hosts: (valid: string) => fc.Arbitrary<string>) {
  return fc.asyncProperty(request(hosts(tunnelHost), line, headers), request(hosts(`127.0.0.1:${adminPort}`), line, headers), async (toEdge, toAdmin) => {
    await exchange(label, "edge", toEdge);
    await exchange(label, "admin", toAdmin);
  });
}

describe("hostile requests to the edge and the admin port", () => {
  test(
    "random request lines (methods, targets with *, absolute forms, //, % escapes, control characters, very long) get no server fault",
    async () => {
      await fc.assert(bothPorts("line", requestLine, fewPlainHeaders, (valid) => fc.constant(valid)), fuzzParams(RUNS, TIME_LIMIT_MS));
    },
    TEST_TIMEOUT_MS,
  );

  test(
    "random Host headers (anything, mutations of the tunnel's, missing, twice) get no server fault",
    async () => {
      await fc.assert(bothPorts("host", plainLine, fewPlainHeaders, hostHeader), fuzzParams(RUNS, TIME_LIMIT_MS));
    },
    TEST_TIMEOUT_MS,
  );

  test(
    "random header blocks (duplicates, obs-fold, no colon, huge values, NUL, conflicting Content-Length and Transfer-Encoding) and bodies get no server fault",
    async () => {
      const lines = fc.oneof({ arbitrary: plainLine, weight: 3 }, { arbitrary: requestLine, weight: 1 });
      const hosts = (valid: string) => fc.oneof({ arbitrary: fc.constant(valid), weight: 4 }, { arbitrary: hostHeader(valid), weight: 1 });
      await fc.assert(bothPorts("headers", lines, headerBlock, hosts), fuzzParams(RUNS, TIME_LIMIT_MS));
    },
    TEST_TIMEOUT_MS,
  );
});

// Found by this file and fixed since, each with a regression test:
// - a client that closes in the middle of a request body was logged at error level by the admin
//   port (test/admin/bad-input.test.ts);
// - a visitor's GET, HEAD or TRACE with a Content-Length above 0 desynchronised the agent's
//   kept-alive connection to the local service: Bun gives such a request no body, but the length
//   went on in its head, and the service took the next request's first bytes as that body
//   (test/e2e/bad-requests.test.ts, test/agent/local-http.test.ts).

describe("after all of it", () => {
  test("the server is alive, logged no error, its memory stayed bounded, and the tunnel and the admin API answer", async () => {
    expect(server.proc.exitCode).toBeNull();
    expect(faultLines(server.output.lines)).toEqual([]);
    const res = await tunnelFetch(server.edgePort, "steady", "/");
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("still here");
    // the session from the start: a fresh login may be throttled after the fuzzed logins
    expect((await api.get("/api/users")).status).toBe(200);
    expect(agent.proc.exitCode).toBeNull();
    const growth = (await settledRss(server.proc.pid, rssBefore + RSS_GROWTH_LIMIT)) - rssBefore;
    console.log(`server RSS: ${(rssBefore / 2 ** 20).toFixed(1)} MiB before, ${(growth / 2 ** 20).toFixed(1)} MiB growth`);
    expect(growth).toBeLessThan(RSS_GROWTH_LIMIT);
  });
});
