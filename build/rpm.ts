/**
 * An RPM package of a linux release executable, made with rpmbuild (Debian's
 * `rpm` package has it): the same files as the .deb (build/deb.ts) in the
 * places Fedora and RHEL keep them:
 *
 *   /usr/bin/burrow                        the executable
 *   /usr/lib/systemd/system/burrow.service the unit `burrow server init` writes,
 *                                          installed disabled
 *   /etc/burrow/burrow.env                 the settings, %config(noreplace), 0600
 *   /usr/lib/systemd/system/burrow-agent.service
 *                                          the agent's unit, installed disabled
 *
 * Removing it stops and disables the service; an edited burrow.env is kept
 * as burrow.env.rpmsave, as RPM does with changed config files. The data in
 * /var/lib/burrow is left for the admin.
 */
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ENV_TEMPLATE, packageAgentUnit, packageUnit } from "./deb.ts";

export interface RpmOptions {
  executable: string;
  /** The package version (a semver's "-" is not allowed in an RPM version: it becomes "~"). */
  version: string;
  arch: "x86_64" | "aarch64";
  outdir: string;
  /** The build's time, seconds since 1970 (the commit's, for the same bytes again). */
  epoch?: number;
}

function spec(o: RpmOptions): string {
  return `Name: burrow
Version: ${o.version.replace(/-/g, "~")}
Release: 1
Summary: Self-hosted tunnels: public HTTP, TCP and UDP ingress to local services
License: MIT
AutoReqProv: no

%description
The burrow server (public ingress, admin API and panel) and its agent
(burrow http 3000, burrow tcp 5432), one executable.

%install
mkdir -p %{buildroot}/usr/bin %{buildroot}/usr/lib/systemd/system %{buildroot}/etc/burrow
install -m 0755 %{_sourcedir}/burrow %{buildroot}/usr/bin/burrow
install -m 0644 %{_sourcedir}/burrow.service %{buildroot}/usr/lib/systemd/system/burrow.service
install -m 0644 %{_sourcedir}/burrow-agent.service %{buildroot}/usr/lib/systemd/system/burrow-agent.service
install -m 0600 %{_sourcedir}/burrow.env %{buildroot}/etc/burrow/burrow.env

%files
%attr(0755,root,root) /usr/bin/burrow
%attr(0644,root,root) /usr/lib/systemd/system/burrow.service
%attr(0644,root,root) /usr/lib/systemd/system/burrow-agent.service
%dir %attr(0755,root,root) /etc/burrow
%config(noreplace) %attr(0600,root,root) /etc/burrow/burrow.env

%post
if [ -d /run/systemd/system ]; then systemctl daemon-reload >/dev/null 2>&1 || :; fi
if [ "$1" = 1 ]; then echo "burrow: set BURROW_DOMAIN in /etc/burrow/burrow.env, then: systemctl enable --now burrow"; fi

%preun
if [ "$1" = 0 ] && [ -d /run/systemd/system ]; then systemctl disable --now burrow.service burrow-agent.service >/dev/null 2>&1 || :; fi

%postun
if [ -d /run/systemd/system ]; then systemctl daemon-reload >/dev/null 2>&1 || :; fi
`;
}

/** Builds the .rpm; returns its path. */
export function buildRpm(o: RpmOptions): string {
  const top = mkdtempSync(join(tmpdir(), "burrow-rpm-"));
  try {
    const sources = join(top, "SOURCES");
    mkdirSync(sources, { recursive: true });
    copyFileSync(o.executable, join(sources, "burrow"));
    chmodSync(join(sources, "burrow"), 0o755);
    // the unit names /usr/bin/burrow either way; only where it lies differs from the .deb
    writeFileSync(join(sources, "burrow.service"), packageUnit());
    writeFileSync(join(sources, "burrow-agent.service"), packageAgentUnit());
    writeFileSync(join(sources, "burrow.env"), ENV_TEMPLATE);
    writeFileSync(join(top, "burrow.spec"), spec(o));
    const built = Bun.spawnSync(
      [
        "rpmbuild",
        "-bb",
        "--define",
        `_topdir ${top}`,
        "--define",
        "_build_id_links none",
        "--define",
        "__strip /bin/true",
        "--define",
        "__brp_strip /bin/true",
        "--define",
        "debug_package %{nil}",
        "--define",
        "use_source_date_epoch_as_buildtime 1",
        "--define",
        "_buildhost burrow",
        "--define",
        "clamp_mtime_to_source_date_epoch 1",
        "--target",
        o.arch,
        join(top, "burrow.spec"),
      ],
      { stdout: "pipe", stderr: "pipe", env: { ...process.env, SOURCE_DATE_EPOCH: String(o.epoch ?? 0) } },
    );
    if (built.exitCode !== 0) throw new Error(`rpmbuild failed: ${built.stderr.toString().slice(-2000)}`);
    const dir = join(top, "RPMS", o.arch);
    const [file] = readdirSync(dir).filter((f) => f.endsWith(".rpm"));
    if (!file) throw new Error("rpmbuild wrote no package");
    mkdirSync(o.outdir, { recursive: true });
    const out = join(o.outdir, file);
    copyFileSync(join(dir, file), out);
    return out;
  } finally {
    rmSync(top, { recursive: true, force: true });
  }
}
