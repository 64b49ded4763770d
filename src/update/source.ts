/**
 * Where a release's files come from: the project's releases on GitHub (the
 * latest, or one version's), another URL that holds one release's files
 * (a mirror), or a directory on this machine (what `npm run release`
 * wrote). Every read is capped in size and in time: a source is a stranger
 * until the signature says otherwise.
 */
import { closeSync, fstatSync, openSync, readSync, statSync, writeSync } from "node:fs";
import { join } from "node:path";
import { hidePassword } from "../log-redact.ts";
import { UpdateError } from "./errors.ts";

/** The project's releases; install.sh has the same address. */
export const RELEASES_URL = "https://github.com/burrow-tunnel/burrow/releases";

/** How long a read may wait for its next bytes by default (a stalled mirror ends, it does not hang): burrow update --timeout. */
export const STALL_TIMEOUT_MS = 30_000;

export interface ReleaseSource {
  /** Where it is, for messages: a URL or a directory. */
  where: string;
  /** A small file whole (SHA256SUMS, its signature), at most `maxBytes`. */
  read(name: string, maxBytes: number): Promise<Uint8Array>;
  /** A large file into the open file `fd`, at most `maxBytes`; returns its length and SHA-256 (hex). */
  download(name: string, fd: number, maxBytes: number): Promise<{ bytes: number; sha256: string }>;
}

export interface SourceOptions {
  /** Which release on GitHub, when there is no --from: undefined for the latest. */
  version?: string;
  stallMs?: number;
  /** Ends every read at once (a server that stops). */
  signal?: AbortSignal;
}

/**
 * The source `--from` names: an http(s) URL or a directory (file:// too);
 * without it, the GitHub release of `version`, or the latest.
 */
export function releaseSource(from: string | undefined, options: SourceOptions = {}): ReleaseSource {
  const stallMs = options.stallMs ?? STALL_TIMEOUT_MS;
  if (from === undefined || from === "") {
    return urlSource(options.version ? `${RELEASES_URL}/download/v${options.version}` : `${RELEASES_URL}/latest/download`, stallMs, options.signal);
  }
  const said = hidePassword(from); // what --from said is printed in errors
  if (/^https?:\/\//i.test(from)) {
    let url: URL;
    try {
      url = new URL(from);
    } catch {
      throw new UpdateError("BAD_SOURCE", `--from ${said} is not a URL`);
    }
    // it is printed in messages and logs: a secret in it would be too
    if (url.username || url.password) throw new UpdateError("BAD_SOURCE", "--from: a URL with a user or password in it is not taken (it would be printed)");
    if (url.search || url.hash) throw new UpdateError("BAD_SOURCE", "--from: the URL of the folder that holds SHA256SUMS, without a query or fragment");
    return urlSource(url.href.replace(/\/+$/, ""), stallMs, options.signal);
  }
  let dir = from;
  if (/^file:/i.test(from)) {
    try {
      dir = decodeURIComponent(new URL(from).pathname);
    } catch {
      throw new UpdateError("BAD_SOURCE", `--from ${said} is not a file:// URL`);
    }
  }
  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    // said below
  }
  if (!isDir) throw new UpdateError("BAD_SOURCE", `--from ${said} is neither an http(s) URL nor a directory here`);
  return dirSource(dir);
}

/** An error of our own writing (the disk, not the download): passed on as it is, for update.ts to say. */
class WriteFailed extends Error {
  constructor(readonly error: unknown) {
    super("write failed");
  }
}

/** Why a read ended when `signal` ended it: a deadline, or a stop. */
const ended = (signal: AbortSignal) => ((signal.reason as Error | undefined)?.name === "TimeoutError" ? "it took too long" : "stopped");

function urlSource(base: string, stallMs: number, signal?: AbortSignal): ReleaseSource {
  async function open(name: string) {
    const abort = new AbortController();
    let stalled = false;
    const onStall = () => {
      stalled = true;
      abort.abort();
    };
    const onStop = () => abort.abort();
    signal?.addEventListener("abort", onStop, { once: true });
    let stall = setTimeout(onStall, stallMs);
    const stop = () => {
      clearTimeout(stall);
      signal?.removeEventListener("abort", onStop);
      abort.abort();
    };
    const url = `${base}/${name}`;
    let res: Response;
    try {
      // redirects followed (GitHub sends its downloads to a storage host); nothing but the path is sent.
      // identity: a compressed answer's length is not the bytes read, and the checksum is of the file itself
      res = await fetch(url, { signal: abort.signal, redirect: "follow", headers: { "user-agent": "burrow-update", accept: "*/*", "accept-encoding": "identity" } });
    } catch (err) {
      stop();
      throw new UpdateError("UNREACHABLE", `cannot reach ${url}: ${stalled ? `no answer in ${stallMs / 1000} s` : signal?.aborted ? ended(signal) : fetchError(err)}`);
    }
    if (res.status === 404 || !res.ok || !res.body) {
      stop();
      if (res.status === 404) throw new UpdateError("NOT_FOUND", `${url} is not there (404)`);
      throw new UpdateError("UNREACHABLE", `${url} answered ${res.status} ${res.statusText}`.trim());
    }
    // a length is believed only for bytes as they are sent
    const declared = res.headers.get("content-encoding") ? NaN : Number(res.headers.get("content-length") ?? NaN);
    // each chunk restarts the stall timer: a slow download goes on, a stalled one ends
    const body = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, out) {
          clearTimeout(stall);
          stall = setTimeout(onStall, stallMs);
          out.enqueue(chunk);
        },
      }),
    );
    return { body, length: Number.isSafeInteger(declared) ? declared : undefined, stop, stalled: () => stalled };
  }

  async function pump(name: string, maxBytes: number, each: (chunk: Uint8Array) => void): Promise<number> {
    const { body, length, stop, stalled } = await open(name);
    if (length !== undefined && length > maxBytes) {
      stop();
      throw new UpdateError("TOO_LARGE", `${base}/${name} is ${length} bytes, more than the ${maxBytes} a release's ${name} may be`);
    }
    let got = 0;
    try {
      for await (const chunk of body) {
        got += chunk.length;
        if (got > maxBytes) throw new UpdateError("TOO_LARGE", `${base}/${name} is more than the ${maxBytes} bytes a release's ${name} may be`);
        try {
          each(chunk);
        } catch (err) {
          throw new WriteFailed(err);
        }
      }
    } catch (err) {
      if (err instanceof UpdateError) throw err;
      if (err instanceof WriteFailed) throw err.error;
      const why = stalled() ? `nothing came for ${stallMs / 1000} s` : signal?.aborted ? ended(signal) : fetchError(err) || "the connection ended";
      throw new UpdateError("CUT_SHORT", `the download of ${base}/${name} stopped after ${got}${length !== undefined ? ` of ${length}` : ""} bytes: ${why}`);
    } finally {
      stop();
    }
    if (length !== undefined && got !== length) throw new UpdateError("CUT_SHORT", `the download of ${base}/${name} was cut short: ${got} of ${length} bytes`);
    return got;
  }

  return {
    where: base,
    async read(name, maxBytes) {
      const parts: Uint8Array[] = [];
      await pump(name, maxBytes, (c) => parts.push(c));
      return Buffer.concat(parts);
    },
    async download(name, fd, maxBytes) {
      const hash = new Bun.CryptoHasher("sha256");
      const bytes = await pump(name, maxBytes, (c) => {
        hash.update(c);
        writeAll(fd, c);
      });
      return { bytes, sha256: hash.digest("hex") };
    },
  };
}

function dirSource(dir: string): ReleaseSource {
  function openIn(name: string, maxBytes: number): { fd: number; size: number } {
    const path = join(dir, name);
    let fd: number;
    try {
      fd = openSync(path, "r");
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw new UpdateError(code === "ENOENT" ? "NOT_FOUND" : "UNREACHABLE", code === "ENOENT" ? `${path} is not there` : `cannot read ${path}: ${(err as Error).message}`);
    }
    const size = fstatSync(fd).size;
    if (size > maxBytes) {
      closeSync(fd);
      throw new UpdateError("TOO_LARGE", `${path} is ${size} bytes, more than the ${maxBytes} a release's ${name} may be`);
    }
    return { fd, size };
  }
  function each(name: string, maxBytes: number, use: (chunk: Uint8Array) => void): number {
    const { fd, size } = openIn(name, maxBytes);
    const buf = Buffer.allocUnsafe(1 << 20);
    let got = 0;
    try {
      for (let n = readSync(fd, buf); n > 0; n = readSync(fd, buf)) {
        got += n;
        if (got > maxBytes) throw new UpdateError("TOO_LARGE", `${join(dir, name)} grew past ${maxBytes} bytes while read`);
        use(buf.subarray(0, n));
      }
    } finally {
      closeSync(fd);
    }
    if (got !== size) throw new UpdateError("CUT_SHORT", `${join(dir, name)} changed while read (${got} of ${size} bytes)`);
    return got;
  }
  return {
    where: dir,
    async read(name, maxBytes) {
      const parts: Buffer[] = [];
      each(name, maxBytes, (c) => parts.push(Buffer.from(c)));
      return Buffer.concat(parts);
    },
    async download(name, fd, maxBytes) {
      const hash = new Bun.CryptoHasher("sha256");
      const bytes = each(name, maxBytes, (c) => {
        hash.update(c);
        writeAll(fd, c);
      });
      return { bytes, sha256: hash.digest("hex") };
    },
  };
}

/** A fetch error's words without Bun's advice to programmers ("For more information, pass `verbose: true` ..."). */
function fetchError(err: unknown): string {
  return String((err as Error)?.message ?? err).split(/\.? For more information/)[0]!;
}

function writeAll(fd: number, chunk: Uint8Array): void {
  for (let at = 0; at < chunk.length; ) at += writeSync(fd, chunk, at);
}
