/**
 * A webhook receiver as a user writes one, on loopback: every delivery is
 * verified with the `standardwebhooks` npm package (the reference library
 * of the specification), against every secret it was given, and kept with
 * its headers. What it answers is the test's to choose: 204, an error
 * status, a redirect, a body past a cap, or no answer at all (hang); and it
 * can be stopped and started again on the same port (a receiver down, then
 * up). Use with `await using`, or call stop().
 */
import { Webhook } from "standardwebhooks";

export type ReceiverMode = "ok" | "error" | "redirect" | "huge" | "hang";

export interface Received {
  id: string;
  timestamp: string;
  signature: string;
  body: string;
  event: { id: string; type: string; timestamp: string; data: Record<string, unknown> };
  /** Which of the receiver's secrets verified it (their indexes). */
  verifiedBy: number[];
  host: string | null;
}

export interface WebhookReceiver extends AsyncDisposable {
  url: string;
  port: number;
  /** Deliveries that verified, in arrival order. */
  received: Received[];
  /** Requests that failed verification (their bodies). */
  rejected: string[];
  mode: ReceiverMode;
  /** Secrets to verify with; a delivery is kept when any verifies. */
  secrets: string[];
  /** Requests that came, whatever their fate. */
  requests: number;
  /** Closes the port (connections refused from now on). */
  down(): Promise<void>;
  /** Listens again on the same port. */
  up(): void;
  stop(): Promise<void>;
}

export function startReceiver(secrets: string[] = [], path = "/hook"): WebhookReceiver {
  const hanging = new Set<() => void>();
  const r: WebhookReceiver = {
    url: "",
    port: 0,
    received: [],
    rejected: [],
    mode: "ok",
    secrets,
    requests: 0,
    async down() {
      for (const release of hanging) release();
      await server?.stop(true);
      server = undefined;
    },
    up() {
      server = listen(r.port);
    },
    async stop() {
      await r.down();
    },
    [Symbol.asyncDispose]: () => r.stop(),
  };
  const fetch = async (req: Request): Promise<Response> => {
    r.requests++;
    const body = await req.text();
    const headers = Object.fromEntries(req.headers);
    const verifiedBy = r.secrets.flatMap((s, i) => {
      try {
        new Webhook(s).verify(body, headers);
        return [i];
      } catch {
        return [];
      }
    });
    if (verifiedBy.length === 0) {
      r.rejected.push(body);
      return new Response("signature refused", { status: 400 });
    }
    if (r.mode === "hang") {
      await new Promise<void>((resolve) => hanging.add(resolve));
      return new Response("late", { status: 500 });
    }
    if (r.mode === "error") return new Response("no", { status: 503 });
    if (r.mode === "redirect") return new Response(null, { status: 307, headers: { location: `http://127.0.0.1:${r.port}/elsewhere` } });
    r.received.push({
      id: headers["webhook-id"]!,
      timestamp: headers["webhook-timestamp"]!,
      signature: headers["webhook-signature"]!,
      body,
      event: JSON.parse(body),
      verifiedBy,
      host: req.headers.get("host"),
    });
    if (r.mode === "huge") return new Response("x".repeat(4 * 1024 * 1024));
    return new Response(null, { status: 204 });
  };
  const listen = (port: number) => Bun.serve({ hostname: "127.0.0.1", port, fetch, idleTimeout: 0 });
  let server: ReturnType<typeof listen> | undefined = listen(0);
  r.port = server.port!;
  r.url = `http://127.0.0.1:${r.port}${path}`;
  return r;
}
