/** The panel's pure helpers: byte units, UTC dates and quota periods, field errors, public addresses. */
import { describe, expect, test } from "bun:test";
import { periodStart as corePeriodStart } from "../../src/core/periods.ts";
import {
  ago,
  duration,
  formatBytes,
  formatQuota,
  lastDays,
  parseUtc,
  publicAddress,
  periodEnd,
  periodStart,
  splitBytes,
  unitBytes,
  utcDateTime,
} from "../../src/ui/format.ts";

import { check, fieldOfServerError, parseLimit, rules } from "../../src/admin/panel/web/validate.ts";

const KB = 1024;
const MB = KB * 1024;
const GB = MB * 1024;

describe("bytes for people", () => {
  test.each([
    [0, "0 B"],
    [1023, "1023 B"],
    [1024, "1 KB"],
    [1536, "1.5 KB"],
    [10 * MB, "10 MB"],
    [123_456_789, "118 MB"],
    [1023.96 * MB, "1 GB"],
    [10 * GB, "10 GB"],
    [1.25 * 1024 * GB, "1.3 TB"],
  ])("%p bytes read %p", (n, text) => expect(formatBytes(n)).toBe(text));

  test("a limit splits into the largest unit that keeps it exact, for the unit picker", () => {
    expect(splitBytes(10 * GB)).toEqual({ value: 10, unit: "GB" });
    expect(splitBytes(1.5 * GB)).toEqual({ value: 1.5, unit: "GB" });
    expect(splitBytes(512 * MB)).toEqual({ value: 512, unit: "MB" });
    expect(splitBytes(0)).toEqual({ value: 0, unit: "GB" });
    expect(splitBytes(1000)).toEqual({ value: 1000, unit: "B" });
    expect(Math.round(splitBytes(10737418240).value * unitBytes(splitBytes(10737418240).unit))).toBe(10737418240);
  });

  test("quotas read as an amount per period, 0 as no limit", () => {
    expect(formatQuota(0, "monthly")).toBe("No limit");
    expect(formatQuota(5 * GB, "daily")).toBe("5 GB per day");
    expect(formatQuota(50 * GB, "quarterly")).toBe("50 GB per quarter");
  });
});

describe("UTC dates", () => {
  test("an active tunnel's connected_at and an ISO timestamp are both UTC", () => {
    expect(parseUtc("2026-06-03 14:05:09").toISOString()).toBe("2026-06-03T14:05:09.000Z");
    expect(parseUtc("2026-06-03T14:05:09.123Z").toISOString()).toBe("2026-06-03T14:05:09.123Z");
    expect(utcDateTime("2026-06-03 14:05:09")).toBe("2026-06-03 14:05 UTC");
  });

  test("quota periods start where the server's do, and end where the next begins", () => {
    for (const now of ["2026-01-01T00:00:00Z", "2026-02-28T23:59:59Z", "2026-05-17T12:00:00Z", "2026-12-31T23:00:00Z"]) {
      for (const period of ["daily", "monthly", "quarterly"] as const) {
        const d = new Date(now);
        expect(periodStart(period, d).toISOString().slice(0, 10)).toBe(corePeriodStart(period, d));
      }
    }
    expect(periodEnd("daily", new Date("2026-02-28T23:59:59Z")).toISOString()).toBe("2026-03-01T00:00:00.000Z");
    expect(periodEnd("monthly", new Date("2026-12-31T23:00:00Z")).toISOString()).toBe("2027-01-01T00:00:00.000Z");
    expect(periodEnd("quarterly", new Date("2026-05-17T12:00:00Z")).toISOString()).toBe("2026-07-01T00:00:00.000Z");
  });

  test("the analytics window is the last N UTC days, oldest first, ending today", () => {
    expect(lastDays(3, new Date("2026-03-01T00:30:00Z"))).toEqual(["2026-02-27", "2026-02-28", "2026-03-01"]);
  });

  test("how long ago and how long up", () => {
    const now = Date.parse("2026-06-03T14:00:00Z");
    expect(ago("2026-06-03T13:59:40Z", now)).toBe("just now");
    expect(ago("2026-06-03T13:55:00Z", now)).toBe("5 min ago");
    expect(ago("2026-06-01T14:00:00Z", now)).toBe("2 days ago");
    expect(duration("2026-06-03 12:55:00", now)).toBe("1 h 05 min");
    expect(duration("2026-06-03 13:59:30", now)).toBe("30 s");
  });
});

describe("forms", () => {
  test("client checks use the server's own rules and words", () => {
    expect(check(rules.password, "short")).toBe("must be at least 8 characters");
    expect(check(rules.username, "no spaces")).toBe("must be 1-64 characters from letters, digits and _ . - @");
    expect(check(rules.subdomain, "Alice-Demo")).toBeUndefined();
    expect(check(rules.subdomain, "-x")).toStartWith("must be one DNS label");
    expect(check(rules.deviceName, "   ")).toBe("must not be empty");
  });

  test("limits are whole numbers, empty meaning 0 (no limit)", () => {
    expect(parseLimit("")).toBe(0);
    expect(parseLimit(" 12 ")).toBe(12);
    expect(parseLimit("-1")).toBeUndefined();
    expect(parseLimit("1.5")).toBeUndefined();
    expect(parseLimit("99999999999999999999")).toBeUndefined();
  });

  test("a server error lands on the field it names first", () => {
    const fields = ["username", "max_tunnels", "traffic_limit"];
    expect(fieldOfServerError("username 'bob' is already taken", fields)).toBe("username");
    expect(fieldOfServerError("max_tunnels must not be negative (0 means unlimited)", fields)).toBe("max_tunnels");
    expect(fieldOfServerError("cannot demote the last enabled admin", fields)).toBeUndefined();
  });
});

describe("public addresses", () => {
  const server = { domain: "tunnels.example.com", edge_url: "https://tunnels.example.com", tcp_host: "tunnels.example.com" };

  test("a tls tunnel is its name under tls://, no link (the port it is reached on is the server's to say)", () => {
    expect(publicAddress(server, { protocol: "tls", subdomain: "vault" })).toEqual({ text: "tls://vault.tunnels.example.com" });
  });

  test("a udp tunnel is its port under udp://, apart from a tcp tunnel on the same number", () => {
    expect(publicAddress(server, { protocol: "udp", port: 20053 })).toEqual({ text: "udp://tunnels.example.com:20053" });
    expect(publicAddress(server, { protocol: "tcp", port: 20053 })).toEqual({ text: "tunnels.example.com:20053" });
    // a private tunnel has no public address: its name, with no link
    expect(publicAddress(server, { protocol: "tcp", private: { target: "alice/db" } })).toEqual({ text: "private: alice/db" });
    expect(publicAddress({ ...server, tcp_host: "" }, { protocol: "udp", port: 20053 })).toEqual({ text: "udp port 20053" });
    expect(publicAddress({ ...server, tcp_host: "" }, { protocol: "tcp", port: 20053 })).toEqual({ text: "tcp port 20053" });
  });

  test("an http tunnel is a link on the edge's scheme and port", () => {
    expect(publicAddress(server, { protocol: "http", subdomain: "demo" })).toEqual({
      text: "demo.tunnels.example.com",
      href: "https://demo.tunnels.example.com",
    });
    expect(publicAddress({ ...server, domain: "localhost", edge_url: "http://localhost:8080" }, { protocol: "http", subdomain: "a" })).toEqual({
      text: "a.localhost:8080",
      href: "http://a.localhost:8080",
    });
  });

  test("a tcp tunnel is host:port, not a link", () => {
    expect(publicAddress(server, { protocol: "tcp", port: 20417 })).toEqual({ text: "tunnels.example.com:20417" });
  });
});
