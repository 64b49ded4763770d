/**
 * POST /api/backup (admins only, like every route but login; a POST, so
 * under the cross-site refusal too): a consistent copy of the database as a
 * download. The copy is written to a temporary file in the data dir
 * (db/copy.ts: VACUUM INTO, a snapshot even while tunnels and admins write)
 * and unlinked as soon as it is open: the open descriptor keeps its bytes
 * readable while they stream, and whether the download ends, the client
 * goes away or the server dies, nothing is left behind to clean up.
 */
import type { Database } from "bun:sqlite";
import { open, type FileHandle } from "node:fs/promises";
import { unlinkSync } from "node:fs";
import { join } from "node:path";
import { AppError } from "../core/errors.ts";
import { partialPath, snapshot } from "../db/copy.ts";
import { DB_FILE } from "../db/open.ts";
import { log } from "../log.ts";
import { VERSION } from "../version.ts";
import type { Route } from "./context.ts";

/** What the download reads per pull: the socket's pace sets how many are in memory (one or two). */
const CHUNK_BYTES = 64 * 1024;

export interface BackupSource {
  dataDir: string;
  /** The server's own connection: the copy is a snapshot of what it has committed. */
  sqlite: Database;
}

/** 2026-01-02T03:04:05.678Z -> 20260102T030405Z (no colons: the name must be a file name everywhere). */
export const fileStamp = (d: Date) => d.toISOString().replace(/\.\d+Z$/, "Z").replace(/[-:]/g, "");

/** `source` undefined: the data is in PostgreSQL, and the route says to use pg_dump. */
export function backupRoutes(source: BackupSource | undefined): Route[] {
  return [
    {
      path: "/api/backup",
      methods: {
        async POST(req, { core, admin, address }) {
          if (!source) throw new AppError("BACKUP_UNAVAILABLE", "this server keeps its data in PostgreSQL: back it up with pg_dump");
          const temp = partialPath(join(source.dataDir, DB_FILE));
          let file: FileHandle;
          try {
            // synchronous, like every query of the server's: a database of some MB takes milliseconds
            snapshot(source.sqlite, temp);
            file = await open(temp, "r");
          } catch (err) {
            removeQuietly(temp);
            log.error("database backup failed", { admin: admin.username, err: String(err) });
            throw new AppError("INTERNAL", `cannot make the backup copy: ${(err as Error).message}`);
          }
          // on a system that cannot unlink an open file, it goes when the download ends
          const leftBehind = !removeQuietly(temp);
          const size = (await file.stat()).size;
          const name = `burrow-${VERSION}-${fileStamp(core.clock.now())}.db`;
          const body = streamFile(file, size, req.signal, (sent) => {
            if (leftBehind) removeQuietly(temp);
            log.info("database backup sent", { admin: admin.username, address, file: name, bytes: sent, complete: sent === size });
          });
          // no Content-Length: Bun frames a stream body as chunked whatever the handler says
          // (oven-sh/bun#10507); a download cut short still shows, its last chunk is missing
          return new Response(body, {
            headers: {
              "Content-Type": "application/vnd.sqlite3",
              "Content-Disposition": `attachment; filename="${name}"`,
              "Cache-Control": "no-store",
              "X-Content-Type-Options": "nosniff",
            },
          });
        },
      },
      audit: { POST: "database.backup" },
      docs: {
        POST: {
          summary: "Download a consistent copy of the database",
          responses: {
            409: { description: "The server keeps its data in PostgreSQL (BACKUP_UNAVAILABLE): use pg_dump" },
            200: {
              description: "The copy, streamed; Content-Disposition names it burrow-<version>-<UTC time>.db",
              raw: { contentType: "application/vnd.sqlite3", schema: { type: "string", contentMediaType: "application/vnd.sqlite3" } },
            },
          },
        },
      },
    },
  ];
}

/** The file's bytes, read as the client takes them; the handle is closed once, however the stream ends. */
function streamFile(file: FileHandle, size: number, aborted: AbortSignal, done: (sent: number) => void): ReadableStream<Uint8Array> {
  let sent = 0;
  let closed = false;
  const finish = () => {
    if (closed) return;
    closed = true;
    aborted.removeEventListener("abort", finish);
    void file.close().catch(() => {});
    done(sent);
  };
  aborted.addEventListener("abort", finish);
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (closed) return controller.close();
      try {
        const buffer = new Uint8Array(Math.min(CHUNK_BYTES, Math.max(size - sent, 1)));
        const { bytesRead } = await file.read(buffer, 0, buffer.byteLength, sent);
        if (bytesRead === 0 || closed) {
          finish();
          return controller.close();
        }
        sent += bytesRead;
        controller.enqueue(buffer.subarray(0, bytesRead));
        if (sent >= size) {
          finish();
          controller.close();
        }
      } catch (err) {
        finish();
        controller.error(err);
      }
    },
    cancel: finish,
  });
}

/** True when the file is gone (or never was). */
function removeQuietly(path: string): boolean {
  try {
    unlinkSync(path);
    return true;
  } catch (err) {
    return (err as { code?: string }).code === "ENOENT";
  }
}
