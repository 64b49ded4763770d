/**
 * The request's fields as a rule reads them when the head's bytes are
 * long gone: the edge decodes a request's head into text only when a rule
 * first reads a field beyond those it read itself, so a response rule
 * that reads the request's fields, once the service has answered in a
 * later turn, must still find them (http-door.ts keeps the text for a
 * tunnel whose response rules run).
 */
import { describe, expect, test } from "bun:test";
import { withPolicy } from "./rig.ts";

/** Response rules alone: nothing reads the request's fields before the response comes. */
const RESPONSE_ONLY = `
on_http_response:
  - name: echo the trace
    expressions: ["'x-correlation-trace-tag' in req.headers"]
    actions:
      - type: add-headers
        config: { headers: { x-seen-tag: "\${req.headers['x-correlation-trace-tag'][0]}", x-agent-seen: "\${req.user_agent}" } }
`;

/** A request rule that reads the same field first, before the response rules. */
const POLICY = `
on_http_request:
  - name: refused trace
    expressions: ["'x-correlation-trace-tag' in req.headers && req.headers['x-correlation-trace-tag'][0] == 'refused'"]
    actions: [{ type: deny, config: { status_code: 403 } }]
${RESPONSE_ONLY.trimStart()}`;

/** A service that answers a moment later: the response comes in a turn of its own, after the request's head bytes were released. */
async function slow(): Promise<Response> {
  await Bun.sleep(40);
  return new Response("ok");
}

describe("request fields read after the head's turn", () => {
  test("a response rule reads the request's fields (one the edge does not read itself) when the service answers later", async () => {
    await using t = await withPolicy(RESPONSE_ONLY, { upstream: slow });
    for (const trace of ["first", "second"]) {
      const r = await t.curl("/", ["-H", `X-Correlation-Trace-Tag: ${trace}`, "-A", `agent-${trace}`]);
      expect(r.status).toBe(200);
      expect(r.headers["x-seen-tag"]).toBe(trace);
      expect(r.headers["x-agent-seen"]).toBe(`agent-${trace}`);
      expect(r.body).toBe("ok");
    }
  }, 30_000);

  test("on a kept connection, whose later requests go to the agent from the head's bytes, never made text", async () => {
    await using t = await withPolicy(RESPONSE_ONLY, { upstream: slow });
    // curl's --next: one connection, three requests, each with its own tag
    const args = ["curl", "-sS", "--max-time", "20", "-D", "-"];
    const tags = ["one", "two", "three"];
    for (const [i, tag] of tags.entries()) args.push(...(i > 0 ? ["--next", "-sS", "-D", "-"] : []), "-H", `X-Correlation-Trace-Tag: ${tag}`, t.url("/"));
    const proc = Bun.spawn(args, { stdout: "pipe", stderr: "pipe", timeout: 30_000 });
    const [out, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
    expect(code).toBe(0);
    const seen = [...out.matchAll(/^x-seen-tag: (\S+)\r$/gim)].map((m) => m[1]);
    expect(seen).toEqual(tags);
    expect(out.match(/HTTP\/1\.1 200 /g)?.length).toBe(3);
  }, 30_000);

  test("the same when request rules read the fields first", async () => {
    await using t = await withPolicy(POLICY, { upstream: slow });
    const r = await t.curl("/", ["-H", "X-Correlation-Trace-Tag: third"]);
    expect(r.status).toBe(200);
    expect(r.headers["x-seen-tag"]).toBe("third");
  }, 30_000);

  test("a request rule reads a field beyond the edge's own, and refuses by it", async () => {
    await using t = await withPolicy(POLICY, { upstream: slow });
    expect((await t.curl("/", ["-H", "X-Correlation-Trace-Tag: refused"])).status).toBe(403);
    const r = await t.curl("/");
    expect(r.status).toBe(200);
    expect(r.headers["x-seen-tag"]).toBeUndefined();
  }, 30_000);
});
