/**
 * conn.geo.*: where the visitor's address is likely to be, as ngrok names
 * it, from the GeoIP database the operator gives the server (--geoip-db;
 * the edge reads it: edge/traffic-policy/geoip.ts). The engine only asks
 * (PolicyServices.geo), and only when a rule reads one of them: a request
 * whose rules read none costs nothing. The answer is kept with the
 * connection's facts, so the layers and phases of one request (and the
 * requests of one connection from one address) look the address up once.
 */
import type { ConnectionFacts } from "./facts.ts";

/** ngrok's conn.geo.* values: all strings, as ngrok types them ("" where the database has no answer). */
export interface GeoFacts {
  city: string;
  country: string;
  /** ISO 3166-1 alpha-2: "US". */
  countryCode: string;
  latitude: string;
  longitude: string;
  /** The accuracy radius around latitude and longitude, in kilometres. */
  radius: string;
  /** The first-level subdivision's name (a state, a province). */
  subdivision: string;
}

/** What the edge lends a run to answer them: an address, in canonical text, to its facts. */
export interface GeoLookup {
  lookup(ip: string): GeoFacts;
}

/** An address the database does not know (a private or loopback one, or none): every value empty, as ngrok gives them. */
export const UNKNOWN_PLACE: GeoFacts = Object.freeze({ city: "", country: "", countryCode: "", latitude: "", longitude: "", radius: "", subdivision: "" });

/** The variables' prefix: a policy that reads one needs the database (load.ts refuses it on a server without one). */
export const GEO_PREFIX = "conn.geo.";

/** The answer kept per connection's facts, with the address it is for (behind a trusted proxy, each request may name another). */
const answered = new WeakMap<ConnectionFacts, { ip: string; facts: GeoFacts }>();

/** Where the visitor of `conn` is, asked once per facts and address; no lookup service: nowhere known. */
export function placeOf(conn: ConnectionFacts, geo: GeoLookup | undefined): GeoFacts {
  if (!geo) return UNKNOWN_PLACE;
  const kept = answered.get(conn);
  if (kept && kept.ip === conn.clientIp) return kept.facts;
  const facts = geo.lookup(conn.clientIp);
  answered.set(conn, { ip: conn.clientIp, facts });
  return facts;
}
