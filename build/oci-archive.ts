/**
 * An image as an OCI image layout in one tar (what `podman save --format
 * oci-archive` and `docker save` write), made here byte for byte, with no
 * container engine and no registry: one gzip layer, its config and manifest,
 * `index.json` and `oci-layout`, and beside them the `manifest.json` of
 * `docker save`'s older format, as Docker 25 writes it, so that an older
 * `docker load` reads the same file. Owners, modes and times are fixed (the
 * commit's date): the same files always give the same archive.
 */
import { promisify } from "node:util";
import { gzip } from "node:zlib";
import { pack } from "tar-stream";
import type { ImageArch, RootfsEntry } from "./image-rootfs.ts";

/** The runtime settings of the image's config (the OCI config's `config`, with Docker's Healthcheck beside them). */
export interface ImageRunConfig {
  User: string;
  ExposedPorts: Record<string, Record<string, never>>;
  Env: string[];
  Entrypoint: string[];
  Cmd: string[];
  Volumes: Record<string, Record<string, never>>;
  WorkingDir: string;
  Labels: Record<string, string>;
  StopSignal: string;
  /** Docker's field (durations in nanoseconds); the OCI spec has none, and podman reads it only from Docker-format images. */
  Healthcheck: { Test: string[]; Interval: number; Timeout: number; StartPeriod: number; Retries: number };
}

export interface OciImage {
  arch: ImageArch;
  entries: RootfsEntry[];
  /** The full set for burrow; a test's stand-in base image sets fewer. */
  config: Partial<ImageRunConfig>;
  /** The image's date: the commit's, as everything in the release. */
  created: Date;
  /** What made the layer, for the config's history. */
  createdBy: string;
  /** The names it is loaded as: `burrow:0.1.0`. */
  repoTag: string;
  annotations: Record<string, string>;
}

export interface OciArchive {
  archive: Uint8Array;
  /** The layer's size: the image's size as a registry counts it (compressed). */
  layerBytes: number;
  /** Its files' sizes added up: about what it takes on disk once loaded. */
  rootfsBytes: number;
  manifestDigest: string;
  configDigest: string;
}

const sha256 = (bytes: Uint8Array) => `sha256:${new Bun.CryptoHasher("sha256").update(bytes).digest("hex")}`;
const json = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

async function tarOf(add: (tar: ReturnType<typeof pack>) => void): Promise<Uint8Array> {
  const tar = pack();
  const chunks: Buffer[] = [];
  const read = (async () => {
    for await (const chunk of tar) chunks.push(chunk as Buffer);
  })();
  add(tar);
  tar.finalize();
  await read;
  return new Uint8Array(Buffer.concat(chunks));
}

/** The layer: a tar of the entries, with their owners and modes and one time. */
export function layerTar(entries: RootfsEntry[], mtime: Date): Promise<Uint8Array> {
  return tarOf((tar) => {
    for (const e of entries) {
      const owner = e.type === "symlink" ? 0 : (e.owner ?? 0);
      const common = { name: e.path, mtime, uid: owner, gid: owner, uname: "", gname: "" };
      if (e.type === "directory") tar.entry({ ...common, name: `${e.path}/`, type: "directory", mode: e.mode });
      else if (e.type === "symlink") tar.entry({ ...common, type: "symlink", linkname: e.target, mode: 0o777 });
      else tar.entry({ ...common, type: "file", mode: e.mode, size: e.bytes.length }, Buffer.from(e.bytes.buffer, e.bytes.byteOffset, e.bytes.byteLength));
    }
  });
}

export async function ociArchive(image: OciImage): Promise<OciArchive> {
  const mtime = image.created;
  const layer = await layerTar(image.entries, mtime);
  const layerGz = new Uint8Array(await promisify(gzip)(layer, { level: 9 }));
  const platform = { architecture: image.arch, os: "linux", ...(image.arch === "arm64" ? { variant: "v8" } : {}) };
  const config = json({
    created: mtime.toISOString(),
    ...platform,
    config: image.config,
    rootfs: { type: "layers", diff_ids: [sha256(layer)] },
    history: [{ created: mtime.toISOString(), created_by: image.createdBy }],
  });
  const manifest = json({
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: sha256(config), size: config.length },
    layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: sha256(layerGz), size: layerGz.length }],
    annotations: image.annotations,
  });
  const [repo, tag] = image.repoTag.split(":") as [string, string];
  const index = json({
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.index.v1+json",
    manifests: [
      {
        mediaType: "application/vnd.oci.image.manifest.v1+json",
        digest: sha256(manifest),
        size: manifest.length,
        platform,
        // what docker load (containerd's name) and podman load (the OCI ref name) name the image
        annotations: { "io.containerd.image.name": `docker.io/library/${repo}:${tag}`, "org.opencontainers.image.ref.name": tag },
      },
    ],
  });
  const blob = (bytes: Uint8Array) => `blobs/sha256/${sha256(bytes).slice("sha256:".length)}`;
  const dockerManifest = json([{ Config: blob(config), RepoTags: [image.repoTag], Layers: [blob(layerGz)] }]);
  const archive = await tarOf((tar) => {
    const file = (name: string, bytes: Uint8Array) => tar.entry({ name, mtime, mode: 0o644, uid: 0, gid: 0, uname: "", gname: "", size: bytes.length }, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    tar.entry({ name: "blobs/", type: "directory", mode: 0o755, mtime, uid: 0, gid: 0 });
    tar.entry({ name: "blobs/sha256/", type: "directory", mode: 0o755, mtime, uid: 0, gid: 0 });
    file(blob(config), config);
    file(blob(layerGz), layerGz);
    file(blob(manifest), manifest);
    file("index.json", index);
    file("manifest.json", dockerManifest);
    file("oci-layout", json({ imageLayoutVersion: "1.0.0" }));
  });
  const rootfsBytes = image.entries.reduce((n, e) => n + (e.type === "file" ? e.bytes.length : 0), 0);
  return { archive, layerBytes: layerGz.length, rootfsBytes, manifestDigest: sha256(manifest), configDigest: sha256(config) };
}
