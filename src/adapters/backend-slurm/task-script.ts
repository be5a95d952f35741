/**
 * The shell a multi-task BATCH runs on each node, outside the sandbox, around its tasks (see
 * batch-script.ts's TASKS body): fixed text, nothing from a user; every value it handles is
 * the launcher's (job id, node index) or the daemon's (the job's uid, the wrapped argv).
 */
import { NODE_TMP_PLACEHOLDER } from "../../core/sandbox.ts";

/**
 * Where a node's per-allocation directory lives (the tasks' shared /tmp and /dev/shm): node
 * local, and a directory only the launching account can create entries in, so no other
 * local user can plant a link where a root-run task script then chowns. /run is memory, as
 * the private tmpfs of a single-task launch is. A non-root service account has no /run of
 * its own: its base is a 0700 directory it owns under the node's /tmp, refused when someone
 * else made it first.
 */
const NODE_BASE_LINES = [
  `if [ "$(id -u)" = 0 ]; then base=/run/openai4s-tasks; else base=/tmp/openai4s-tasks-$(id -u); fi`,
  `case "\${SLURM_JOB_ID:-}.\${SLURM_NODEID:-}" in *[!0-9.]*|.*|*.) echo "openai4s: no job id or node id from the launcher" >&2; exit 125 ;; esac`,
  `d="$base/$SLURM_JOB_ID.$SLURM_NODEID"`,
] as const;

/**
 * The node's network interfaces, read-only, for a sandboxed task: MPI's transports (UCX,
 * libfabric) list them under /sys/class/net, and the sandbox has no /sys at all (measured:
 * MPICH over UCX failed "Destination is unreachable" between two nodes, and ran with these
 * binds). Each interface's link is resolved HERE, on the node, outside the sandbox: sysfs is
 * the kernel's, nothing a job wrote. Parents are made 0755 first (bwrap would make them 0700,
 * and the job's uid could not reach them). Printed one per line (sysfs names have no
 * blanks), appended as bwrap options before its "--".
 */
const NETWORK_SYSFS_LINES = [
  "netbinds() {",
  "  made=",
  '  for s in /sys/class/net $(for l in /sys/class/net/*; do [ -L "$l" ] && readlink -f "$l"; done); do',
  '    case "$s" in /sys/class/net|/sys/devices/*) ;; *) continue ;; esac',
  `    q= rest=\${s#/}`,
  '    while case "$rest" in */*) true ;; *) false ;; esac; do',
  `      q=$q/\${rest%%/*} rest=\${rest#*/}`,
  '      case " $made " in *" $q "*) ;; *) made="$made $q"; echo --perms; echo 0755; echo --dir; echo "$q" ;; esac',
  "    done",
  '    echo --ro-bind-try; echo "$s"; echo "$s"',
  "  done",
  "}",
] as const;

/**
 * Runs once per task on its node, OUTSIDE the sandbox, before it: makes the allocation's
 * node directory once (built aside and renamed into place, so a second task of the node
 * either finds it complete or makes its own and loses the rename), gives its tmp/ and shm/
 * to the job's uid, then replaces the placeholder path in the sandbox's own options (never
 * past the first "--", where the job's argv begins) and execs the sandbox.
 * Arguments: UID GID (or "- -") and the wrapped argv.
 */
export const TASK_SCRIPT = [
  "set -u",
  "uid=$1 gid=$2; shift 2",
  ...NODE_BASE_LINES,
  `(umask 077 && mkdir -p "$base") && [ -d "$base" ] && [ ! -L "$base" ] && [ -O "$base" ] || { echo "openai4s: $base is not this account's own directory" >&2; exit 125; }`,
  `if [ ! -d "$d" ]; then`,
  `  t=$(mktemp -d "$base/.new.XXXXXX") || exit 125`,
  `  mkdir -m 0700 "$t/tmp" "$t/shm" || exit 125`,
  `  if [ "$uid" != - ]; then chown "$uid:$gid" "$t/tmp" "$t/shm" || exit 125; fi`,
  `  mv -T "$t" "$d" 2>/dev/null || rm -rf "$t"`,
  "fi",
  `[ -d "$d" ] && [ ! -L "$d" ] && [ -O "$d" ] || { echo "openai4s: $d is not this job's directory" >&2; exit 125; }`,
  `p=${NODE_TMP_PLACEHOLDER}`,
  ...NETWORK_SYSFS_LINES,
  "opts=1 sandboxed=",
  "for a do",
  "  shift",
  `  if [ -n "$opts" ]; then`,
  `    case "$a" in`,
  `      --) opts=; if [ -n "$sandboxed" ]; then for b in $(netbinds); do set -- "$@" "$b"; done; fi ;;`,
  `      "$p"/*) a="$d\${a#"$p"}"; sandboxed=1 ;;`,
  "    esac",
  "  fi",
  `  set -- "$@" "$a"`,
  "done",
  `exec "$@"`,
].join("\n");

/** Runs once per node after the tasks: the allocation's node directory goes with them. */
export const CLEANUP_SCRIPT = [...NODE_BASE_LINES, `rm -rf "$d"`].join("\n");
