/** A raw visitor connection for the security tests: bytes exactly as written, what came back, whether it closed. */
import { connect, type Socket } from "node:net";
import { waitUntil } from "../harness/wait.ts";

/** How long a wait for an answer or a close may take (a liveness bound). */
const WAIT_MS = 5_000;

/** A raw connection: what came back so far, and whether it closed. */
export class Raw {
  private readonly socket: Socket;
  private got = Buffer.alloc(0);
  closed = false;
  readonly opened: Promise<void>;

  constructor(port: number) {
    this.socket = connect(port, "127.0.0.1");
    this.opened = new Promise((resolve) => this.socket.once("connect", () => resolve()));
    this.socket.on("data", (d: Buffer) => (this.got = Buffer.concat([this.got, d])));
    this.socket.on("close", () => (this.closed = true));
    this.socket.on("error", () => {});
  }

  get text(): string {
    return this.got.toString("latin1");
  }

  async send(text: string): Promise<void> {
    await this.opened;
    if (!this.closed) this.socket.write(text);
  }

  until(ok: (text: string) => boolean, what: string): Promise<void> {
    return waitUntil(() => ok(this.text), WAIT_MS, what, 10);
  }

  /** Waits for the peer to close (what it sent before is in `text`). */
  whenClosed(what: string): Promise<void> {
    return waitUntil(() => this.closed, WAIT_MS, what, 10);
  }

  [Symbol.dispose](): void {
    this.socket.destroy();
  }
}
