/**
 * The server's GeoIP database (--geoip-db): a MaxMind DB file the operator
 * gives (GeoLite2-City, GeoLite2-Country, GeoIP2-City, or any database in
 * that format with GeoIP2's City or Country records), read with `maxmind`,
 * MaxMind's own maintained reader of its format, which keeps the decoded
 * records it last used (an LRU). It answers the policies' conn.geo.*
 * (policy/geo.ts) when a rule reads them.
 *
 * Opened at start (a file that is not one is a usage error); read again
 * when the file changes (the operator replaces it monthly, geoipupdate
 * writes a new one and renames it over): a new file that does not read is
 * logged and the one before kept, so a half-written download takes
 * nothing away. maxmind's own watchForUpdates is not used: it loads a
 * changed file into the reader it has, so a bad one would break it.
 */
import { unwatchFile, watchFile, type Stats } from "node:fs";
import { open, type CityResponse, type Reader } from "maxmind";
import { log } from "../../log.ts";
import { UNKNOWN_PLACE, type GeoFacts, type GeoLookup } from "../../policy/geo.ts";
import { UsageError } from "../../usage-error.ts";

/** How the database is read (--geoip-cache, --geoip-check-interval). */
export interface GeoipReading {
  /** Decoded records kept, the most recently used (maxmind's LRU). */
  cacheRecords: number;
  /** How often the file's modification time is looked at (one stat call). */
  checkIntervalMs: number;
}

export const DEFAULT_GEOIP_READING: Readonly<GeoipReading> = { cacheRecords: 10_000, checkIntervalMs: 5_000 };

const text = (v: unknown): string => (typeof v === "string" ? v : "");
const number = (v: unknown): string => (typeof v === "number" && Number.isFinite(v) ? String(v) : "");

/** A City or Country record as ngrok's conn.geo.* values: English names, numbers as text, "" for what it lacks. */
function placeFrom(r: CityResponse | null): GeoFacts {
  if (!r || typeof r !== "object") return UNKNOWN_PLACE;
  return {
    city: text(r.city?.names?.en),
    country: text(r.country?.names?.en),
    countryCode: text(r.country?.iso_code),
    latitude: number(r.location?.latitude),
    longitude: number(r.location?.longitude),
    radius: number(r.location?.accuracy_radius),
    subdivision: text(r.subdivisions?.[0]?.names?.en),
  };
}

/** When the file was made, for the log line that says which one is read. */
const builtAt = (reader: Reader<CityResponse>): string => {
  const at = reader.metadata.buildEpoch;
  return at instanceof Date && !Number.isNaN(at.getTime()) ? at.toISOString() : "";
};

export class GeoipDatabase implements GeoLookup {
  private constructor(
    private readonly path: string,
    private reader: Reader<CityResponse>,
    private readonly reading: GeoipReading,
  ) {}

  /** The database at `path`, read whole, and followed for changes until close(); not a MaxMind DB: a UsageError naming the flag. */
  static async open(path: string, reading: GeoipReading = DEFAULT_GEOIP_READING): Promise<GeoipDatabase> {
    let reader: Reader<CityResponse>;
    try {
      reader = await open<CityResponse>(path, { cache: { max: reading.cacheRecords } });
    } catch (err) {
      const why = (err as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : `not a MaxMind DB file (${String((err as Error).message ?? err).slice(0, 200)})`;
      throw new UsageError(`--geoip-db: '${path}': ${why}`);
    }
    const db = new GeoipDatabase(path, reader, reading);
    log.info("GeoIP database read", { path, type: reader.metadata.databaseType, built: builtAt(reader) });
    // not persistent: the watch does not keep a stopping server alive
    watchFile(path, { persistent: false, interval: reading.checkIntervalMs }, db.changed);
    return db;
  }

  lookup(ip: string): GeoFacts {
    try {
      return placeFrom(this.reader.get(ip));
    } catch {
      // not an address the reader parses: nowhere known
      return UNKNOWN_PLACE;
    }
  }

  close(): void {
    unwatchFile(this.path, this.changed);
  }

  private readonly changed = (now: Stats, before: Stats): void => {
    // removed (a rename's gap), or not changed: the one read stays
    if (now.mtimeMs === 0 || (now.mtimeMs === before.mtimeMs && now.size === before.size)) return;
    open<CityResponse>(this.path, { cache: { max: this.reading.cacheRecords } }).then(
      (reader) => {
        this.reader = reader;
        log.info("GeoIP database read again", { path: this.path, type: reader.metadata.databaseType, built: builtAt(reader) });
      },
      (err: unknown) => log.warn("GeoIP database changed but does not read: the one before is kept", { path: this.path, err: String(err).slice(0, 200) }),
    );
  };
}
