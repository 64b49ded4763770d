/**
 * A small GeoIP2-City-shaped MaxMind DB for the tests, written by MaxMind's
 * own writer (Debian's libmaxmind-db-writer-perl, MaxMind::DB::Writer::Tree)
 * and read back with MaxMind's C reader's mmdblookup (Debian's mmdb-bin):
 * the real format, from the real tools, with loopback and documentation
 * ranges mapped to places. Both are installed with apt-get where missing,
 * as .ci/run does.
 */
import { existsSync, writeFileSync } from "node:fs";
import { aptInstall } from "./debian-packages.ts";

const MMDBLOOKUP = "/usr/bin/mmdblookup";

/** A GeoIP2 City record as the DB holds it (the parts conn.geo.* read). */
export interface CityRecord {
  country?: { iso_code: string; names: { en: string } };
  city?: { names: { en: string } };
  subdivisions?: { iso_code: string; names: { en: string } }[];
  location?: { latitude: number; longitude: number; accuracy_radius: number };
}

const writerPresent = () => Bun.spawnSync(["perl", "-MMaxMind::DB::Writer::Tree", "-e", "1"], { stdout: "ignore", stderr: "ignore" }).exitCode === 0;

/** MaxMind's writer and mmdblookup, installed first with apt-get where they are missing. */
export function geoipToolsAvailable(): boolean {
  if (existsSync(MMDBLOOKUP) && writerPresent()) return true;
  return aptInstall(["libmaxmind-db-writer-perl", "mmdb-bin"], "the GeoIP tests") && existsSync(MMDBLOOKUP) && writerPresent();
}

/** The writer's script: the networks as JSON on stdin, the DB to the file named. */
const WRITER = String.raw`
use strict; use warnings;
use JSON::PP; use MaxMind::DB::Writer::Tree;
my %types = (
  country => 'map', city => 'map', location => 'map', subdivisions => ['array', 'map'], names => 'map',
  en => 'utf8_string', iso_code => 'utf8_string', latitude => 'double', longitude => 'double', accuracy_radius => 'uint16',
);
my $networks = decode_json(do { local $/; <STDIN> });
my $tree = MaxMind::DB::Writer::Tree->new(
  ip_version => 6, record_size => 28, database_type => 'GeoIP2-City', languages => ['en'],
  description => { en => 'burrow test places' }, map_key_type_callback => sub { $types{ $_[0] } },
  # loopback and documentation ranges are what the tests connect from
  remove_reserved_networks => 0,
);
$tree->insert_network($_, $networks->{$_}) for sort keys %$networks;
open my $fh, '>:raw', $ARGV[0] or die "cannot write $ARGV[0]: $!";
$tree->write_tree($fh);
close $fh or die;
`;

/** Writes a City DB mapping each CIDR to its record at `path`, and checks each with mmdblookup. */
export function writeCityDb(path: string, networks: Record<string, CityRecord>): void {
  if (!geoipToolsAvailable()) throw new Error("MaxMind's DB writer or mmdblookup is missing: install Debian's libmaxmind-db-writer-perl and mmdb-bin (.ci/run installs them)");
  const written = Bun.spawnSync(["perl", "-e", WRITER, path], { stdin: Buffer.from(JSON.stringify(networks)), stdout: "pipe", stderr: "pipe", timeout: 30_000 });
  if (written.exitCode !== 0) throw new Error(`MaxMind::DB::Writer failed: ${written.stderr.toString()}`);
  for (const [cidr, record] of Object.entries(networks)) {
    const ip = cidr.split("/")[0]!;
    const looked = Bun.spawnSync([MMDBLOOKUP, "--file", path, "--ip", ip, "country", "iso_code"], { stdout: "pipe", stderr: "pipe", timeout: 10_000 });
    const said = looked.stdout.toString();
    if (record.country && !said.includes(`"${record.country.iso_code}"`)) throw new Error(`mmdblookup does not read ${ip} back as ${record.country.iso_code}: ${said}${looked.stderr.toString()}`);
  }
}

/** A file that is not a MaxMind DB, for the refusals. */
export function writeNotADb(path: string): void {
  writeFileSync(path, "country,city\nDE,Berlin\n");
}
