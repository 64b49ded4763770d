/**
 * Reading an image's OCI archive (build/oci-archive.ts) as a registry or
 * an engine would: a file of the outer tar, the index's manifest, its
 * config, and the entries of its one gzip layer.
 */
import { readFileSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import { extract } from "tar-stream";

export interface LayerEntry {
  name: string;
  type: string;
  mode: number;
  uid: number;
  gid: number;
  linkname?: string;
}

/** index.json's one manifest, and the config it names. */
export async function manifestAndConfig(archive: string): Promise<{ index: any; manifest: any; config: any }> {
  const index = JSON.parse((await readEntry(archive, "index.json")).toString());
  const manifest = JSON.parse((await readEntry(archive, `blobs/sha256/${index.manifests[0].digest.slice(7)}`)).toString());
  const config = JSON.parse((await readEntry(archive, `blobs/sha256/${manifest.config.digest.slice(7)}`)).toString());
  return { index, manifest, config };
}

/** The names, types, modes, owners and link targets in the archive's layer. */
export async function layerFiles(archive: string): Promise<LayerEntry[]> {
  const { manifest } = await manifestAndConfig(archive);
  const layer = gunzipSync(await readEntry(archive, `blobs/sha256/${manifest.layers[0].digest.slice(7)}`));
  const out: LayerEntry[] = [];
  const reader = extract();
  const done = (async () => {
    for await (const entry of reader) {
      const h = entry.header;
      out.push({ name: h.name, type: h.type ?? "file", mode: h.mode ?? 0, uid: h.uid ?? 0, gid: h.gid ?? 0, ...(h.linkname ? { linkname: h.linkname } : {}) });
      entry.resume();
    }
  })();
  reader.end(layer);
  await done;
  return out;
}

/** One file of an (uncompressed) tar. */
export async function readEntry(archive: string, name: string): Promise<Buffer> {
  const reader = extract();
  let found: Buffer | undefined;
  const done = (async () => {
    for await (const entry of reader) {
      if (entry.header.name !== name) {
        entry.resume();
        continue;
      }
      const chunks: Buffer[] = [];
      for await (const chunk of entry) chunks.push(chunk as Buffer);
      found = Buffer.concat(chunks);
    }
  })();
  reader.end(readFileSync(archive));
  await done;
  if (!found) throw new Error(`${name} is not in ${archive}`);
  return found;
}
