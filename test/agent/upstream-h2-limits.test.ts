/**
 * The agent's HTTP/2 client limits toward a tunnel's service, as tunnel
 * options (--upstream-h2-*, burrow.yml's upstream_h2_*, burrow-agent's
 * upstreamH2*): a bad value is
 * refused with a message that names the option, its unit and its range,
 * and so is a limit on a tunnel that does not speak HTTP/2 to its service;
 * each limit given is the one the agent's connection to the service is
 * held to (played against a hand-made HTTP/2 service), its routes' too.
 */
import { describe, expect, test } from "bun:test";
import { answerOf, fileSays, TUNNELS_FILE } from "../harness/tunnel-spec-answers.ts";
import { parseTarget } from "../../src/agent/settings/tunnel-options.ts";
import { parseTunnelsFile } from "../../src/agent/settings/tunnels-file.ts";
import { UPSTREAM_H2_OPTION_NAMES, UPSTREAM_H2_OPTIONS } from "../../src/agent/settings/upstream-h2.ts";
import type { LocalTarget } from "../../src/agent/local-target.ts";
import { Http2ClientConnection } from "../../src/http2/client-connection.ts";
import { DEFAULT_H2_CLIENT_LIMITS, type Http2ClientLimits } from "../../src/http2/client-limits.ts";
import { FLAG_VOICE, tunnelFromFlags } from "../../src/cli/tunnel-flags.ts";
import { data, ErrorCode, frame, FrameType, headers, ping, Setting, settings, u32At } from "../harness/h2-frames.ts";
import { rawH2Server, type RawServerConn } from "../harness/h2-raw-server.ts";
import { burrowCommand } from "../harness/server.ts";
import { within } from "../protocol/support.ts";
import { forward } from "../../sdk/src/index.ts";
import { cleanedUp, fetchThrough, requestHead, visit } from "./raw-service.ts";

const FILE = TUNNELS_FILE;
const flagOf = (option: (typeof UPSTREAM_H2_OPTION_NAMES)[number]) => FLAG_VOICE.name(option).slice(2);
const keyOf = (option: (typeof UPSTREAM_H2_OPTION_NAMES)[number]) => option.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const flagsSay = (kind: "http" | "tcp", values: Record<string, unknown>) => answerOf(() => tunnelFromFlags(kind, values, parseTarget(kind === "http" ? "50051" : "5432", kind === "http")));
const optionsSay = (options: Record<string, unknown>) =>
  forward({ port: 50051, server: "http://127.0.0.1:1", token: "x", ...options }).then(
    (t) => (t.close(), "accepted"),
    (err: Error) => err.message,
  );
/** The target the flags give a tunnel to a plain (h2c) service. */
const targetOf = (flags: Record<string, string>): LocalTarget => tunnelFromFlags("http", { "upstream-protocol": "h2c", ...flags }, parseTarget("50051", true)).target;
/** How the flags say the agent speaks to a service, for a test tunnel to the test's own. */
const h2Of = (flags: Record<string, string>): Partial<LocalTarget> => {
  const { upstreamProtocol, upstreamH2 } = targetOf(flags);
  return { upstreamProtocol, upstreamH2 };
};

describe("bad values are refused, in each front-end's words", () => {
  for (const option of UPSTREAM_H2_OPTION_NAMES) {
    const { min, max, unit } = UPSTREAM_H2_OPTIONS[option];
    const range = `a whole number${unit === "streams" ? "" : ` of ${unit}`} from ${min} to ${max}`;
    test(`--${flagOf(option)}: ${range}`, async () => {
      for (const bad of [String(min - 1), String(max + 1), "ten", "1.5", "-1", "", `${min} `]) {
        expect(flagsSay("http", { "upstream-protocol": "h2c", [flagOf(option)]: bad })).toBe(`--${flagOf(option)} must be ${range} (got '${bad}')`);
        expect(fileSays(`tunnels:\n  a: {proto: http, addr: 50051, upstream_protocol: h2c, ${keyOf(option)}: '${bad}'}\n`)).toBe(`${FILE}:2: tunnels.a.${keyOf(option)}: must be ${range} (got '${bad}')`);
      }
      for (const bad of [min - 1, max + 1, 1.5]) expect(await optionsSay({ upstreamProtocol: "h2c", [option]: bad })).toBe(`${option}: must be ${range} (got '${bad}')`);
      for (const good of [min, max]) expect(flagsSay("http", { "upstream-protocol": "h2c", [flagOf(option)]: String(good) })).toBe("accepted");
    });
  }

  test("a limit of the HTTP/2 connection goes with --upstream-protocol h2c or h2, on an http tunnel", async () => {
    expect(flagsSay("http", { "upstream-h2-idle-timeout": "5" })).toBe("--upstream-h2-idle-timeout: goes with --upstream-protocol h2c or h2");
    expect(flagsSay("http", { "upstream-protocol": "http1", "upstream-h2-max-concurrent-streams": "8" })).toBe("--upstream-h2-max-concurrent-streams: goes with --upstream-protocol h2c or h2");
    expect(fileSays("tunnels:\n  a: {proto: http, addr: 50051, upstream_h2_stream_window: 65536}\n")).toBe(`${FILE}:2: tunnels.a.upstream_h2_stream_window: goes with upstream_protocol h2c or h2`);
    expect(flagsSay("tcp", { "upstream-h2-idle-timeout": "5" })).toBe("--upstream-h2-idle-timeout: is for http tunnels; this one is tcp");
    expect(fileSays("tunnels:\n  a: {proto: tcp, addr: 5432, upstream_h2_idle_timeout: 5}\n")).toBe(`${FILE}:2: tunnels.a.upstream_h2_idle_timeout: is for http tunnels; this one is tcp`);
    expect(await optionsSay({ upstreamH2MaxHeaderList: 4096 })).toBe("upstreamH2MaxHeaderList: goes with upstreamProtocol h2c or h2");
  });

  test("the command refuses to start on a bad value: exit 2, one line that says why", async () => {
    const proc = Bun.spawn([...burrowCommand(), "http", "50051", "--server", "http://127.0.0.1:1", "--token", `brw_${"0".repeat(43)}`, "--upstream-protocol", "h2c", "--upstream-h2-max-header-list", "512"], {
      env: { ...process.env, BURROW_SERVER: "", BURROW_TOKEN: "" },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    const timer = setTimeout(() => proc.kill("SIGKILL"), 20_000);
    const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
    clearTimeout(timer);
    expect(code).toBe(2);
    expect(stderr.trim()).toBe("burrow: --upstream-h2-max-header-list must be a whole number of bytes from 1024 to 1048576 (got '512')");
  });
});

describe("the limits a tunnel gives", () => {
  test("every option sets its limit, the others keep their defaults; the flags and burrow.yml say the same; the routes' services get them too", () => {
    const flags = {
      "upstream-h2-max-concurrent-streams": "8",
      "upstream-h2-max-header-list": "4096",
      "upstream-h2-stream-window": "32768",
      "upstream-h2-max-queued-control": "65536",
      "upstream-h2-idle-timeout": "2",
      "upstream-h2-settings-timeout": "3",
    };
    const want: Http2ClientLimits = { maxStreams: 8, maxHeaderListBytes: 4096, streamWindow: 32768, maxQueuedControlBytes: 65536, idleTimeoutMs: 2000, settingsTimeoutMs: 3000 };
    const target = tunnelFromFlags("http", { "upstream-protocol": "h2c", route: ["/api=9000"], ...flags }, parseTarget("50051", true)).target;
    expect(target.upstreamH2).toEqual(want);
    expect(target.routes!.map((r) => r.target.upstreamH2)).toEqual([want]);
    const keys = Object.entries(flags).map(([flag, value]) => `    ${flag.replaceAll("-", "_")}: ${value}\n`).join("");
    expect(parseTunnelsFile(`tunnels:\n  grpc:\n    proto: http\n    addr: 50051\n    upstream_protocol: h2c\n${keys}`, FILE).tunnels[0]!.target.upstreamH2).toEqual(want);
    expect(targetOf({ "upstream-h2-idle-timeout": "9" }).upstreamH2).toEqual({ ...DEFAULT_H2_CLIENT_LIMITS, idleTimeoutMs: 9000 });
    // none given: the defaults, and the connection to the service is the one every such tunnel shares
    expect(targetOf({}).upstreamH2).toBeUndefined();
  });
});

describe("each limit holds on the agent's HTTP/2 connection to the service", () => {
  const { tunnel } = cleanedUp();
  const pathOf = (fields: [string, string][]) => fields.find(([n]) => n === ":path")![1];
  const answer = (conn: RawServerConn, stream: number) => conn.send(headers(stream, [[":status", "200"], ["content-length", "2"]], false), data(stream, "ok", true));
  /** The agent's SETTINGS to the service, by id. */
  const agentSettings = (conn: RawServerConn) => {
    const first = conn.sent.of(FrameType.SETTINGS).find((f) => f.payload.byteLength > 0)!;
    const pairs = new Map<number, number>();
    for (let at = 0; at < first.payload.byteLength; at += 6) pairs.set((first.payload[at]! << 8) | first.payload[at + 1]!, u32At(first.payload, at + 2));
    return pairs;
  };

  test("--upstream-h2-max-concurrent-streams: requests past it wait their turn, though the service would take more", async () => {
    const held: number[] = [];
    await using svc = rawH2Server({ settings: [[Setting.MAX_CONCURRENT_STREAMS, 100]], onHead: (_conn, head) => void held.push(head.stream) });
    const target = h2Of({ "upstream-h2-max-concurrent-streams": "2" });
    const t = tunnel(svc.port, { target });
    const visits = [1, 2, 3, 4].map((i) => visit(t, { head: requestHead("GET", `/${i}`) }));
    const service = t.pool.h2.of({ host: "127.0.0.1", port: svc.port, upstreamProtocol: "h2c", upstreamH2: target.upstreamH2 });
    await svc.until(() => held.length === 2 && service.queued === 2, 10_000, "two requests sent, two waiting");
    answer(svc.conns[0]!, held[0]!);
    await svc.until(() => held.length === 3, 10_000, "the third request once one is answered");
    expect(service.queued).toBe(1);
    for (const stream of held.slice(1)) answer(svc.conns[0]!, stream);
    await svc.until(() => held.length === 4, 10_000, "the last request");
    answer(svc.conns[0]!, held[3]!);
    for (const v of visits) expect((await within(v.outcome, 10_000, "an answer")).bytes.toString("latin1")).toEndWith("\r\n\r\nok");
    expect(svc.conns).toHaveLength(1);
  });

  test("--upstream-h2-max-header-list: the agent's SETTINGS say it, and a longer response head is a 502 that says so", async () => {
    await using svc = rawH2Server({
      onHead: (conn, head) => {
        if (pathOf(head.fields) === "/big") return conn.send(headers(head.stream, [[":status", "200"], ["x-big", "b".repeat(6000)]], true));
        answer(conn, head.stream);
      },
    });
    const t = tunnel(svc.port, { target: h2Of({ "upstream-h2-max-header-list": "4096" }) });
    const big = await fetchThrough(t, { head: requestHead("GET", "/big") });
    expect(big.reset).toMatch(/UPSTREAM_FAILED the service's response head is larger than 4096 bytes/);
    expect(agentSettings(svc.conns[0]!).get(Setting.MAX_HEADER_LIST_SIZE)).toBe(4096);
    expect((await fetchThrough(t, { head: requestHead("GET", "/after") })).text).toEndWith("\r\n\r\nok");
  });

  test("--upstream-h2-stream-window: the agent's SETTINGS say it, and DATA past it (a visitor who does not read) resets the stream", async () => {
    // the tunnel stream takes 512 KiB before it holds back; then the stream's window is all the service may send
    // (credit goes back in halves of the window, so at least half of it is always open)
    const window = 16_384;
    const frames = Math.ceil((512 * 1024 + window) / 16_384) + 2;
    expect(frames * 16_384).toBeLessThan(512 * 1024 + DEFAULT_H2_CLIENT_LIMITS.streamWindow / 2 - 4096); // within the default's window
    await using svc = rawH2Server({
      onHead: (conn, head) => {
        conn.send(headers(head.stream, [[":status", "200"]], false));
        for (let i = 0; i < frames; i++) conn.send(frame(FrameType.DATA, 0, head.stream, new Uint8Array(16_384)));
      },
    });
    const t = tunnel(svc.port, { target: h2Of({ "upstream-h2-stream-window": String(window) }) });
    const v = visit(t, {}, false);
    await svc.until(() => svc.conns[0]?.sent.resets().size === 1, 10_000, "the agent's RST_STREAM");
    expect([...svc.conns[0]!.sent.resets().values()]).toEqual([ErrorCode.FLOW_CONTROL_ERROR]);
    expect(agentSettings(svc.conns[0]!).get(Setting.INITIAL_WINDOW_SIZE)).toBe(window);
    expect((await within(v.outcome, 10_000, "the visitor's stream")).reset).toMatch(/UPSTREAM_FAILED the service sent past the stream's window/);
  });

  test("--upstream-h2-idle-timeout: the connection with no request on it is closed after it (GOAWAY NO_ERROR)", async () => {
    await using svc = rawH2Server({ onHead: (conn, head) => answer(conn, head.stream) });
    const t = tunnel(svc.port, { target: h2Of({ "upstream-h2-idle-timeout": "1" }) });
    expect((await fetchThrough(t)).text).toEndWith("\r\n\r\nok");
    // checked once a second: past 1 s idle it goes within about two (the default would keep it 30)
    await svc.until(() => svc.conns[0]!.sent.goawayCode !== undefined, 20_000, "the agent's GOAWAY");
    expect(svc.conns[0]!.sent.goawayCode).toBe(ErrorCode.NO_ERROR);
    expect((await fetchThrough(t)).text).toEndWith("\r\n\r\nok");
    expect(svc.conns).toHaveLength(2);
  });

  test("--upstream-h2-settings-timeout: a service that never sends its SETTINGS is given up after it, the request a 502 that says so", async () => {
    await using svc = rawH2Server({ settings: "none" });
    const t = tunnel(svc.port, { target: h2Of({ "upstream-h2-settings-timeout": "1" }) });
    const res = await within(visit(t).outcome, 20_000, "the 502");
    expect(res.reset).toMatch(/UPSTREAM_FAILED no HTTP\/2 SETTINGS from the service within 1 s: does it speak HTTP\/2\?/);
  });

  test("--upstream-h2-max-queued-control: a service that does not read while the agent owes it frames is cut past it", () => {
    const limits = targetOf({ "upstream-h2-max-queued-control": "65536" }).upstreamH2!;
    // the socket takes nothing; the service asks for more answers (PING ACKs, 17 bytes each) than the bound holds
    const pings = Buffer.concat(Array.from({ length: Math.ceil(65_536 / 17) + 64 }, () => ping()));
    const cutAt = (l: Http2ClientLimits) => {
      const closed: string[] = [];
      const conn = new Http2ClientConnection({ write: () => false, close() {}, terminate() {} }, l, { slots() {}, closed: (why) => void closed.push(why) });
      conn.received(Buffer.concat([settings(), ping()]));
      conn.received(pings);
      conn.close();
      return closed[0];
    };
    expect(cutAt(limits)).toBe("the service does not read what the agent sends");
    expect(cutAt(DEFAULT_H2_CLIENT_LIMITS)).toBe("the connection was closed");
  });
});
