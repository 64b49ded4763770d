/**
 * Where the edge's certificates come from, for the public port and the
 * agents' direct port alike: files given at start (--tls-cert/--tls-key), or
 * the ACME store, whose certificates change while the server runs. The
 * first entry is what a client without a matching server name (SNI) gets;
 * the others carry the names they are for (a wildcard covers one label).
 */
import type { BunFile } from "bun";

export interface TlsEntry {
  cert: string | BunFile;
  key: string | BunFile;
  serverName?: string;
}

export interface TlsSource {
  /** For a listener that picks by server name (the public port: sockets/tls-terminators.ts). */
  entries(): TlsEntry[];
  /** For the agents' direct port (Bun.listen has no SNI): the certificate for the domain itself, where agents connect. */
  primary(): TlsEntry;
  /** Calls `listener` when the entries changed (a certificate obtained or renewed); returns the unsubscribe. */
  onChange(listener: () => void): () => void;
}

/** A certificate and key from files, read once at start. */
export function fileTls(cert: string, key: string): TlsSource {
  const entry = { cert: Bun.file(cert), key: Bun.file(key) };
  return { entries: () => [entry], primary: () => entry, onChange: () => () => {} };
}
