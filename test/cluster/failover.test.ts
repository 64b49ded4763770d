/**
 * Three nodes behind HAProxy (Debian's, TCP round robin): agents and visitors
 * both come through it. A visitor reaches a tunnel whatever node it lands
 * on; when the agent's node is killed with SIGKILL, the agent is back on
 * another node with its name, and visitors are served again, within seconds.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { signedIn } from "../harness/admin.ts";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { startBalancer, type TestBalancer } from "../harness/haproxy.ts";
import { freeRange } from "../harness/ports.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startServer, type TestServer } from "../harness/server.ts";

const SECRET = "failover-secret-for-tests-0123456789";
/** Liveness: the agent is back on another node within this of its node's death. */
const BACK_MS = 30_000;
let pg: TestPostgres;
let nodes: TestServer[] = [];
let balancer: TestBalancer;
let agent: TestAgent | undefined;
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`ok ${new URL(req.url).pathname}`) });

beforeAll(async () => {
  pg = await startPostgres();
  const url = await pg.newDatabase();
  const ports = freeRange(3);
  const ids = ["f1", "f2", "f3"];
  nodes = await Promise.all(
    ids.map((id, i) =>
      startServer({
        // agents stay on the WebSocket: a direct port would take them past the balancer
        args: ["--database", url, "--node-id", id, "--http-port", String(ports.first + i), "--node-url", `http://127.0.0.1:${ports.first + i}`, "--cluster-secret", SECRET, "--agent-port", "off"],
      }),
    ),
  );
  balancer = await startBalancer(nodes.map((n) => n.edgePort));
});
afterAll(async () => {
  await agent?.stop("SIGKILL");
  await balancer?.stop();
  await Promise.all(nodes.map((n) => n.stop("SIGKILL")));
  upstream.stop(true);
  await pg?.stop();
});

/** One request through the balancer on a new connection (so each may land on another node). */
async function visit(path: string): Promise<string> {
  try {
    const res = await fetch(`http://127.0.0.1:${balancer.port}${path}`, { headers: { Host: `keep.localhost:${balancer.port}`, Connection: "close" } });
    return `${res.status} ${await res.text()}`;
  } catch (err) {
    return `failed ${(err as Error).message}`;
  }
}

test("kill -9 of the agent's node: the agent is back on another node with its name, and visitors are served again, within seconds", async () => {
  const api = await signedIn(nodes[0]!);
  const token = await api.createToken(await api.createUser("failover", { skip_warning: true }));
  agent = await startAgent({ kind: "http", target: upstream.port!, server: `http://127.0.0.1:${balancer.port}`, token, args: ["--subdomain", "keep", "--skip-warning"] });

  // every node answers for it, whichever the balancer picks
  const before = await Promise.all(Array.from({ length: 30 }, (_, i) => visit(`/before-${i}`)));
  expect(before).toEqual(Array.from({ length: 30 }, (_, i) => `200 ok /before-${i}`));

  const holder = nodes.find((n) => /agent connected.*tunnels=http:\/\/keep\./.test(n.output.text()));
  expect(holder).toBeDefined();
  const seen = agent.output.lines.length;
  holder!.proc.kill("SIGKILL");
  await holder!.proc.exited;
  const killed = performance.now();

  // the agent reconnects through the balancer to a live node and takes its name back (liveness, not
  // speed: a backoff's first steps and a handshake take a second or two; a loaded machine adds some)
  await agent.output.waitFor(/Forwarding.*keep\./, BACK_MS + 5_000, seen);
  const back = performance.now() - killed;
  expect(back).toBeLessThan(BACK_MS);
  // and visitors, wherever they land, are served again
  let served = "";
  for (let i = 0; i < 50 && !served.startsWith("200"); i++) {
    served = await visit("/again");
    if (!served.startsWith("200")) await Bun.sleep(200);
  }
  expect(served).toBe("200 ok /again");
  const after = await Promise.all(Array.from({ length: 30 }, (_, i) => visit(`/after-${i}`)));
  expect(after).toEqual(Array.from({ length: 30 }, (_, i) => `200 ok /after-${i}`));
  console.log(`failover: agent back ${Math.round(back)} ms after SIGKILL; visitors served ${Math.round(performance.now() - killed)} ms after`);
}, 90_000);
