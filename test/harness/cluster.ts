/**
 * Two nodes of one cluster: a fresh PostgreSQL server and database, and two
 * servers on it, each on a public HTTP port known before it starts so that
 * it can say where it is (--node-url), with the same --cluster-secret.
 * The first id names the first node (nodes[0]), the second the second.
 *
 * stop() stops both nodes, then PostgreSQL. A start that fails stops what
 * it had started before it throws, so a test's afterAll has nothing left.
 */
import { freeRange } from "./ports.ts";
import { startPostgres, type TestPostgres } from "./postgres.ts";
import { startServer, type TestServer } from "./server.ts";

export interface TwoNodes {
  pg: TestPostgres;
  /** The database both nodes use. */
  url: string;
  nodes: TestServer[];
  stop(): Promise<void>;
}

export async function startTwoNodes(opts: { ids: readonly [string, string]; secret: string; /** More flags for each node, in the ids' order. */ args?: readonly [readonly string[], readonly string[]] }): Promise<TwoNodes> {
  const pg = await startPostgres();
  try {
    const url = await pg.newDatabase();
    const ports = freeRange(2);
    const started = await Promise.allSettled(
      opts.ids.map((id, i) =>
        startServer({ args: ["--database", url, "--node-id", id, "--http-port", String(ports.first + i), "--node-url", `http://127.0.0.1:${ports.first + i}`, "--cluster-secret", opts.secret, ...(opts.args?.[i] ?? [])] }),
      ),
    );
    const nodes = started.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
    const failed = started.find((s) => s.status === "rejected");
    if (failed) {
      await Promise.all(nodes.map((n) => n.stop()));
      throw failed.reason;
    }
    return {
      pg,
      url,
      nodes,
      stop: async () => {
        await Promise.all(nodes.map((n) => n.stop()));
        await pg.stop();
      },
    };
  } catch (e) {
    await pg.stop();
    throw e;
  }
}
