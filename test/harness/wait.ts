/** Bounded waiting for tests: every wait names what it waits for and fails after a limit. */

export function deferred<T = void>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

export function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout>;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms))),
  ]);
}

/** Checks `ok` every `everyMs` until it holds; fails naming `what` after `ms`. */
export async function waitUntil(ok: () => boolean | Promise<boolean>, ms: number, what: string, everyMs = 50): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await ok())) {
    if (performance.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await Bun.sleep(everyMs);
  }
}
