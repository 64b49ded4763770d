/**
 * sse-find-replace and on_event_stream_message in the engine, without a
 * socket: what is refused at load (a field that is neither data nor
 * retry, the action in another phase, the phase's variables), the rules a
 * run makes for an event stream (and not for another response, nor an
 * encoded one), the layers' order, and one event rewritten
 * (policy/sse-event.ts): data lines joined and split again, retry, the
 * lines left as they came, the caps that fail a rewrite.
 */
import { describe, expect, test } from "bun:test";
import { PolicyChain, ReplaceFailed, rewriteEvent } from "../../src/policy/index.ts";
import { errorsOf, policyOf, requestInput } from "./policy-harness.ts";

const streamRule = (replacements: string, expressions = "") => `on_event_stream_message:\n  - ${expressions ? `expressions: [${expressions}]\n    ` : ""}actions:\n      - type: sse-find-replace\n        config: { replacements: ${replacements} }\n`;
const SSE: [string, string][] = [["Content-Type", "text/event-stream; charset=utf-8"]];

async function rulesFor(yaml: string, headers: [string, string][] = SSE, method = "GET") {
  const out = await policyOf(yaml).run("on_event_stream_message", requestInput({ method, response: { status: 200, headers } }));
  return { out, rules: out.response?.streamRewrites };
}

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

async function eventAfter(replacements: string, event: string): Promise<string> {
  const { rules } = await rulesFor(streamRule(replacements));
  const made = rewriteEvent(enc(event), rules!);
  return typeof made === "string" ? made : dec(made);
}

describe("on_event_stream_message at load", () => {
  test("the phase is read, and has the response's variables and functions", () => {
    const p = policyOf(streamRule("[{ from: 'a' }]", "\"res.status_code == 200 && req.method == 'GET' && hasResHeader('content-type')\""));
    expect(p.has("on_event_stream_message")).toBe(true);
    expect(p.size.on_event_stream_message).toBe(1);
  });

  test("field must be data or retry; the action runs in no other phase; other actions may not run in it", () => {
    expect(errorsOf(streamRule("[{ field: id, from: 'a' }]"))[0]!.message).toContain("must be data or retry");
    const elsewhere = errorsOf("on_http_response:\n  - actions:\n      - type: sse-find-replace\n        config: { replacements: [{ from: a }] }\n");
    expect(elsewhere[0]!.message).toContain("does not run in on_http_response (only in on_event_stream_message)");
    const deny = errorsOf("on_event_stream_message:\n  - actions: [{ type: deny }]\n");
    expect(deny[0]!.message).toContain("does not run in on_event_stream_message");
    expect(errorsOf(streamRule("[{ from: '(a' }]"))[0]!.message).toContain("not an RE2 regular expression");
    expect(errorsOf(streamRule("[]"))[0]!.message).toContain("at least one replacement");
  });
});

describe("sse-find-replace's run", () => {
  test("an event stream: the rules, each with its field (data by default), its ${...} evaluated", async () => {
    const { rules } = await rulesFor(streamRule("[{ from: 'a', to: '${req.method}' }, { field: retry, from: '\\d+', to: '9' }, { field: '${\"da\" + \"ta\"}', from: 'b' }]"));
    expect(rules?.map((r) => [r.field, r.to])).toEqual([["data", "GET"], ["retry", "9"], ["data", ""]]);
  });

  test("a response that is not an event stream, a HEAD's, an encoded stream: no rules (the encoded one told as a problem)", async () => {
    expect((await rulesFor(streamRule("[{ from: 'a' }]"), [["Content-Type", "text/plain"]])).rules).toBeUndefined();
    expect((await rulesFor(streamRule("[{ from: 'a' }]"), SSE, "HEAD")).rules).toBeUndefined();
    const encoded = await rulesFor(streamRule("[{ from: 'a' }]"), [...SSE, ["Content-Encoding", "gzip"]]);
    expect(encoded.rules).toBeUndefined();
    expect(encoded.out.problems.map((p) => p.message)).toEqual(["sse-find-replace: the stream is encoded (gzip), so it goes on unchanged"]);
  });

  test("a rule's expression is judged on the response's head", async () => {
    const yaml = streamRule("[{ from: 'a' }]", "\"res.headers['x-redact'][0] == 'yes'\"");
    expect((await rulesFor(yaml, [...SSE, ["X-Redact", "yes"]])).rules).toHaveLength(1);
    expect((await rulesFor(yaml, [...SSE, ["X-Redact", "no"]])).rules).toBeUndefined();
  });

  test("layers: the tunnel's own rules first, the operator's last, as a response's", async () => {
    const operator = policyOf(streamRule("[{ from: 'x', to: 'operator' }]"));
    const own = policyOf(streamRule("[{ from: 'x', to: 'own' }]"));
    const out = await new PolicyChain([operator, own]).eventStream(requestInput({ response: { status: 200, headers: SSE } }));
    expect(out.response?.streamRewrites?.map((r) => r.to)).toEqual(["own", "operator"]);
    const made = rewriteEvent(enc("data: x\n\n"), out.response!.streamRewrites!);
    expect(dec(made as Uint8Array)).toBe("data: own\n\n");
  });
});

describe("one event rewritten", () => {
  test("every match of data, $1 a capture group; the other lines as they came", async () => {
    expect(await eventAfter("[{ from: 'sk-(\\w{2})\\w*', to: 'sk-$1***' }]", "event: token\nid: 7\n: a comment\ndata: key sk-abcdef and sk-xyz\n\n")).toBe("event: token\nid: 7\n: a comment\ndata: key sk-ab*** and sk-xy***\n\n");
  });

  test("data lines are one value joined by line feeds: a pattern across them, and a result of several lines", async () => {
    expect(await eventAfter("[{ from: 'a\\nb', to: 'ab' }]", "data: a\ndata: b\n\n")).toBe("data: ab\n\n");
    expect(await eventAfter('[{ from: ",", to: "\\n" }]', "data:1,2\r\n\r\n")).toBe("data: 1\r\ndata: 2\r\n\r\n");
  });

  test("retry: its own lines, its value kept one line", async () => {
    expect(await eventAfter("[{ field: retry, from: '\\d+', to: '5000' }]", "retry: 10\ndata: 10\n\n")).toBe("retry: 5000\ndata: 10\n\n");
  });

  test("nothing matched, a comment, an event without data: the very bytes", async () => {
    const { rules } = await rulesFor(streamRule("[{ from: 'zzz' }]"));
    for (const event of ["data: a\n\n", ": keep-alive\n\n", "event: ping\nid: 3\n\n"]) expect(rewriteEvent(enc(event), rules!)).toBe("unchanged");
    expect(rewriteEvent(new Uint8Array([0x64, 0x61, 0x74, 0x61, 0x3a, 0xff, 0x0a, 0x0a]), rules!)).toBe("not-utf8");
  });

  test("a rewrite past its steps or its growth fails", async () => {
    const slow = (await rulesFor(streamRule("[{ from: '(a*c)?', to: 'x' }]"))).rules!;
    expect(() => rewriteEvent(enc(`data: ${"a".repeat(3000)}\n\n`), slow)).toThrow(ReplaceFailed);
    const grows = (await rulesFor(streamRule(`[{ from: 'a', to: '${"b".repeat(1000)}' }]`))).rules!;
    expect(() => rewriteEvent(enc(`data: ${"a".repeat(1000)}\n\n`), grows)).toThrow(/grow past/);
  });
});

