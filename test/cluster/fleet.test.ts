/**
 * Tunnels added to and removed from a live session on several nodes (two
 * nodes on one PostgreSQL database): an added tunnel's name is claimed over
 * every node as a HELLO's is (a name live on the other node is
 * SUBDOMAIN_TAKEN), max_tunnels counts both nodes, an added tunnel is
 * reached through the other node (relayed), and a removed one's name is
 * free on every node at once, for another user's agent on the other node.
 * And a device's remote config changed through one node's admin API
 * reaches its agent connected to the other node, which serves the new
 * tunnel within 5 s; and one node's GET /api/agents lists the agents of
 * both, and its asks reach an agent on the other node, whose answer comes
 * back (a yes, and a no said in the API's answer).
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { connect } from "../../sdk/src/index.ts";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { tunnelFetch } from "../harness/agent.ts";
import { freeRange } from "../harness/ports.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { burrowCommand, startServer, type TestServer } from "../harness/server.ts";
import { waitUntil, within } from "../harness/wait.ts";

setDefaultTimeout(120_000);

const SECRET = "live-tunnels-cluster-secret-0123456789";
const service = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`served ${new URL(req.url).pathname}`) });
let pg: TestPostgres;
let nodes: TestServer[] = [];
let api: AdminClient;

beforeAll(async () => {
  pg = await startPostgres();
  const url = await pg.newDatabase();
  const ports = freeRange(2);
  nodes = await Promise.all(
    ["lt1", "lt2"].map((id, i) =>
      startServer({ args: ["--database", url, "--node-id", id, "--http-port", String(ports.first + i), "--node-url", `http://127.0.0.1:${ports.first + i}`, "--cluster-secret", SECRET] }),
    ),
  );
  api = await signedIn(nodes[0]!);
}, 90_000);

afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  service.stop(true);
  await pg?.stop();
});

const refusalOf = (p: Promise<unknown>) => p.then(() => undefined, (err: { code?: string }) => err.code ?? String(err));

test("an added tunnel's name is claimed over every node, max_tunnels counts both nodes, and a removed one's name is free everywhere at once", async () => {
  const [one, two] = nodes as [TestServer, TestServer];
  const owner = await api.createUser("cluster-live", { max_tunnels: 3 });
  const tokenOne = await api.createToken(owner, "one");
  const tokenTwo = await api.createToken(owner, "two");
  const rival = await api.createToken(await api.createUser("cluster-rival"), "rival");
  const onOne = connect({ server: one.edgeUrl, token: tokenOne });
  const onTwo = connect({ server: two.edgeUrl, token: tokenTwo });
  const rivalOnTwo = connect({ server: two.edgeUrl, token: rival });
  try {
    await within(onOne.forward({ port: service.port!, subdomain: "cl-first" }), 15_000, "the first tunnel on node one");
    await within(onTwo.forward({ port: service.port!, subdomain: "cl-second" }), 15_000, "a tunnel on node two");
    // added on node one: the name node two's session holds is taken
    expect(await refusalOf(onOne.forward({ port: service.port!, subdomain: "cl-second" }))).toBe("SUBDOMAIN_TAKEN");
    const added = await within(onOne.forward({ port: service.port!, subdomain: "cl-added" }), 15_000, "a tunnel added on node one");
    // reached through either node (node two relays to node one)
    for (const node of nodes) expect(await (await tunnelFetch(node.edgePort, "cl-added", "/x")).text()).toBe("served /x");
    // three of three, over both nodes
    expect(await refusalOf(onTwo.forward({ port: service.port!, subdomain: "cl-fourth" }))).toBe("TUNNEL_LIMIT");
    // the rival waits on node two for the name; removed on node one, it is free there at once
    expect(await refusalOf(rivalOnTwo.forward({ port: service.port!, subdomain: "cl-added" }))).toBe("SUBDOMAIN_TAKEN");
    await within(added.close(), 10_000, "the added tunnel closed");
    await within(rivalOnTwo.forward({ port: service.port!, subdomain: "cl-added" }), 15_000, "the rival's tunnel on the freed name");
    await waitUntil(async () => (await tunnelFetch(one.edgePort, "cl-added", "/y")).status === 200, 10_000, "node one relaying to the rival");
    // node one's first tunnel went on all along
    expect(await (await tunnelFetch(one.edgePort, "cl-first", "/z")).text()).toBe("served /z");
  } finally {
    await Promise.all([onOne.close(), onTwo.close(), rivalOnTwo.close()]);
  }
});

test("a remote config changed through one node's admin API reaches the device's agent on the other node within 5 s", async () => {
  const [one, two] = nodes as [TestServer, TestServer];
  const user = await api.createUser("cluster-fleet");
  const made = (await api.post(`/api/users/${user}/tokens`, { device_name: "far" })).body;
  expect((await api.put(`/api/tokens/${made.token_id}/config`, { tunnels: { first: { proto: "http", addr: service.port, subdomain: "cl-remote-1" } } })).status).toBe(200);
  const proc = Bun.spawn([...burrowCommand(), "start", "--remote", "--server", two.edgeUrl, "--token", made.token, "--log", "text", "--no-inspect"], {
    env: { ...process.env, XDG_CONFIG_HOME: "/nonexistent-burrow-config", BURROW_SERVER: undefined, BURROW_TOKEN: undefined, BURROW_CONFIG: undefined, HTTPS_PROXY: "", ALL_PROXY: "" },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  try {
    await waitUntil(async () => (await tunnelFetch(two.edgePort, "cl-remote-1", "/a")).status === 200, 15_000, "the first config served on node two");
    const since = performance.now();
    // made on node one; the agent is on node two
    expect((await api.put(`/api/tokens/${made.token_id}/config`, { tunnels: { second: { proto: "http", addr: service.port, subdomain: "cl-remote-2" } } })).status).toBe(200);
    await waitUntil(async () => (await tunnelFetch(one.edgePort, "cl-remote-2", "/b")).status === 200 && (await tunnelFetch(two.edgePort, "cl-remote-1", "/c")).status === 404, 15_000, "the new config served");
    expect(performance.now() - since).toBeLessThan(5_000);
  } finally {
    proc.kill("SIGINT");
    await proc.exited;
  }
});

test("GET /api/agents on one node lists the agents of both; an ask made on one node reaches an agent on the other, and its answer comes back", async () => {
  const [one, two] = nodes as [TestServer, TestServer];
  const user = await api.createUser("cluster-agents");
  const yes = (await api.post(`/api/users/${user}/tokens`, { device_name: "yes" })).body;
  const no = (await api.post(`/api/users/${user}/tokens`, { device_name: "no" })).body;
  const spawn = (token: string, args: string[]) =>
    Bun.spawn([...burrowCommand(), "http", String(service.port), "--server", two.edgeUrl, "--token", token, "--log", "text", "--no-inspect", ...args], {
      env: { ...process.env, XDG_CONFIG_HOME: "/nonexistent-burrow-config", BURROW_SERVER: undefined, BURROW_TOKEN: undefined, HTTPS_PROXY: "", ALL_PROXY: "" },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
  const agents = [spawn(yes.token, ["--subdomain", "cl-agent-yes"]), spawn(no.token, ["--remote-restart", "off"])];
  try {
    // listed by node one, from node two's rows
    const ofToken = async (id: number) => ((await api.get("/api/agents")).body as any[]).find((a) => a.token_id === id);
    await waitUntil(async () => (await ofToken(yes.token_id))?.tunnels?.length === 1 && (await ofToken(no.token_id)) !== undefined, 15_000, "both agents listed on node one");
    const listedYes = await ofToken(yes.token_id);
    expect(listedYes).toMatchObject({ node: "lt2", username: "cluster-agents", manage: { restart: true, update: false } });
    expect(listedYes.tunnels[0].url).toContain("cl-agent-yes.");
    // asked on node one, answered on node two
    const refused = await api.post(`/api/agents/${(await ofToken(no.token_id)).id}/restart`);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toContain("--remote-restart is off");
    // a connection that ends before its agent answers is told as such (504): on a loaded machine the agent may have
    // just connected again, and the ask goes to the session listed now, as an admin's script would send it
    let asked = listedYes;
    let accepted = await api.post(`/api/agents/${asked.id}/restart`);
    for (let i = 0; i < 3 && accepted.status === 504 && String(accepted.body.error).includes("connection ended"); i++) {
      await waitUntil(async () => ((await ofToken(yes.token_id))?.id ?? asked.id) !== asked.id, 15_000, "the agent's session after the one that ended");
      asked = await ofToken(yes.token_id);
      accepted = await api.post(`/api/agents/${asked.id}/restart`);
    }
    expect(accepted.body).toEqual({ status: "accepted", message: "connecting again" });
    expect(accepted.status).toBe(200);
    await waitUntil(async () => ((await ofToken(yes.token_id))?.id ?? asked.id) !== asked.id, 15_000, "the agent's new session listed");
    await waitUntil(async () => (await tunnelFetch(one.edgePort, "cl-agent-yes", "/d")).status === 200, 15_000, "its tunnel back");
    expect((await api.post("/api/agents/00000000-0000-0000-0000-000000000000/update")).status).toBe(404);
  } finally {
    for (const p of agents) p.kill("SIGINT");
    await Promise.all(agents.map((p) => p.exited));
  }
});

