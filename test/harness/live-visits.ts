/**
 * What the tests of visits that stay (a tcp connection, a WebSocket pipe)
 * ask of them after a change to the rules: whether one still answers, and
 * whether one ended within a bound (a liveness bound, far above what a
 * loaded machine takes).
 */

/** The WebSocket echoes a message sent now: open, and carried on by the edge. */
export async function wsStillEchoes(ws: WebSocket): Promise<boolean> {
  if (ws.readyState !== WebSocket.OPEN) return false;
  const answered = new Promise<boolean>((resolve) => {
    ws.addEventListener("message", (e) => resolve(String(e.data) === "still here"), { once: true });
    ws.addEventListener("close", () => resolve(false), { once: true });
  });
  ws.send("still here");
  return answered;
}

/** `closed` settles before `ms` pass: the visit was ended. */
export async function endsWithin(closed: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([closed.then(() => true), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}
