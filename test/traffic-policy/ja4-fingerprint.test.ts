/**
 * ngrok's `conn.tls.ja4_fingerprint` through the real server, agent and
 * service, read by curl: an add-headers action interpolates it into the
 * request. Over HTTPS (HTTP/1.1 and HTTP/2) the service sees a JA4 of the
 * right form, the very one src/tls/ja4.ts makes of the ClientHello the
 * same curl command line sends to a plain listener that records it, the
 * same for two connections of one client, another for a client whose
 * hello differs (TLS 1.2 at most); over plain HTTP it is empty. (A tls
 * tunnel's on_tcp_connect reading it: test/e2e/tls-passthrough.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { parseClientHello, type ClientHello } from "../../src/tls/client-hello.ts";
import { ja4 } from "../../src/tls/ja4.ts";
import { captureHello } from "../harness/client-hello.ts";
import { run } from "../harness/nghttp2.ts";
import type { Rig } from "../harness/tunnel.ts";
import type { Echoed, PolicyTunnel } from "./rig.ts";
import { plainAndSecure, type PlainAndSecure } from "./tls-rig.ts";

setDefaultTimeout(60_000);

const POLICY = `
on_http_request:
  - actions:
      - type: add-headers
        config:
          headers:
            x-ja4: "ja4=\${conn.tls.ja4_fingerprint}"
`;

/** The form the brief of ngrok's variable promises for a TLS 1.0-1.3 client that sends a server name. */
const JA4_FORM = /^t1[0-3]d\d{4}[a-z0-9]{2}_[0-9a-f]{12}_[0-9a-f]{12}$/;

let plain: PolicyTunnel;
let secure: Rig;
let rig: PlainAndSecure;

beforeAll(async () => {
  rig = await plainAndSecure(POLICY, "ja4");
  ({ plain, secure } = rig);
});

afterAll(() => rig?.close());

const NAME = "tlsja4.localhost";
/** curl's command line to NAME on `port`, with `args`: the same for the server and for the recording listener. */
const curlLine = (port: number, args: readonly string[]) => ["curl", "-sSk", "--max-time", "20", "--resolve", `${NAME}:${port}:127.0.0.1`, ...args, `https://${NAME}:${port}/vars`];

/** What the service saw in x-ja4 for one curl run with `args`. */
async function seenJa4(args: readonly string[]): Promise<string> {
  const r = await run(curlLine(secure.server.edgePort, args));
  expect(r.code).toBe(0);
  const seen = (JSON.parse(r.stdout) as Echoed).headers["x-ja4"];
  expect(seen).toStartWith("ja4=");
  return seen!.slice(4);
}

/** The JA4 src/tls/ja4.ts makes of the hello curl sends with `args`, recorded on a plain socket (curl then fails its handshake). */
async function recordedJa4(args: readonly string[]): Promise<string> {
  const bytes = await captureHello(async (port) => void (await run(curlLine(port, args))));
  const hello = parseClientHello(bytes, true);
  expect(typeof hello).toBe("object");
  expect((hello as ClientHello).serverName).toBe(NAME);
  return ja4(hello as ClientHello);
}

describe("over HTTPS", () => {
  for (const [name, args] of [
    ["HTTP/1.1", ["--http1.1"]],
    ["HTTP/2", ["--http2"]],
  ] as const) {
    test(`${name}: a JA4 of the right form, the one made of the same client's hello, the same on a second connection`, async () => {
      const first = await seenJa4(args);
      expect(first).toMatch(JA4_FORM);
      expect(first).toBe(await recordedJa4(args));
      expect(await seenJa4(args)).toBe(first);
    });
  }

  test("the ALPN curl offers shows in it: h1 for HTTP/1.1, h2 for HTTP/2", async () => {
    expect((await seenJa4(["--http1.1"])).slice(8, 10)).toBe("h1");
    expect((await seenJa4(["--http2"])).slice(8, 10)).toBe("h2");
  });

  test("a client whose hello differs (TLS 1.2 at most) has another fingerprint, the one made of its hello", async () => {
    const usual = await seenJa4(["--http1.1"]);
    const older = await seenJa4(["--http1.1", "--tls-max", "1.2"]);
    expect(older).toMatch(JA4_FORM);
    expect(older).toStartWith("t12d");
    expect(older).not.toBe(usual);
    expect(older).toBe(await recordedJa4(["--http1.1", "--tls-max", "1.2"]));
  });
});

describe("over plain HTTP", () => {
  test("empty", async () => {
    const r = await plain.curl("/vars");
    expect(r.status).toBe(200);
    expect((JSON.parse(r.body) as Echoed).headers["x-ja4"]).toBe("ja4=");
  });
});
