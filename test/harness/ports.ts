/** Port ranges and TCP helpers for tests that need the server's --tcp-ports or a TCP echo. */
import { connect } from "node:net";

/** A range of `size` consecutive ports free on 127.0.0.1 right now, outside the ephemeral and default tunnel ranges. */
export function freeRange(size: number): { first: number; last: number } {
  for (let attempt = 0; attempt < 50; attempt++) {
    // below the ephemeral range (32768+) and the server's default TCP range (20000-29999): no one else picks these by chance
    const first = 10_000 + Math.floor(Math.random() * 9_000);
    const held: { stop(force?: boolean): void }[] = [];
    try {
      for (let p = first; p < first + size; p++) held.push(Bun.listen({ hostname: "127.0.0.1", port: p, socket: { data() {} } }));
      return { first, last: first + size - 1 };
    } catch {
      // taken: try elsewhere
    } finally {
      for (const h of held) h.stop(true);
    }
  }
  throw new Error("no free port range found");
}

/**
 * A port for a server a test stops and starts again on the same address:
 * outside the ephemeral range, so that while it is down another test's
 * outgoing connection cannot take it as its local port (freePort's can).
 */
export function restartablePort(): number {
  return freeRange(1).first;
}

/** Whether a new TCP connection to 127.0.0.1:`port` is refused right now (nothing listens there). */
export function refuses(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const s = connect(port, "127.0.0.1");
    s.once("connect", () => (s.destroy(), resolve(false)));
    s.once("error", () => resolve(true));
  });
}

/**
 * Connects to `port`, waits for the echo service's "ready\n" greeting, sends
 * `text` and resolves with what comes back (5 s at most).
 */
export async function echoThrough(port: number, text: string): Promise<string> {
  let got = "";
  const { promise, resolve, reject } = Promise.withResolvers<string>();
  const timer = setTimeout(() => reject(new Error(`no echo after 5 s (got '${got}')`)), 5_000);
  // a refused connection rejects here: the timer must not outlive it (callers may poll with this)
  const sock = await Bun.connect({
    hostname: "127.0.0.1",
    port,
    socket: {
      data(s, d) {
        const greeted = got.startsWith("ready\n");
        got += d.toString();
        if (!greeted && got.startsWith("ready\n")) s.write(text);
        if (got.length >= "ready\n".length + text.length) resolve(got.slice("ready\n".length));
      },
      close: () => reject(new Error(`closed before the echo (got '${got}')`)),
      error: (_s, e) => reject(e),
    },
  }).catch((err) => {
    clearTimeout(timer);
    promise.catch(() => {});
    throw err;
  });
  try {
    return await promise;
  } finally {
    clearTimeout(timer);
    sock.end();
  }
}

/** A port free on 127.0.0.1 right now, for a program that takes no port 0 (tinyproxy, danted). */
export function freePort(): number {
  const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = probe.port;
  probe.stop(true);
  return port;
}

/**
 * Waits (at most `ms`) until 127.0.0.1:`port` takes connections; fails at
 * once with `ended()`'s words when the program started to listen there ends.
 */
export async function untilListening(port: number, ended: () => string | undefined, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    const why = ended();
    if (why !== undefined) throw new Error(why);
    const up = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {} } }).then(
      (s) => (s.end(), true),
      () => false,
    );
    if (up) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await Bun.sleep(20);
  }
}
