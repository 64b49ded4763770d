/**
 * http-request on a request relayed between two nodes of one PostgreSQL
 * database: the tunnel's agent on the first node, the visitor coming in at
 * either. The action runs on the tunnel's node, where its rules live, once
 * a visitor's request, and its answer decides the same way whichever node
 * the visitor came in at: a check service on loopback says 403 (denied),
 * 200 (let through), or 503 once (retried by retry_condition, then let
 * through). Where a request may go is the tunnel's node's to say: in a
 * cluster whose tunnel node runs without --policy-http-request-allow-private
 * a loopback target is refused entering at either node, the other node's
 * flag notwithstanding, and the service is asked nothing.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { signedIn } from "../harness/admin.ts";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { startTwoNodes, type TwoNodes } from "../harness/cluster.ts";
import { curl } from "./curl.ts";
import { echo, policyFile, type Echoed } from "./rig.ts";

const ALLOW = ["--policy-http-request-allow-private", "on"];
/** Where a visitor comes in: the tunnel's node, or the other, which relays it. */
const ENTRIES = [0, 1] as const;

const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: echo });
/** What the check service was asked: the x-user of each request. */
const asked: string[] = [];
/** x-user values whose first request gets 503 (a service that fails once). */
const failedOnce = new Set<string>();
const check = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch(req) {
    const user = req.headers.get("x-user") ?? "";
    asked.push(user);
    if (user.startsWith("flaky") && !failedOnce.has(user)) {
      failedOnce.add(user);
      return new Response("down", { status: 503 });
    }
    return new Response(user.startsWith("eve") ? "no" : "yes", { status: user.startsWith("eve") ? 403 : 200 });
  },
});

const policy = policyFile(`
on_http_request:
  - actions:
      - type: http-request
        config:
          url: "http://127.0.0.1:${check.port}/check"
          headers: { x-user: "\${req.headers['x-user'][0]}" }
          retry_condition: "last_attempt.res.status_code >= 500"
          on_error: halt
  - expressions: ["actions.ngrok.http_request.res.status_code == 403"]
    actions: [{ type: deny }]
  - actions:
      - type: add-headers
        config: { headers: { x-check-attempts: "\${string(size(actions.ngrok.http_request.attempts))}" } }
`);

/** A cluster, its tunnel's agent on the first node. */
interface Rig {
  cluster: TwoNodes;
  agent: TestAgent;
  subdomain: string;
}
const rigs: Rig[] = [];

async function startRig(ids: readonly [string, string], args: readonly [readonly string[], readonly string[]]): Promise<Rig> {
  const cluster = await startTwoNodes({ ids, secret: `http-request-relayed-${ids[0]}-0123456789abcdef`, args });
  try {
    const api = await signedIn(cluster.nodes[0]!);
    const token = await api.createToken(await api.createUser(`asker${ids[0]}`, { skip_warning: true }));
    const subdomain = `ask${ids[0]}${process.pid}`;
    const agent = await startAgent({ kind: "http", target: upstream.port!, server: cluster.nodes[0]!.edgeUrl, token, args: ["--subdomain", subdomain, "--policy-file", policy.path] });
    const rig = { cluster, agent, subdomain };
    rigs.push(rig);
    return rig;
  } catch (e) {
    await cluster.stop();
    throw e;
  }
}

afterAll(async () => {
  for (const r of rigs) {
    await r.agent.stop();
    await r.cluster.stop();
  }
  upstream.stop(true);
  check.stop(true);
  policy[Symbol.dispose]();
});

/** `path` through the rig's tunnel, coming in at node `entry` (0: the tunnel's). */
const visit = (rig: Rig, entry: number, user: string, args: string[] = []) => curl(`http://${rig.subdomain}.localhost:${rig.cluster.nodes[entry]!.edgePort}/app`, ["-H", `x-user: ${user}`, ...args]);

describe("a cluster whose nodes allow loopback targets", () => {
  let rig: Rig;
  beforeAll(async () => {
    rig = await startRig(["hr1", "hr2"], [ALLOW, ALLOW]);
  }, 60_000);

  test("the service's 403 denies, its 200 lets through, the same entering at either node; the action runs once a request, on the tunnel's node", async () => {
    for (const entry of ENTRIES) {
      asked.length = 0;
      const denied = await visit(rig, entry, `eve${entry}`);
      expect({ entry, status: denied.status }).toEqual({ entry, status: 403 });
      const let_ = await visit(rig, entry, `ada${entry}`);
      expect({ entry, status: let_.status }).toEqual({ entry, status: 200 });
      expect((JSON.parse(let_.body) as Echoed).headers["x-check-attempts"]).toBe("1");
      expect(asked).toEqual([`eve${entry}`, `ada${entry}`]);
    }
  });

  test("a service that fails once is retried by retry_condition, relayed or not: two attempts, then let through", async () => {
    for (const entry of ENTRIES) {
      asked.length = 0;
      const r = await visit(rig, entry, `flaky${entry}`);
      expect({ entry, status: r.status }).toEqual({ entry, status: 200 });
      expect((JSON.parse(r.body) as Echoed).headers["x-check-attempts"]).toBe("2");
      expect(asked).toEqual([`flaky${entry}`, `flaky${entry}`]);
    }
  });

  test("over HTTP/2 (h2c) at the other node too", async () => {
    asked.length = 0;
    expect((await visit(rig, 1, "eve-h2", ["--http2-prior-knowledge"])).status).toBe(403);
    expect((await visit(rig, 1, "ada-h2", ["--http2-prior-knowledge"])).status).toBe(200);
    expect(asked).toEqual(["eve-h2", "ada-h2"]);
  });
});

describe("a cluster whose tunnel node runs as it ships (the other node allowing loopback)", () => {
  let rig: Rig;
  beforeAll(async () => {
    rig = await startRig(["hs1", "hs2"], [[], ALLOW]);
  }, 60_000);

  test("the loopback target is refused entering at either node (halt: 502); the service is asked nothing", async () => {
    // a mistake that would let the other node's flag decide would let the one entering there through
    asked.length = 0;
    for (const entry of ENTRIES) {
      const r = await visit(rig, entry, `ada${entry}`);
      expect({ entry, status: r.status }).toEqual({ entry, status: 502 });
      // the policy's own 502 (not a relay's), which names no address
      expect(r.body).toBe("Bad Gateway: a request the traffic policy makes failed.\n");
    }
    expect(asked).toEqual([]);
  });
});
