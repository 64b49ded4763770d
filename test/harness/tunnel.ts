/**
 * The set-up most end-to-end tests share, in one call: the real server on
 * ephemeral ports with a temp data dir, a user and its token made through
 * the admin API, and (withTunnel) the real agent for an HTTP or TCP tunnel
 * to a real local service, ready when the call returns.
 *
 * Everything started is stopped by `await using` or close(), last started
 * first (agents, then the local service, then the server), also when a test
 * fails, and also when the set-up itself fails half way.
 *
 *   await using t = await withTunnel({ upstream: () => new Response("hi"), args: ["--subdomain", "demo"] });
 *   expect(await (await t.fetch("/")).text()).toBe("hi");
 */
import { signedIn, type AdminClient } from "./admin.ts";
import { startAgent, tunnelFetch, type AgentStart, type TestAgent } from "./agent.ts";
import { startServer, type StartOptions, type TestServer } from "./server.ts";

export interface RigOptions {
  /** How to start the server; or a running server to use, which is left running. */
  server?: StartOptions | TestServer;
  /** The name of the user the token belongs to. */
  username?: string;
  /** More fields for the new user (e.g. `{ require_auth: true }`). */
  user?: Record<string, unknown>;
}

/** What an agent takes; the rig's server and token unless given. */
export type RigAgentStart = Omit<AgentStart, "server" | "token"> & Partial<Pick<AgentStart, "server" | "token">>;

/** A running server, signed in, with one user and its token. */
export interface Rig extends AsyncDisposable {
  server: TestServer;
  /** Signed in as the server's first admin. */
  api: AdminClient;
  userId: number;
  token: string;
  /** Starts an agent, by default on this server with this token; it stops when the rig closes. */
  startAgent(opts: RigAgentStart): Promise<TestAgent>;
  /** Stops everything the rig started. */
  close(): Promise<void>;
}

/**
 * The local service a tunnel leads to: the port (or HOST:PORT) of one the
 * test runs; an HTTP handler, served on 127.0.0.1 for the tunnel's life; or
 * "echo", a TCP service that says "ready\n" and then echoes (what
 * echoThrough() in ports.ts expects).
 */
export type Upstream = number | string | ((req: Request) => Response | Promise<Response>) | { echo: true };

export const ECHO: Upstream = { echo: true };

export interface TunnelOptions extends RigOptions {
  /** The kind of tunnel: `burrow http` (the default) or `burrow tcp`. */
  kind?: "http" | "tcp";
  upstream: Upstream;
  /** The agent's own flags, e.g. `["--subdomain", "demo"]`. */
  args?: string[];
  /** More for the agent: its environment, another executable, the line to wait for. */
  agent?: Pick<AgentStart, "env" | "executable" | "prefix" | "waitFor">;
}

/** A rig with one tunnel up. */
export interface Tunnel extends Rig {
  agent: TestAgent;
  /** The port of the local service behind the tunnel. */
  upstreamPort: number;
  /** A request to the tunnel through the edge, with the tunnel's Host (http tunnels). */
  fetch(path: string, init?: RequestInit): Promise<Response>;
}

const isRunning = (s: RigOptions["server"]): s is TestServer => s !== undefined && "proc" in s;

/** Runs `body` with a stack that is emptied (and the error passed on) if `body` throws. */
async function building<T>(stack: AsyncDisposableStack, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (err) {
    await stack.disposeAsync();
    throw err;
  }
}

async function rigOn(stack: AsyncDisposableStack, opts: RigOptions): Promise<Rig> {
  const server = isRunning(opts.server) ? opts.server : stack.use(await startServer(opts.server));
  const api = await signedIn(server);
  const userId = await api.createUser(opts.username ?? "tunnel-owner", opts.user);
  const token = await api.createToken(userId);
  const close = () => stack.disposeAsync();
  return {
    server,
    api,
    userId,
    token,
    startAgent: async (a) => stack.use(await startAgent({ server: server.edgeUrl, token, ...a })),
    close,
    [Symbol.asyncDispose]: close,
  };
}

/** A real server with a user and its token, for tests that start their agents themselves. */
export async function withServer(opts: RigOptions = {}): Promise<Rig> {
  const stack = new AsyncDisposableStack();
  return building(stack, () => rigOn(stack, opts));
}

function serveUpstream(stack: AsyncDisposableStack, upstream: Upstream): { target: string | number; port: number } {
  if (typeof upstream === "number") return { target: upstream, port: upstream };
  if (typeof upstream === "string") return { target: upstream, port: Number(/(\d+)$/.exec(upstream)?.[1]) };
  if (typeof upstream === "function") {
    const http = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: upstream });
    stack.defer(() => http.stop(true));
    return { target: http.port!, port: http.port! };
  }
  const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open: (s) => void s.write("ready\n"), data: (s, d) => void s.write(d) } });
  stack.defer(() => echo.stop(true));
  return { target: echo.port, port: echo.port };
}

/** A real server, a user and its token, and one agent's tunnel to `upstream`, up and forwarding. */
export async function withTunnel(opts: TunnelOptions): Promise<Tunnel> {
  const stack = new AsyncDisposableStack();
  return building(stack, async () => {
    const rig = await rigOn(stack, opts);
    const local = serveUpstream(stack, opts.upstream);
    const kind = opts.kind ?? "http";
    const agent = await rig.startAgent({ kind, target: local.target, args: opts.args, ...opts.agent });
    return {
      ...rig,
      agent,
      upstreamPort: local.port,
      fetch: (path: string, init?: RequestInit) => {
        if (!agent.subdomain) throw new Error(`fetch() goes to an http tunnel; this one is ${agent.publicUrl}`);
        return tunnelFetch(rig.server.edgePort, agent.subdomain, path, init);
      },
    };
  });
}
