/**
 * ngrok's conn.geo.* in the engine: their values from the services' GeoIP
 * lookup, in conditions (the compiled fast path and CEL alike) and in
 * interpolation, in every phase; looked up only when a rule reads one, and
 * once per connection's facts and address however many rules, phases and
 * layers read them; empty where the lookup knows nothing. A policy that
 * reads them where there is no database (a server without --geoip-db) is
 * refused at load, with the error of a variable the policy cannot have.
 * (The lookup here is a table: the real database's reading is tested with
 * a real MaxMind DB in test/traffic-policy/geoip.test.ts.)
 */
import { describe, expect, test } from "bun:test";
import { defaultServices, UNKNOWN_PLACE, type GeoFacts, type GeoLookup, type PolicyServices } from "../../src/policy/index.ts";
import { answered, errorsOf, policyOf, requestInput } from "./policy-harness.ts";

const BERLIN: GeoFacts = { city: "Berlin", country: "Germany", countryCode: "DE", latitude: "52.52", longitude: "13.405", radius: "20", subdivision: "Land Berlin" };
const PARIS: GeoFacts = { ...UNKNOWN_PLACE, city: "Paris", country: "France", countryCode: "FR" };

/** A lookup over a table, counting what it was asked. */
function table(places: Record<string, GeoFacts>): GeoLookup & { asked: string[] } {
  const asked: string[] = [];
  return { asked, lookup: (ip) => (asked.push(ip), places[ip] ?? UNKNOWN_PLACE) };
}

const withGeo = (geo: GeoLookup): { services: PolicyServices } => ({ services: defaultServices({ geo }) });

const ECHO_ALL = `
on_http_request:
  - actions:
      - type: custom-response
        config:
          status_code: 200
          body: "\${conn.geo.country_code}|\${conn.geo.country}|\${conn.geo.city}|\${conn.geo.subdivision}|\${conn.geo.latitude}|\${conn.geo.longitude}|\${conn.geo.radius}"
`;

describe("the values", () => {
  test("interpolated from the lookup of the visitor's address, every one of ngrok's names", async () => {
    const geo = table({ "192.0.2.1": BERLIN });
    const out = await policyOf(ECHO_ALL, withGeo(geo)).run("on_http_request", requestInput({ clientIp: "192.0.2.1" }));
    expect(answered(out)?.body).toBe("DE|Germany|Berlin|Land Berlin|52.52|13.405|20");
  });

  test("an address the database does not know: empty strings, as ngrok's unknown", async () => {
    const out = await policyOf(ECHO_ALL, withGeo(table({}))).run("on_http_request", requestInput({ clientIp: "10.0.0.1" }));
    expect(answered(out)?.body).toBe("||||||");
  });

  test("in conditions, the compiled comparisons and CEL's functions alike; ngrok's double(conn.geo.latitude) reads the text", async () => {
    const geo = table({ "192.0.2.1": BERLIN, "192.0.2.2": PARIS });
    const p = policyOf(
      `
on_http_request:
  - expressions:
      - "conn.geo.country_code in ['DE', 'AT']"
      - "conn.geo.city.startsWith('Ber')"
      - "double(conn.geo.latitude) >= 45.0"
      - "int(conn.geo.radius) <= 50"
    actions: [{ type: custom-response, config: { status_code: 200, body: near } }]
  - expressions: ["conn.geo.country_code == 'FR'"]
    actions: [{ type: deny, config: { status_code: 451 } }]
`,
      withGeo(geo),
    );
    expect(answered(await p.run("on_http_request", requestInput({ clientIp: "192.0.2.1" })))?.body).toBe("near");
    expect(answered(await p.run("on_http_request", requestInput({ clientIp: "192.0.2.2" })))?.status).toBe(451);
    expect(answered(await p.run("on_http_request", requestInput({ clientIp: "192.0.2.3" })))).toBeUndefined();
  });

  test("on_tcp_connect and on_http_response have them too", async () => {
    const geo = table({ "192.0.2.2": PARIS });
    const connect = policyOf("on_tcp_connect:\n  - expressions: [\"conn.geo.country_code == 'FR'\"]\n    actions: [{ type: deny }]\n", withGeo(geo));
    expect((await connect.run("on_tcp_connect", requestInput({ clientIp: "192.0.2.2" }))).verdict.kind).not.toBe("continue");
    expect((await connect.run("on_tcp_connect", requestInput({ clientIp: "192.0.2.9" }))).verdict.kind).toBe("continue");
    const response = policyOf("on_http_response:\n  - actions: [{ type: add-headers, config: { headers: { x-city: '${conn.geo.city}' } } }]\n", withGeo(geo));
    const out = await response.run("on_http_response", requestInput({ clientIp: "192.0.2.2", response: { status: 200 } }));
    expect(out.verdict.kind).toBe("continue");
    expect(JSON.stringify(out)).toContain("Paris");
  });
});

describe("looked up lazily, once", () => {
  test("a policy whose rules read no conn.geo.* never asks", async () => {
    const geo = table({ "192.0.2.1": BERLIN });
    const p = policyOf("on_http_request:\n  - expressions: [\"conn.client_ip == '192.0.2.1'\"]\n    actions: [{ type: deny }]\n", withGeo(geo));
    await p.run("on_http_request", requestInput({ clientIp: "192.0.2.1" }));
    expect(geo.asked).toEqual([]);
  });

  test("one lookup for the whole request: every rule, both phases and two layers reading several of them", async () => {
    const geo = table({ "192.0.2.1": BERLIN });
    const reads = "on_http_request:\n  - expressions: [\"conn.geo.country_code == 'DE'\", \"conn.geo.city != ''\"]\n    actions: [{ type: add-headers, config: { headers: { x-c: '${conn.geo.country}' } } }]\n  - expressions: [\"conn.geo.subdivision != 'x'\"]\n    actions: []\non_http_response:\n  - expressions: [\"conn.geo.radius == '20'\"]\n    actions: []\n";
    const outer = policyOf(reads, withGeo(geo));
    const inner = policyOf(reads, withGeo(geo));
    const input = requestInput({ clientIp: "192.0.2.1", response: { status: 200 } });
    for (const p of [outer, inner]) {
      await p.run("on_http_request", input);
      await p.run("on_http_response", input);
    }
    expect(geo.asked).toEqual(["192.0.2.1"]);
  });

  test("the same connection's facts naming another address (a trusted proxy's next client) is looked up again", async () => {
    const geo = table({ "192.0.2.1": BERLIN, "192.0.2.2": PARIS });
    const p = policyOf(ECHO_ALL, withGeo(geo));
    const input = requestInput({ clientIp: "192.0.2.1" });
    expect(answered(await p.run("on_http_request", input))?.body).toStartWith("DE|");
    input.conn.clientIp = "192.0.2.2";
    expect(answered(await p.run("on_http_request", input))?.body).toStartWith("FR|");
    expect(geo.asked).toEqual(["192.0.2.1", "192.0.2.2"]);
  });

  test("the offline commands (no services given) load them and answer them empty", async () => {
    const out = await policyOf(ECHO_ALL).run("on_http_request", requestInput({ clientIp: "192.0.2.1" }));
    expect(answered(out)?.body).toBe("||||||");
  });
});

describe("refused where there is no database", () => {
  const noGeo = { services: defaultServices() };

  test("a condition that reads one: CEL_TYPE, naming the variable and the flag, at its place", () => {
    const errors = errorsOf("on_http_request:\n  - expressions: [\"req.method == 'GET' && conn.geo.country_code == 'FR'\"]\n    actions: [{ type: deny }]\n", noGeo);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ code: "CEL_TYPE", path: "on_http_request[0].expressions[0]", line: 2, expressionColumn: 24 });
    expect(errors[0]!.message).toContain("conn.geo.country_code");
    expect(errors[0]!.message).toContain("--geoip-db");
  });

  test("an interpolation in an action's config, and an action's expression, in every phase", () => {
    const docs = [
      "on_http_request:\n  - actions: [{ type: add-headers, config: { headers: { x-city: 'in ${conn.geo.city}' } } }]\n",
      "on_http_response:\n  - actions: [{ type: add-headers, config: { headers: { x-city: '${conn.geo.city}' } } }]\n",
      "on_tcp_connect:\n  - expressions: [\"conn.geo.country != ''\"]\n    actions: [{ type: deny }]\n",
      "on_http_request:\n  - actions: [{ type: rate-limit, config: { name: r, algorithm: sliding_window, capacity: 5, rate: 60s, bucket_key: [conn.geo.country_code] } }]\n",
    ];
    for (const doc of docs) {
      const errors = errorsOf(doc, noGeo);
      expect(errors.map((e) => e.code)).toEqual(["CEL_TYPE"]);
      expect(errors[0]!.message).toContain("conn.geo.");
    }
  });

  test("geoip: false refuses them whatever the services; other variables load as before", () => {
    expect(errorsOf(ECHO_ALL, { geoip: false }).map((e) => e.code)).toEqual(["CEL_TYPE"]);
    policyOf("on_http_request:\n  - expressions: [\"conn.client_ip == '192.0.2.1'\"]\n    actions: [{ type: deny }]\n", noGeo);
  });
});
