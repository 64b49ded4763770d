/**
 * Opens many idle agent sessions from one process with burrow's own agent
 * code: each an Agent (one connection, moved from its WebSocket to the
 * server's direct port when it has one, and one http tunnel with its own
 * random subdomain), as `burrow http` would open them.
 *
 *   bun bench/many-agents.ts --server URL --token T --target 127.0.0.1:PORT --counts 1000,10000 [--parallel 200]
 *
 * For each count it opens agents until that many are ready, prints
 *   ready count=N ms=<time for this step> total_ms=<since start> failed=F reconnects=R
 * and waits for a line "next" on stdin before the next count. After the
 * last count (or on "close", stdin EOF or SIGTERM) it stops every agent
 * (GOAWAY, close) and prints "closed ms=...".
 */
import { parseArgs } from "node:util";
import { Agent, type AgentOutput } from "../src/agent/client.ts";

const { values } = parseArgs({
  options: {
    server: { type: "string" },
    token: { type: "string" },
    target: { type: "string", default: "127.0.0.1:9" },
    counts: { type: "string", default: "1000" },
    parallel: { type: "string", default: "200" },
    "timeout-s": { type: "string", default: "600" },
  },
});
if (!values.server || !values.token) {
  console.error("usage: many-agents.ts --server URL --token T [--target HOST:PORT] [--counts 1000,10000] [--parallel 200]");
  process.exit(2);
}
const counts = values.counts!.split(",").map(Number);
const parallel = Number(values.parallel);
const [host, port] = values.target!.split(":") as [string, string];
const deadline = Date.now() + Number(values["timeout-s"]) * 1000;

const agents: Agent[] = [];
const runs: Promise<number>[] = [];
let ready = 0;
let failed = 0;
let reconnects = 0;
const started = performance.now();

const ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";
function randomName(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return "m" + Array.from(bytes, (b) => ALPHABET[b % ALPHABET.length]).join("");
}

/** Opens one agent; resolves when it is ready (true) or refused for good (false). */
function open(): Promise<boolean> {
  return new Promise((resolve) => {
    let first = true;
    const out: AgentOutput = {
      ready() {
        if (first) {
          first = false;
          ready++;
          resolve(true);
        }
      },
      request() {},
      connection() {},
      reconnecting() {
        reconnects++;
      },
      refused(code, message) {
        failed++;
        if (failed <= 5) console.error(`refused: ${code}: ${message}`);
        resolve(false);
      },
    };
    const agent = new Agent({
      server: values.server!,
      token: values.token!,
      tunnels: [{ name: "http", request: { protocol: "http", subdomain: randomName() }, target: { host, port: Number(port) } }],
      out,
    });
    agents.push(agent);
    runs.push(agent.run());
  });
}

async function openUntil(count: number): Promise<void> {
  const inFlight = new Set<Promise<void>>();
  while (ready < count) {
    if (Date.now() > deadline) throw new Error(`only ${ready} of ${count} agents ready in time`);
    if (failed > count) throw new Error(`${failed} agents refused`);
    while (inFlight.size < parallel && ready + inFlight.size < count) {
      const p: Promise<void> = open().then(() => void inFlight.delete(p));
      inFlight.add(p);
    }
    await Promise.race(inFlight);
  }
}

let closing: Promise<void> | undefined;
function closeAll(): Promise<void> {
  closing ??= (async () => {
    const t = performance.now();
    for (const a of agents) a.stop();
    await Promise.race([Promise.all(runs), Bun.sleep(30_000)]);
    console.log(`closed ms=${Math.round(performance.now() - t)} agents=${agents.length}`);
  })();
  return closing;
}
process.on("SIGTERM", () => void closeAll().then(() => process.exit(0)));
process.on("SIGINT", () => void closeAll().then(() => process.exit(0)));

const lines = (async function* () {
  const decoder = new TextDecoder();
  let buf = "";
  for await (const chunk of Bun.stdin.stream()) {
    buf += decoder.decode(chunk, { stream: true });
    let i: number;
    while ((i = buf.indexOf("\n")) >= 0) {
      yield buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
    }
  }
})();

try {
  for (const [i, count] of counts.entries()) {
    const t = performance.now();
    await openUntil(count);
    console.log(
      `ready count=${ready} ms=${Math.round(performance.now() - t)} total_ms=${Math.round(performance.now() - started)} failed=${failed} reconnects=${reconnects}`,
    );
    if (i < counts.length - 1) {
      const next = await lines.next();
      if (next.done || next.value === "close") break;
    }
  }
  if (counts.length > 0) await lines.next(); // hold the agents until told (or stdin closes)
} catch (err) {
  console.log(`error ${(err as Error).message} ready=${ready} failed=${failed}`);
}
await closeAll();
process.exit(0);
