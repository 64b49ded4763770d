/** Help texts, one per command. */
import { SERVER_DEFAULTS } from "../config/server.ts";

export const MAIN_HELP = `burrow — self-hosted tunnels to services on your machine

Usage:
  burrow server [flags]        run the tunnel server (edge + admin API)
  burrow --help                this text; burrow <command> --help for a command's flags
  burrow --version             print the version

Every server flag may also be set in the environment as BURROW_<FLAG>
(--admin-port -> BURROW_ADMIN_PORT); a flag on the command line wins.
`;

const d = SERVER_DEFAULTS;

export const SERVER_HELP = `Usage: burrow server [flags]

Flags:
  --domain D              public domain; tunnels are <name>.D        (default ${d.domain})
  --http-port N           public HTTP port for tunnels and agents    (default ${d["http-port"]})
  --admin-port N          admin API port                             (default ${d["admin-port"]})
  --host H                address to listen on                       (default ${d.host})
  --data-dir DIR          where burrow.db lives                      (default ${d["data-dir"]})
  --tcp-ports A-B         ports TCP tunnels may take                 (default ${d["tcp-ports"]})
  --system-subdomains L   names nobody may reserve or use            (default ${d["system-subdomains"]})
  -h, --help              this text

Environment:
  BURROW_<FLAG>           any flag above, e.g. BURROW_ADMIN_PORT=4041
  BURROW_ADMIN_USERNAME   first admin's name when the database has no admin (default admin)
  BURROW_ADMIN_PASSWORD   first admin's password; when unset one is generated and printed once
`;
