/**
 * An admission hook's receiver as an operator would run one, in a process
 * of its own (so that it can really crash): a Bun.serve on loopback that
 * verifies each request with the `standardwebhooks` package and answers as
 * it was told: allow, refuse (with a code and message), hang (never
 * answer), crash (the process exits in the middle of the request), or
 * garbage (a 200 that is not the answer's JSON). Run as a script:
 *
 *   bun admission-receiver.ts <secret>
 *
 * it prints its port, takes `POST /_mode/<mode>` to change its answer and
 * `GET /_log` for the requests it verified. From a test, startAdmissionReceiver().
 */
import type { Subprocess } from "bun";
import { Webhook } from "standardwebhooks";
import { LineReader } from "./lines.ts";

export type AdmissionMode = "allow" | "refuse" | "hang" | "crash" | "garbage";

if (import.meta.main) {
  const wh = new Webhook(process.argv[2]!);
  let mode: AdmissionMode = "allow";
  const log: unknown[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    async fetch(req) {
      const path = new URL(req.url).pathname;
      if (path.startsWith("/_mode/")) {
        mode = path.slice(7) as AdmissionMode;
        return new Response("ok");
      }
      if (path === "/_log") return Response.json(log);
      const body = await req.text();
      let ask: { data: unknown };
      try {
        ask = wh.verify(body, Object.fromEntries(req.headers)) as { data: unknown };
      } catch {
        return new Response("bad signature", { status: 401 });
      }
      log.push(ask);
      switch (mode) {
        case "allow":
          return Response.json({ allow: true });
        case "refuse":
          return Response.json({ allow: false, code: "NOT_IN_HOURS", message: "tunnels only between 8:00 and 20:00" });
        case "garbage":
          return new Response("<html>maintenance</html>", { status: 200 });
        case "hang":
          return new Promise<Response>(() => {});
        case "crash":
          process.exit(3);
      }
    },
  });
  console.log(`admission receiver on ${server.port}`);
}

export interface AdmissionReceiver extends AsyncDisposable {
  url: string;
  port: number;
  proc: Subprocess<"ignore", "pipe", "pipe">;
  mode(m: AdmissionMode): Promise<void>;
  asks(): Promise<{ id: string; type: string; data: Record<string, any> }[]>;
  stop(): Promise<void>;
}

export async function startAdmissionReceiver(secret: string): Promise<AdmissionReceiver> {
  const proc = Bun.spawn([process.execPath, import.meta.path, secret], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const output = new LineReader(proc);
  const line = await output.waitFor(/admission receiver on \d+/, 10_000);
  const port = Number(/on (\d+)/.exec(line)![1]);
  const base = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
    await proc.exited;
  };
  return {
    url: `${base}/admit`,
    port,
    proc,
    mode: async (m) => void (await fetch(`${base}/_mode/${m}`, { method: "POST" })),
    asks: async () => (await fetch(`${base}/_log`)).json() as never,
    stop,
    [Symbol.asyncDispose]: stop,
  };
}
