/**
 * The private PostgreSQL server tests get from test/harness/postgres.ts:
 * queries round-trip, newDatabase() is a separate empty database, LISTEN /
 * NOTIFY reaches another connection, and stop() leaves no server, port or
 * directory behind. Without Debian's postgresql package these fail, saying
 * so: they are not skipped.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { SQL } from "bun";
import { existsSync, readFileSync } from "node:fs";
import { POSTGRES_MISSING, postgresAvailable, startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { within } from "../harness/wait.ts";

let pg: TestPostgres | undefined;
const clients: SQL[] = [];

/** A client of `url`, closed in afterAll. */
function connect(url: string): SQL {
  const sql = new SQL(url, { max: 2, connectionTimeout: 5 });
  clients.push(sql);
  return sql;
}

function server(): TestPostgres {
  if (!pg) throw new Error(postgresAvailable() ? "the PostgreSQL server did not start (see beforeAll's error)" : POSTGRES_MISSING);
  return pg;
}

beforeAll(async () => {
  if (postgresAvailable()) pg = await startPostgres();
}, 60_000);

afterAll(async () => {
  for (const c of clients) await c.close({ timeout: 0 }).catch(() => {});
  await pg?.stop();
});

describe("test PostgreSQL server", () => {
  test("Debian's postgresql package is installed", () => {
    if (!postgresAvailable()) throw new Error(POSTGRES_MISSING);
  });

  test("a table is created, written and read back", async () => {
    const sql = connect(server().url);
    await sql`CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL)`;
    await sql`INSERT INTO items ${sql([{ name: "alpha" }, { name: "beta" }])}`;
    const rows = await sql`SELECT id, name FROM items ORDER BY id`;
    expect(rows.map((r: { id: number; name: string }) => [r.id, r.name])).toEqual([[1, "alpha"], [2, "beta"]]);
    const [{ db, user }] = await sql`SELECT current_database() AS db, current_user AS user`;
    expect({ db, user }).toEqual({ db: "burrow", user: "burrow" });
  });

  test("it listens on 127.0.0.1 only, and wants the password", async () => {
    const { url, port } = server();
    const sql = connect(url);
    const [{ listen }] = await sql`SELECT current_setting('listen_addresses') AS listen`;
    expect(listen).toBe("127.0.0.1");
    const wrong = new URL(url);
    wrong.password = "not-the-password";
    const intruder = new SQL(wrong.href, { max: 1, connectionTimeout: 5 });
    try {
      await expect(intruder`SELECT 1`).rejects.toThrow(/password authentication failed/);
    } finally {
      await intruder.close({ timeout: 0 }).catch(() => {});
    }
    expect(new URL(url).port).toBe(String(port));
  });

  test("the postmaster is the child the harness started, running as a non-root user", () => {
    const { pid, bin } = server();
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    expect(cmdline[0]).toBe(`${bin}/postgres`);
    const uid = Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]);
    expect(uid).not.toBe(0);
    if (process.getuid?.() !== 0) expect(uid).toBe(process.getuid!());
  });

  test("newDatabase() gives a separate, empty database", async () => {
    const fresh = await server().newDatabase();
    expect(fresh).not.toBe(server().url);
    const sql = connect(fresh);
    const tables = await sql`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`;
    expect(tables.length).toBe(0);
    // a table of the same name as in the first database, with other rows
    await sql`CREATE TABLE items (id int PRIMARY KEY)`;
    await sql`INSERT INTO items VALUES (7)`;
    expect((await sql`SELECT id FROM items`).map((r: { id: number }) => r.id)).toEqual([7]);
    expect((await connect(server().url)`SELECT count(*)::int AS n FROM items`)[0].n).toBe(2);

    const named = await server().newDatabase("named_one");
    expect(new URL(named).pathname).toBe("/named_one");
    expect((await connect(named)`SELECT current_database() AS db`)[0].db).toBe("named_one");
    await expect(server().newDatabase("named_one")).rejects.toThrow(/already exists/);
    await expect(server().newDatabase('x"; DROP DATABASE burrow; --')).rejects.toThrow(/not a database name/);
  });

  test("LISTEN / NOTIFY between two connections", async () => {
    const listener = connect(server().url);
    const notifier = connect(server().url);
    const got: string[] = [];
    let arrived: () => void = () => {};
    const second = new Promise<void>((resolve) => (arrived = resolve));
    const subscription = await listener.listen("burrow_events", (payload) => {
      got.push(payload);
      if (got.length === 2) arrived();
    });
    try {
      await notifier.notify("burrow_events", "hello");
      await notifier`SELECT pg_notify('burrow_events', 'again')`;
      await within(second, 5_000, "two notifications on burrow_events");
      expect(got).toEqual(["hello", "again"]);
    } finally {
      await subscription.unlisten();
    }
  });

  test("stop() ends the server, closes its port and removes its directory", async () => {
    const { port, pid, dir } = server();
    expect(existsSync(dir)).toBe(true);
    for (const c of clients.splice(0)) await c.close({ timeout: 0 }).catch(() => {});
    await server().stop();
    expect(existsSync(`/proc/${pid}`)).toBe(false);
    expect(existsSync(dir)).toBe(false);
    await expect(Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {} } })).rejects.toThrow();
    await server().stop(); // again: nothing to do
  });
});
