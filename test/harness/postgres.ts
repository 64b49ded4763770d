/**
 * A private, real PostgreSQL server for tests, from Debian's `postgresql`
 * package (.ci/run installs it): the highest version's programs under
 * /usr/lib/postgresql/<version>/bin.
 *
 * Each start makes a new cluster in a fresh temporary directory (a copy of
 * one made with initdb once per test process), with a superuser `burrow`
 * whose password is random and required (SCRAM) over TCP, and runs
 * `postgres` itself as a child of the test process, listening on 127.0.0.1
 * only, on a free port, with its Unix socket inside the temporary
 * directory: it shares nothing with a system cluster the package may have
 * started. Durability is off (fsync, synchronous_commit,
 * full_page_writes) because the data is thrown away.
 *
 * initdb and postgres refuse to run as root. As root (CI), both run as
 * Debian's `postgres` system user, through setpriv, which execs the program
 * under that user: the child's PID is the postmaster's own, so stop() signals
 * exactly the server. setpriv also sets a parent-death signal (SIGQUIT:
 * immediate shutdown), so a test process that dies without stop() does not
 * leave a server running, and a reaper process removes the directories of a
 * test process once it is gone. Not as root, both run as the current user.
 *
 * Ready when a connection with Bun.SQL answers `SELECT 1` (20 s at most;
 * the error carries the end of postgres's log). stop() asks for a fast
 * shutdown (SIGINT), waits for the postmaster to exit, then removes the
 * directory. The password appears in the URLs only, never in a message.
 */
import { aptInstall } from "./debian-packages.ts";
import { accessSync, chmodSync, chownSync, constants, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SQL, type Subprocess } from "bun";
import { LineReader } from "./lines.ts";
import { freeRange } from "./ports.ts";

const HOST = "127.0.0.1";
const USER = "burrow";
const DATABASE = "burrow";
const PG_ROOT = "/usr/lib/postgresql";
const READY_TIMEOUT_MS = 20_000;
const STOP_TIMEOUT_MS = 10_000;
/** The port is picked free, then bound by postgres: another process can take it in between, so a start is tried this often. */
const START_TRIES = 3;
const LOG_TAIL_LINES = 30;
/** The harness's directories, in the system's temporary directory. */
const DIR_PREFIX = "burrow-pg-";
/** In each directory: the PID of the test process that made it. */
const OWNER_FILE = "harness.pid";

export interface TestPostgres extends AsyncDisposable {
  /** `postgres://burrow:<password>@127.0.0.1:<port>/burrow`: a database made for the test, empty. */
  url: string;
  port: number;
  /** The postmaster's PID (the child this process started: as root, setpriv has exec'd postgres in its place). */
  pid: number;
  /** The programs' directory, e.g. /usr/lib/postgresql/15/bin. */
  bin: string;
  /** Creates a new empty database (`name`, or a unique one) and returns its URL. */
  newDatabase(name?: string): Promise<string>;
  /** postgres's log so far (its stderr and stdout). */
  logs(): string;
  /**
   * Fast shutdown, then the same data on the same port again; with
   * `standby`, as a hot standby (standby.signal, no primary to follow): it
   * answers reads, refuses writes, and pg_is_in_recovery() is true, as a
   * primary that came back as a replica after a failover.
   */
  restart(opts?: { standby?: boolean }): Promise<void>;
  /** Fast shutdown, waits for the server to exit, removes its directory. Idempotent. */
  stop(): Promise<void>;
  /** The temporary directory (data directory and socket): gone after stop(). */
  dir: string;
}

/**
 * The directory of Debian's PostgreSQL programs (highest version installed);
 * where there is none, Debian's postgresql is installed first as .ci/run
 * does (root or password-less sudo), else undefined.
 */
export function postgresAvailable(): string | undefined {
  const found = installedPostgres();
  if (found || triedInstall) return found;
  triedInstall = true;
  return aptInstall(["postgresql"], "the PostgreSQL tests") ? installedPostgres() : undefined;
}
let triedInstall = false;

function installedPostgres(): string | undefined {
  let versions: string[];
  try {
    versions = readdirSync(PG_ROOT).filter((v) => /^\d+(\.\d+)?$/.test(v));
  } catch {
    return undefined;
  }
  versions.sort((a, b) => Number(b) - Number(a));
  for (const v of versions) {
    const bin = join(PG_ROOT, v, "bin");
    if (["initdb", "postgres"].every((p) => executable(join(bin, p)))) return bin;
  }
  return undefined;
}

/** What to tell someone where postgresAvailable() finds nothing. */
export const POSTGRES_MISSING =
  `PostgreSQL is not installed: no ${PG_ROOT}/<version>/bin/initdb and postgres. ` +
  "Install Debian's postgresql package (apt-get install postgresql; .ci/run installs it in CI).";

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

interface RunAs {
  /** Prefix of every command: setpriv to drop root and set the parent-death signal, or nothing. */
  prefix: string[];
  /** Owner to give the temporary directory, when running as another user. */
  owner?: { uid: number; gid: number };
}

function runAs(): RunAs {
  const setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].find(executable);
  const deathSignal = setpriv ? [setpriv, "--pdeathsig", "SIGQUIT"] : [];
  if (process.getuid?.() !== 0) return { prefix: deathSignal.length ? [...deathSignal, "--"] : [] };
  if (!setpriv) throw new Error("running as root, and setpriv (util-linux) is missing: it is needed to run initdb and postgres as the postgres user");
  const entry = readFileSync("/etc/passwd", "utf8")
    .split("\n")
    .map((l) => l.split(":"))
    .find((f) => f[0] === "postgres");
  if (!entry) throw new Error("running as root, and there is no postgres user to run initdb and postgres as (Debian's postgresql package creates it)");
  const uid = Number(entry[2]);
  const gid = Number(entry[3]);
  return { prefix: [...deathSignal, `--reuid=${uid}`, `--regid=${gid}`, "--init-groups", "--"], owner: { uid, gid } };
}

function tail(text: string): string {
  const lines = text.trimEnd().split("\n");
  return lines.slice(-LOG_TAIL_LINES).join("\n");
}

/** Whether a process is gone (or only a zombie waiting to be reaped). */
function gone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return true;
  }
}

async function run(name: string, cmd: string[], cwd: string, input?: string): Promise<void> {
  const proc = Bun.spawn(cmd, { cwd, stdin: input === undefined ? "ignore" : new TextEncoder().encode(input), stdout: "pipe", stderr: "pipe", env: { ...process.env, LC_ALL: "C" } });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`${name} failed (exit ${code}):\n${tail(`${out}\n${err}`)}`);
}

/** A new directory for the harness, owned by the user the server runs as. */
function harnessDir(as: RunAs): string {
  const dir = mkdtempSync(join(tmpdir(), DIR_PREFIX));
  writeFileSync(join(dir, OWNER_FILE), String(process.pid));
  if (as.owner) {
    chownSync(dir, as.owner.uid, as.owner.gid);
    chmodSync(dir, 0o700);
  }
  return dir;
}

interface Template {
  /** Holds `data`: a cluster with the database `burrow`, never started as a server. */
  dir: string;
  password: string;
}

const templates = new Map<string, Promise<Template>>();

/**
 * initdb once per test process (it takes seconds; copying its result takes
 * a fraction of one): each server starts from a copy of this cluster, so all
 * the servers of one test process share its random password. Removed by the
 * reaper when the process is gone.
 */
function clusterTemplate(bin: string, as: RunAs): Promise<Template> {
  let template = templates.get(bin);
  if (!template) {
    template = (async () => {
      const dir = harnessDir(as);
      const password = Buffer.from(crypto.getRandomValues(new Uint8Array(24))).toString("hex");
      const pwfile = join(dir, "pwfile");
      try {
        writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
        if (as.owner) chownSync(pwfile, as.owner.uid, as.owner.gid);
        const initdb = [join(bin, "initdb"), "-D", join(dir, "data"), "-U", USER, `--pwfile=${pwfile}`, "--auth=scram-sha-256", "-E", "UTF8", "--no-locale", "--no-sync"];
        await run("initdb", [...as.prefix, ...initdb], dir);
        // the test's database, made once here in single-user mode rather than at every start
        await run("postgres --single", [...as.prefix, join(bin, "postgres"), "--single", "-D", join(dir, "data"), "-c", "fsync=off", "postgres"], dir, `CREATE DATABASE ${DATABASE};\n`);
      } catch (err) {
        rmSync(dir, { recursive: true, force: true });
        throw err;
      } finally {
        rmSync(pwfile, { force: true });
      }
      return { dir, password };
    })();
    templates.set(bin, template);
    template.catch(() => templates.delete(bin)); // the next start tries again
  }
  return template;
}

interface Running {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  lines: LineReader;
  port: number;
}

function serverArgs(dir: string, port: number): string[] {
  const settings: Record<string, string | number> = {
    listen_addresses: HOST,
    port,
    unix_socket_directories: dir,
    max_connections: 200,
    shared_buffers: "32MB",
    fsync: "off",
    synchronous_commit: "off",
    full_page_writes: "off",
    logging_collector: "off",
  };
  return Object.entries(settings).flatMap(([k, v]) => ["-c", `${k}=${v}`]);
}

async function ping(url: string): Promise<boolean> {
  const sql = new SQL(url, { max: 1, connectionTimeout: 2, idleTimeout: 1 });
  try {
    await sql`SELECT 1`;
    return true;
  } catch {
    return false;
  } finally {
    await sql.close({ timeout: 0 }).catch(() => {});
  }
}

async function stopProcess(proc: Subprocess): Promise<void> {
  const exited = () => proc.exitCode !== null || proc.signalCode !== null;
  const waitExit = (ms: number) => Promise.race([proc.exited.then(() => true), Bun.sleep(ms).then(() => false)]);
  // SIGINT: fast shutdown (SIGTERM waits for every client to leave); SIGQUIT: immediate; SIGKILL: last resort
  for (const [signal, ms] of [["SIGINT", STOP_TIMEOUT_MS], ["SIGQUIT", 5_000], ["SIGKILL", 5_000]] as const) {
    if (exited()) return;
    proc.kill(signal);
    if (await waitExit(ms)) return;
  }
}

async function startOnce(bin: string, as: RunAs, dir: string, password: string, port = freeRange(1).first): Promise<Running> {
  const proc = Bun.spawn([...as.prefix, join(bin, "postgres"), "-D", join(dir, "data"), ...serverArgs(dir, port)], {
    cwd: dir,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, LC_ALL: "C" },
  });
  const lines = new LineReader(proc);
  const url = `postgres://${USER}:${password}@${HOST}:${port}/postgres`;
  const deadline = performance.now() + READY_TIMEOUT_MS;
  let why = `not ready after ${READY_TIMEOUT_MS / 1000} s`;
  while (performance.now() < deadline) {
    if (proc.exitCode !== null || proc.signalCode !== null) {
      why = `postgres exited (${proc.exitCode ?? proc.signalCode})`;
      break;
    }
    if (await ping(url)) return { proc, lines, port };
    await Bun.sleep(50);
  }
  await stopProcess(proc);
  await Promise.race([lines.closed(), Bun.sleep(1_000)]);
  throw new Error(`PostgreSQL (${bin}) did not start on ${HOST}:${port}: ${why}. Its log ends:\n${tail(lines.text())}`);
}

let started = 0;
let reaper = false;

/**
 * A small shell process that outlives this one: when the test process is
 * gone (bun test runs no exit handlers, and a killed process runs nothing),
 * it removes every directory this process made that is still there (the
 * cluster template always; a server's, where stop() was not called, after
 * the parent-death signal has ended the server). It ignores the signals a
 * terminal's Ctrl-C or a closing session sends the whole process group.
 */
function startReaper(): void {
  if (reaper) return;
  reaper = true;
  const script = [
    `trap '' INT TERM HUP`,
    `while kill -0 "$1" 2>/dev/null; do sleep 1; done`,
    `for try in 1 2 3 4 5; do`,
    `  left=0`,
    `  for d in "$2"/${DIR_PREFIX}*; do`,
    `    [ "$(cat "$d/${OWNER_FILE}" 2>/dev/null)" = "$1" ] || continue`,
    `    rm -rf "$d" 2>/dev/null || left=1`,
    `  done`,
    `  [ "$left" = 0 ] && exit 0`,
    `  sleep 1`,
    `done`,
  ].join("\n");
  const proc = Bun.spawn(["sh", "-c", script, "burrow-pg-reaper", String(process.pid), tmpdir()], { stdin: "ignore", stdout: "ignore", stderr: "ignore" });
  proc.unref();
}

/**
 * Removes the directories (some 40 MB each) of servers whose test process
 * died without stop() (killed, say: the parent-death signal has ended the
 * server itself). One without an owner file is left alone for an hour: it
 * may be another process's, just made.
 */
function sweepAbandoned(): void {
  let names: string[];
  try {
    names = readdirSync(tmpdir()).filter((n) => n.startsWith(DIR_PREFIX));
  } catch {
    return;
  }
  for (const name of names) {
    const dir = join(tmpdir(), name);
    try {
      const owner = Number(readFileSync(join(dir, OWNER_FILE), "utf8"));
      if (!Number.isInteger(owner) || owner <= 0 || !gone(owner)) continue;
    } catch {
      try {
        if (Date.now() - statSync(dir).mtimeMs < 3_600_000) continue;
      } catch {
        continue;
      }
    }
    const postmaster = join(dir, "data", "postmaster.pid");
    try {
      if (!gone(Number(readFileSync(postmaster, "utf8").split("\n")[0]))) continue; // still running: not ours to remove
    } catch {}
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Starts a private PostgreSQL server. Throws with POSTGRES_MISSING's advice when it is not installed. */
export async function startPostgres(): Promise<TestPostgres> {
  const bin = postgresAvailable();
  if (!bin) throw new Error(POSTGRES_MISSING);
  const as = runAs();
  sweepAbandoned();
  startReaper();
  const template = await clusterTemplate(bin, as);
  const password = template.password;
  const dir = harnessDir(as);
  let running: Running | undefined;
  let admin: SQL | undefined;

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      await admin?.close({ timeout: 0 }).catch(() => {});
      if (running) {
        await stopProcess(running.proc);
        await Promise.race([running.lines.closed(), Bun.sleep(1_000)]);
      }
      rmSync(dir, { recursive: true, force: true });
    })());

  try {
    // cp -a keeps the files' owner (the postgres user, as root) and the data directory's mode (0700)
    await run("copying the cluster", ["cp", "-a", "--", join(template.dir, "data"), join(dir, "data")], dir);

    let lastError: unknown;
    for (let attempt = 0; attempt < START_TRIES && !running; attempt++) {
      try {
        running = await startOnce(bin, as, dir, password);
      } catch (err) {
        lastError = err;
        // only a port taken in between is worth another try
        if (!/could not bind|address already in use|could not create any TCP\/IP sockets/i.test((err as Error).message)) break;
      }
    }
    if (!running) throw lastError;

    const base = `postgres://${USER}:${password}@${HOST}:${running.port}`;
    admin = new SQL(`${base}/postgres`, { max: 1, connectionTimeout: 5 });
    const create = async (name: string) => {
      if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`not a database name this harness makes: '${name}' (lower case letters, digits and _, at most 63)`);
      await admin!.unsafe(`CREATE DATABASE "${name}" TEMPLATE template0`);
      return `${base}/${name}`;
    };
    const url = `${base}/${DATABASE}`;
    const port = running.port;
    const restart = async (opts: { standby?: boolean } = {}) => {
      if (stopping) throw new Error("restart() after stop()");
      await admin?.close({ timeout: 0 }).catch(() => {});
      await stopProcess(running!.proc);
      await Promise.race([running!.lines.closed(), Bun.sleep(1_000)]);
      const signal = join(dir, "data", "standby.signal");
      if (opts.standby) {
        writeFileSync(signal, "");
        if (as.owner) chownSync(signal, as.owner.uid, as.owner.gid);
      } else {
        rmSync(signal, { force: true }); // a primary again
      }
      running = await startOnce(bin, as, dir, password, port);
      admin = new SQL(`${base}/postgres`, { max: 1, connectionTimeout: 5 });
    };
    return {
      url,
      port,
      get pid() {
        return running!.proc.pid;
      },
      bin,
      dir,
      newDatabase: (name) => create(name ?? `test_${process.pid}_${++started}_${Math.random().toString(36).slice(2, 8)}`),
      logs: () => running!.lines.text(),
      restart,
      stop,
      [Symbol.asyncDispose]: stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
