/**
 * `burrow start` follows its burrow.yml: on SIGHUP, and when the file
 * changes (edits come in bursts: read once they settle, RELOAD_SETTLE_MS),
 * the file is read again and the agent runs its new tunnels on the live
 * connection (agent/tunnel-set.ts): a tunnel that is new is added, one that
 * is gone is removed, one whose settings changed is replaced (taken in
 * place when only its local service changed), and the others are not
 * touched, nor their requests in flight. A file that no longer reads (a
 * mistake, a tunnel named on the command line gone) is refused with its
 * error, and the tunnels running stay as they are.
 */
import { watch, type FSWatcher } from "node:fs";
import { basename, dirname } from "node:path";
import type { AgentOutput, AgentTunnel } from "../agent/client.ts";
import { describeChange } from "../agent/client-changes.ts";
import type { TunnelsFile } from "../agent/settings/tunnels-file.ts";
import type { TunnelSet } from "../agent/tunnel-set.ts";
import { log } from "../log.ts";
import { UsageError } from "../usage-error.ts";

/** A change of the file is read once no other came for this long: an editor's save is several writes, a rename among them. */
export const RELOAD_SETTLE_MS = 300;

export interface FollowedFile {
  path: string;
  /** The file read and checked, and the tunnels it runs (burrow start's names or --all); throws a UsageError. */
  read(): { file: TunnelsFile; tunnels: AgentTunnel[] };
  /** What was read at start: server, token, proxy and insecure are not changed by a reload. */
  first: TunnelsFile;
  /** The tunnels run from it at start. */
  running: AgentTunnel[];
}

/** What the agent runs of a file's tunnels, to tell a change that matters from one that does not (a comment). */
const fingerprint = (tunnels: AgentTunnel[]) =>
  JSON.stringify(tunnels.map((t) => [t.name, t.request, { ...t.target, allowUpgrade: t.target.allowUpgrade && [...t.target.allowUpgrade] }, t.inspect, t.health]));

/** Follows the file until the returned function is called. */
export function followTunnelsFile(followed: FollowedFile, set: TunnelSet, out: AgentOutput): () => void {
  let lastText = fingerprint(followed.running);
  let running = false;
  let again = false;
  let timer: ReturnType<typeof setTimeout> | undefined;

  const reload = async (why: "SIGHUP" | "changed") => {
    if (running) return void (again = true);
    running = true;
    try {
      let read: ReturnType<FollowedFile["read"]>;
      try {
        read = followed.read();
      } catch (err) {
        if (!(err instanceof UsageError)) throw err;
        out.notice?.(`${followed.path} not reloaded, the tunnels running stay: ${err.message}`);
        return;
      }
      const text = fingerprint(read.tunnels);
      // a save that changed nothing the agent runs (a comment) changes nothing; SIGHUP asks anyway
      if (why === "changed" && text === lastText) return;
      lastText = text;
      const { first, file } = { first: followed.first, file: read.file };
      if (first.server !== file.server || first.token !== file.token || first.proxy !== file.proxy || Boolean(first.insecure) !== Boolean(file.insecure)) {
        out.notice?.("server, token, proxy and insecure are read when burrow starts: restart it to use the new ones");
      }
      const change = await set.set("local", read.tunnels);
      out.notice?.(`${followed.path} reloaded: ${describeChange(change)}`);
    } catch (err) {
      log.error("reload failed", { err: String(err) });
    } finally {
      running = false;
      if (again) {
        again = false;
        void reload("SIGHUP");
      }
    }
  };

  const onHangup = () => void reload("SIGHUP");
  process.on("SIGHUP", onHangup);
  let watcher: FSWatcher | undefined;
  try {
    // the directory, not the file: an editor that saves by renaming replaces the file a watch would hold
    watcher = watch(dirname(followed.path), (_event, name) => {
      if (name !== null && name !== basename(followed.path)) return;
      clearTimeout(timer);
      timer = setTimeout(() => void reload("changed"), RELOAD_SETTLE_MS);
    });
    watcher.on("error", () => watcher?.close());
  } catch (err) {
    out.notice?.(`${followed.path} is not watched for changes (${(err as Error).message}): send SIGHUP to reload it`);
  }
  return () => {
    process.off("SIGHUP", onHangup);
    clearTimeout(timer);
    watcher?.close();
  };
}
