/** Collects a child process's stdout and stderr as lines, and waits for a line to appear. */
import type { Subprocess } from "bun";

export class LineReader {
  readonly lines: string[] = [];
  private waiters: { pattern: RegExp; resolve(line: string): void; reject(err: Error): void }[] = [];
  private ended = false;
  private endWaiters: (() => void)[] = [];

  constructor(proc: Subprocess<any, "pipe", "pipe">) {
    let open = 2;
    const done = () => {
      if (--open === 0) {
        this.ended = true;
        for (const w of this.endWaiters) w();
        // a process that exits before printing what someone waits for fails that wait now
        for (const w of this.waiters.splice(0)) w.reject(new Error(`process ended before a line matched ${w.pattern}`));
      }
    };
    this.pump(proc.stdout).finally(done);
    this.pump(proc.stderr).finally(done);
  }

  private async pump(stream: ReadableStream<Uint8Array>) {
    const decoder = new TextDecoder();
    let rest = "";
    for await (const chunk of stream) {
      rest += decoder.decode(chunk, { stream: true });
      let nl;
      while ((nl = rest.indexOf("\n")) >= 0) {
        this.push(rest.slice(0, nl));
        rest = rest.slice(nl + 1);
      }
    }
    if (rest) this.push(rest);
  }

  private push(line: string) {
    this.lines.push(line);
    this.waiters = this.waiters.filter((w) => {
      if (!w.pattern.test(line)) return true;
      w.resolve(line);
      return false;
    });
  }

  text(): string {
    return this.lines.join("\n");
  }

  /** Resolves with the first line (already seen from line `from` on, or yet to come) that matches. */
  waitFor(pattern: RegExp, timeoutMs = 10_000, from = 0): Promise<string> {
    const seen = this.lines.slice(from).find((l) => pattern.test(l));
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${pattern}`));
      }, timeoutMs);
      const waiter = {
        pattern,
        resolve: (line: string) => {
          clearTimeout(timer);
          resolve(line);
        },
        reject: (err: Error) => {
          clearTimeout(timer);
          reject(err);
        },
      };
      this.waiters.push(waiter);
      if (this.ended) {
        clearTimeout(timer);
        reject(new Error(`process ended before a line matched ${pattern}`));
      }
    });
  }

  /** Resolves when both output streams have closed. */
  closed(): Promise<void> {
    return this.ended ? Promise.resolve() : new Promise((r) => this.endWaiters.push(r));
  }
}
