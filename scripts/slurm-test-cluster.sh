#!/usr/bin/env bash
# A real two-node Slurm cluster on one machine, for the project's tests and CI.
#
#   scripts/slurm-test-cluster.sh up DIR            install packages if missing, start everything, wait ready
#   scripts/slurm-test-cluster.sh down DIR          cancel jobs, stop what `up` started (by PID file)
#   scripts/slurm-test-cluster.sh status DIR        exit 0 when every daemon is up and answering
#   scripts/slurm-test-cluster.sh stop-ctld DIR     stop only slurmctld ("scheduler unreachable")
#   scripts/slurm-test-cluster.sh start-ctld DIR    start slurmctld again and wait until it answers
#   scripts/slurm-test-cluster.sh restart-ctld DIR --job-comment=on|off
#                                                   rewrite AccountingStoreFlags, restart slurmctld
#   scripts/slurm-test-cluster.sh smoke DIR         run a two-node job and check ranks 0 and 1
#
# Clients find the cluster through SLURM_CONF: `source DIR/env` before sbatch/squeue/sacct/srun.
#
# Environment (read by `up` when it writes the configuration; later commands reuse DIR/etc/ports):
#   O4S_SLURM_PORT_BASE=N   slurmctld N, slurmdbd N+1, MariaDB N+2, slurmd n1 N+3, n2 N+4.
#                           Unset: the ports of the notes (16817, 16819, 13306, 17001, 17002).
#                           A second cluster on the same machine needs its own base.
#   O4S_SLURM_NODE_CPUS     CPUs per simulated node (default 4), O4S_SLURM_NODE_MEMORY_MB (1000),
#   O4S_SLURM_NODE_GPUS     GPUs per simulated node (default 2; count-only, no device files).
#
# srun --mpi=pmix (Open MPI, mpi4py) needs libpmix-dev installed before `up`: slurmd loads
# its MPI plugins when it starts (.ci/run installs it with the other MPI packages).
#
# Why it is shaped like this (measured on this kind of single machine):
# CI machines have no systemd and PID 1 manages nothing, so every daemon is started here with
# its state, sockets, logs and PID files under DIR, and `down` stops only processes whose PID
# file is under DIR and whose command line (or, for slurmdbd, which has no option naming its
# config, whose SLURM_CONF) refers to DIR: a test cluster must never take a real one down.
set -euo pipefail
export LC_ALL=C # EPOCHREALTIME's decimal separator, and sinfo/scontrol wording, follow the locale

REQUIRED_PACKAGES=(slurmctld slurmd slurmdbd slurm-client munge mariadb-server)
readonly NODES=(n1 n2)
export PATH="/usr/sbin:/usr/bin:/sbin:/bin:${PATH:-}"

say() { printf 'slurm-test-cluster: %s\n' "$*"; }
warn() { printf 'slurm-test-cluster: %s\n' "$*" >&2; }
die() {
  warn "error: $*"
  exit 1
}
usage() {
  sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

now_us() { printf '%s' "${EPOCHREALTIME/./}"; }
since() { # seconds since a now_us stamp, with two decimals
  local elapsed_us=$(($(now_us) - $1))
  printf '%d.%02d' $((elapsed_us / 1000000)) $((elapsed_us % 1000000 / 10000))
}

# ---------------------------------------------------------------------------------------------
# Paths

set_paths() {
  DIR=$1
  ETC=$DIR/etc
  RUN=$DIR/run
  LOG=$DIR/log
  SPOOL=$DIR/spool
  CONF=$ETC/slurm.conf
  DBD_CONF=$ETC/slurmdbd.conf
  MUNGE_SOCK=$DIR/munge/munge.sock
  MUNGE_KEY=$DIR/munge/key/munge.key
  MYSQL_SOCK=$RUN/mysql.sock
  export SLURM_CONF=$CONF
}

# The daemons, in start order. `down` walks this list backwards.
readonly DAEMONS=(munged mariadbd slurmdbd slurmctld slurmd-n1 slurmd-n2)

pidfile_of() {
  case $1 in
  munged | mariadbd | slurmdbd | slurmctld) printf '%s/%s.pid' "$RUN" "$1" ;;
  slurmd-*) printf '%s/slurmd-%s.pid' "$RUN" "${1#slurmd-}" ;;
  *) die "unknown daemon $1" ;;
  esac
}

logfile_of() {
  case $1 in
  mariadbd) printf '%s/mariadb.log' "$LOG" ;;
  *) printf '%s/%s.log' "$LOG" "$1" ;;
  esac
}

# ---------------------------------------------------------------------------------------------
# Processes: "ours" means alive, the expected executable, and pointing at DIR.

proc_state() { # the state letter of a PID, empty when there is no such process
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  stat=${stat##*) } # comm may contain spaces and parentheses; the state follows the last ')'
  printf '%s' "${stat%% *}"
}

gone() { # a zombie has exited: it only waits for a parent (maybe PID 1, which never reaps here)
  local state
  state=$(proc_state "$1")
  [[ -z $state || $state == Z || $state == X ]]
}

belongs() { # PID EXE: is this process our EXE, started for this DIR?
  local pid=$1 exe=$2 comm
  gone "$pid" && return 1
  # comm, not /proc/PID/exe: Debian installs slurmctld/slurmd as alternatives (slurmctld-wlm).
  comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
  [[ $comm == "$exe" ]] || return 1
  if tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$DIR/"; then
    return 0
  fi
  # slurmdbd has no option naming its configuration: it finds slurmdbd.conf through SLURM_CONF.
  grep -qzxF -- "SLURM_CONF=$CONF" "/proc/$pid/environ" 2>/dev/null
}

live_pid() { # DAEMON: print its PID when it is alive and ours
  local id=$1 pidfile pid
  pidfile=$(pidfile_of "$id")
  [[ -r $pidfile ]] || return 1
  pid=$(tr -dc '0-9' <"$pidfile")
  [[ -n $pid ]] || return 1
  belongs "$pid" "${id%%-*}" || return 1
  printf '%s\n' "$pid"
}

any_live() {
  local id
  for id in "${DAEMONS[@]}"; do
    live_pid "$id" >/dev/null && return 0
  done
  return 1
}

show_log_tail() {
  local file=$1
  if [[ -r $file ]]; then
    warn "--- last lines of $file ---"
    tail -n 40 "$file" >&2
    warn "--- end of $file ---"
  fi
}

# wait_ready DAEMON DEADLINE_S CHECK...: poll CHECK until it succeeds. Fails at once, with the
# daemon's log, when the daemon is known to have died, and at the deadline otherwise.
wait_ready() {
  local id=$1 deadline_s=$2
  shift 2
  local end=$(($(now_us) + deadline_s * 1000000)) pidfile pid
  pidfile=$(pidfile_of "$id")
  until "$@" >/dev/null 2>&1; do
    if [[ -r $pidfile ]]; then
      pid=$(tr -dc '0-9' <"$pidfile")
      if [[ -n $pid ]] && gone "$pid"; then
        warn "error: $id (pid $pid) exited while starting"
        show_log_tail "$(logfile_of "$id")"
        show_log_tail "$LOG/$id.out"
        exit 1
      fi
    fi
    if (($(now_us) > end)); then
      warn "error: $id not ready after ${deadline_s} s (check: $*)"
      show_log_tail "$(logfile_of "$id")"
      show_log_tail "$LOG/$id.out"
      exit 1
    fi
    sleep 0.1
  done
}

stop_daemon() {
  local id=$1 pid started
  if ! pid=$(live_pid "$id"); then
    say "$id: not running"
    return 0
  fi
  started=$(now_us)
  kill -TERM "$pid" 2>/dev/null || true
  if ! wait_gone "$pid" 30; then
    warn "$id (pid $pid) still alive 30 s after SIGTERM: sending SIGKILL"
    # Re-check identity: in 30 s the PID could in principle have been reused.
    if belongs "$pid" "${id%%-*}"; then kill -KILL "$pid" 2>/dev/null || true; fi
    wait_gone "$pid" 10 || die "$id (pid $pid) survived SIGKILL"
  fi
  say "$id: stopped (pid $pid) in $(since "$started") s"
}

wait_gone() { # PID DEADLINE_S
  local end=$(($(now_us) + $2 * 1000000))
  until gone "$1"; do
    (($(now_us) > end)) && return 1
    sleep 0.05
  done
}

# ---------------------------------------------------------------------------------------------
# Packages

ensure_packages() {
  local missing=() pkg
  for pkg in "${REQUIRED_PACKAGES[@]}"; do
    if [[ $(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null) != installed ]]; then
      missing+=("$pkg")
    fi
  done
  ((${#missing[@]} == 0)) && return 0

  command -v apt-get >/dev/null || die "packages missing (${missing[*]}) and no apt-get"
  local started
  started=$(now_us)
  say "installing ${missing[*]}"
  # Daemons must not start during install: they would take the default ports and /run/munge,
  # and nobody would ever stop them. invoke-rc.d consults policy-rc.d; 101 means "forbidden".
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\n# written by slurm-test-cluster.sh for the duration of an install\nexit 101\n' \
      >/usr/sbin/policy-rc.d
    chmod 0755 /usr/sbin/policy-rc.d
    CREATED_POLICY_RC_D=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  local install=(apt-get install -y --no-install-recommends -o Dpkg::Use-Pty=0 "${missing[@]}")
  if ! compgen -G '/var/lib/apt/lists/*_Packages' >/dev/null; then
    apt-get update -q || die "apt-get update failed"
  fi
  if ! "${install[@]}"; then
    # Stale lists are the usual reason (a mirror moved on): refresh once and retry.
    apt-get update -q || die "apt-get update failed"
    "${install[@]}" || die "apt-get install ${missing[*]} failed"
  fi
  remove_policy_rc_d
  say "installed in $(since "$started") s"
}

CREATED_POLICY_RC_D=0
remove_policy_rc_d() {
  if ((CREATED_POLICY_RC_D)); then
    rm -f /usr/sbin/policy-rc.d
    CREATED_POLICY_RC_D=0
  fi
}
trap remove_policy_rc_d EXIT

# ---------------------------------------------------------------------------------------------
# Configuration

# choose_ports [keep]: with "keep", the ports already written for DIR win over the
# environment (daemons that are running listen there); otherwise O4S_SLURM_PORT_BASE wins.
choose_ports() {
  if [[ ${1:-} == keep && -r $ETC/ports ]]; then
    # shellcheck source=/dev/null
    source "$ETC/ports"
  elif [[ -n ${O4S_SLURM_PORT_BASE:-} ]]; then
    local base=$O4S_SLURM_PORT_BASE
    if ! [[ $base =~ ^[0-9]{4,5}$ ]] || ((base < 1024 || base > 65530)); then
      die "O4S_SLURM_PORT_BASE must be an integer in 1024..65530, got '$base'"
    fi
    CTLD_PORT=$base DBD_PORT=$((base + 1)) MYSQL_PORT=$((base + 2))
    NODE_PORT_n1=$((base + 3)) NODE_PORT_n2=$((base + 4))
  elif [[ -r $ETC/ports ]]; then
    # shellcheck source=/dev/null
    source "$ETC/ports" # a restart keeps the ports it was first given
  else
    CTLD_PORT=16817 DBD_PORT=16819 MYSQL_PORT=13306 NODE_PORT_n1=17001 NODE_PORT_n2=17002
  fi
  NODE_CPUS=${O4S_SLURM_NODE_CPUS:-4}
  NODE_MEMORY_MB=${O4S_SLURM_NODE_MEMORY_MB:-4000}
  NODE_GPUS=${O4S_SLURM_NODE_GPUS:-2}
  local n
  for n in "$NODE_CPUS" "$NODE_MEMORY_MB" "$NODE_GPUS"; do
    [[ $n =~ ^[0-9]{1,6}$ ]] || die "node sizes must be small integers, got '$n'"
  done
}

write_config() {
  local job_comment=$1
  choose_ports
  cat >"$ETC/ports" <<EOF
CTLD_PORT=$CTLD_PORT DBD_PORT=$DBD_PORT MYSQL_PORT=$MYSQL_PORT NODE_PORT_n1=$NODE_PORT_n1 NODE_PORT_n2=$NODE_PORT_n2
EOF
  if [[ ! -s $ETC/storage-pass ]]; then
    (umask 077 && head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$ETC/storage-pass")
  fi
  make_fake_gpus
  local pass gres_conf=""
  pass=$(<"$ETC/storage-pass")
  ((NODE_GPUS > 0)) && gres_conf=" Gres=gpu:$NODE_GPUS"

  cat >"$CONF.tmp" <<EOF
# Written by scripts/slurm-test-cluster.sh: a two-node test cluster on one machine.
ClusterName=ci
SlurmctldHost=localhost
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCK
# Without it sacct/sacctmgr look for munge in /run/munge and every call hangs for 2 s.
AccountingStoragePass=socket=$MUNGE_SOCK
StateSaveLocation=$SPOOL/ctld
SlurmdSpoolDir=$SPOOL/slurmd-%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
# Memory is a consumable (CR_Core_Memory) so a job's --mem becomes its steps' limit, which
# OverMemoryKill enforces below. A job that asks for none gets 1000 MB per CPU (not the
# whole node, which would allow one job per node; not less, which would kill a session's
# worker for its ordinary resident set).
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
SchedulerType=sched/backfill
# submit -> RUNNING in under a second instead of about 2.5 s
SchedulerParameters=batch_sched_delay=0
# The simulated nodes' sizes are configuration, not hardware: without this a machine with
# fewer cores or less memory than configured drains its nodes ("Low socket*core*thread count").
SlurmdParameters=config_overrides
MpiDefault=none
# srun --mpi=pmix makes each step's PMIx client directory under TmpFS, named by job and step
# only: with both simulated nodes on one machine's /tmp, the second node's step failed
# ("Cannot create directory .../spmix_appdir_0_J.S: File exists"). %n gives each node its
# own, as each real node has its own /tmp.
TmpFS=$DIR/nodetmp/%n
ReturnToService=2
MailProg=/bin/true
JobAcctGatherType=jobacct_gather/linux
# Memory is enforced without cgroups: the gatherer samples every second and kills a step
# whose RSS passes its --mem, so an out-of-memory job can be staged (state OUT_OF_MEMORY).
JobAcctGatherParams=OverMemoryKill
JobAcctGatherFrequency=task=1
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
AccountingStorageTRES=gres/gpu
GresTypes=gpu
# Comment reaches sacct only with this flag; restart-ctld --job-comment=off drops it.
$(accounting_flags_line "$job_comment")
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$NODE_PORT_n1 CPUs=$NODE_CPUS RealMemory=$NODE_MEMORY_MB$gres_conf State=UNKNOWN
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$NODE_PORT_n2 CPUs=$NODE_CPUS RealMemory=$NODE_MEMORY_MB$gres_conf State=UNKNOWN
# Preemption can be staged: a job in "urgent" (higher tier) preempts jobs in "debug". Our
# jobs are submitted --no-requeue, so REQUEUE mode ends them PREEMPTED and the daemon starts
# a new attempt (epoch + 1) instead of the scheduler rerunning the old one.
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=urgent Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=2
EOF
  mv "$CONF.tmp" "$CONF"

  if ((NODE_GPUS > 0)); then
    printf 'Name=gpu File=%s/dev/gpu[0-%s]\n' "$DIR" $((NODE_GPUS - 1)) >"$ETC/gres.conf"
  else
    : >"$ETC/gres.conf"
  fi

  # slurmdbd reads slurmdbd.conf next to $SLURM_CONF, and refuses it unless it is 0600 and
  # owned by SlurmUser (it holds the database password).
  (umask 077 && cat >"$DBD_CONF" <<EOF
# Written by scripts/slurm-test-cluster.sh
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCK
DbdHost=localhost
DbdPort=$DBD_PORT
SlurmUser=root
LogFile=$LOG/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$MYSQL_PORT
StorageUser=slurm
StoragePass=$pass
StorageLoc=slurm_acct_db
EOF
  )
  chmod 0600 "$DBD_CONF"

  cat >"$DIR/env" <<EOF
# Source me: Slurm clients (sbatch, squeue, sacct, scancel, srun, scontrol, sinfo) find this
# test cluster through SLURM_CONF. Written by scripts/slurm-test-cluster.sh.
export SLURM_CONF=$CONF
case ":\$PATH:" in *:/usr/sbin:*) ;; *) export PATH="\$PATH:/usr/sbin" ;; esac
case ":\$PATH:" in *:/usr/bin:*) ;; *) export PATH="\$PATH:/usr/bin" ;; esac
EOF
}

# Pretend GPUs, so profiles asking for --gpus can be scheduled, accounted and preflighted.
# slurmd counts a GPU only through a character device in gres.conf (Count= alone reports 0
# and the node goes INVAL); these are /dev/null's numbers, never opened with task/none.
make_fake_gpus() {
  ((NODE_GPUS > 0)) || return 0
  mkdir -p "$DIR/dev"
  local i
  for ((i = 0; i < NODE_GPUS; i++)); do
    [[ -c $DIR/dev/gpu$i ]] && continue
    rm -f "$DIR/dev/gpu$i"
    if ! mknod -m 0666 "$DIR/dev/gpu$i" c 1 3 2>/dev/null; then
      warn "cannot create device nodes here (mknod refused): the nodes get no GPUs"
      NODE_GPUS=0
      return 0
    fi
  done
}

accounting_flags_line() {
  case $1 in
  on) printf 'AccountingStoreFlags=job_comment' ;;
  off) printf '#AccountingStoreFlags=job_comment (off: JobName-only lookup)' ;;
  *) die "--job-comment must be on or off" ;;
  esac
}

# ---------------------------------------------------------------------------------------------
# Daemons

check_socket_path() {
  # A Unix socket path longer than 107 bytes cannot be bound; say so instead of a cryptic log.
  local path
  for path in "$MUNGE_SOCK" "$MYSQL_SOCK"; do
    ((${#path} <= 100)) || die "DIR is too long: socket path $path exceeds 100 bytes"
  done
  # munged (and every client) must traverse each directory on the socket path.
  local d=$DIR
  while [[ $d != / ]]; do
    [[ $(stat -c %A "$d") == ?????????[xt] ]] ||
      die "$d is not world-executable (mode $(stat -c %a "$d")): munged's socket under it would be unreachable"
    d=$(dirname "$d")
  done
}

munge_ok() { munge -S "$MUNGE_SOCK" -n | unmunge -S "$MUNGE_SOCK"; }

start_munged() {
  if live_pid munged >/dev/null; then
    say "munged: already running"
  else
    if [[ ! -s $MUNGE_KEY ]]; then
      mkdir -p "$DIR/munge/key"
      chmod 0700 "$DIR/munge/key"
      dd if=/dev/urandom bs=1024 count=1 of="$MUNGE_KEY" status=none
      chmod 0400 "$MUNGE_KEY"
    fi
    # munged deletes its socket on a clean exit; one left by a killed munged is stale (no live
    # munged of ours is bound to it, checked above) and would make the new one refuse to bind.
    rm -f "$MUNGE_SOCK" "$MUNGE_SOCK.lock"
    munged --socket="$MUNGE_SOCK" --key-file="$MUNGE_KEY" --pid-file="$RUN/munged.pid" \
      --log-file="$LOG/munged.log" --seed-file="$DIR/munge/munged.seed" \
      </dev/null >>"$LOG/munged.out" 2>&1 9>&- ||
      {
        show_log_tail "$LOG/munged.log"
        show_log_tail "$LOG/munged.out"
        die "munged did not start"
      }
  fi
  wait_ready munged 15 munge_ok
}

start_mariadbd() {
  if live_pid mariadbd >/dev/null; then
    say "mariadbd: already running"
  else
    if [[ ! -d $DIR/mysql/mysql ]]; then
      rm -rf "$DIR/mysql"
      mkdir -p "$DIR/mysql"
      mariadb-install-db --no-defaults --user=root --datadir="$DIR/mysql" \
        --auth-root-authentication-method=socket --skip-test-db \
        --innodb-log-file-size=8M >"$LOG/mariadb-install.log" 2>&1 ||
        {
          show_log_tail "$LOG/mariadb-install.log"
          die "mariadb-install-db failed"
        }
    fi
    rm -f "$MYSQL_SOCK" # stale from a killed server; no live mariadbd of ours owns it
    # mariadbd does not daemonize: detach it from our session and our stdout, so a caller that
    # reads this script's output to EOF is not held open by the database for ever.
    setsid nohup mariadbd --no-defaults --user=root --datadir="$DIR/mysql" \
      --socket="$MYSQL_SOCK" --pid-file="$RUN/mariadbd.server.pid" --port="$MYSQL_PORT" \
      --bind-address=127.0.0.1 --skip-name-resolve --log-error="$LOG/mariadb.log" \
      --innodb-buffer-pool-size=16M --innodb-log-file-size=8M \
      </dev/null >>"$LOG/mariadbd.out" 2>&1 9>&- &
    printf '%s\n' "$!" >"$RUN/mariadbd.pid"
  fi
  wait_ready mariadbd 60 mariadb-admin --no-defaults -S "$MYSQL_SOCK" ping
  local pass
  pass=$(<"$ETC/storage-pass")
  # OR REPLACE: a regenerated password must win over an old user row in a kept datadir.
  mariadb --no-defaults -S "$MYSQL_SOCK" -u root -e "
    CREATE DATABASE IF NOT EXISTS slurm_acct_db;
    CREATE OR REPLACE USER 'slurm'@'localhost' IDENTIFIED BY '$pass';
    CREATE OR REPLACE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" ||
    die "could not create the accounting database and user"
}

start_slurmdbd() {
  if live_pid slurmdbd >/dev/null; then
    say "slurmdbd: already running"
  else
    slurmdbd </dev/null >>"$LOG/slurmdbd.out" 2>&1 9>&- ||
      {
        show_log_tail "$LOG/slurmdbd.log"
        die "slurmdbd did not start"
      }
  fi
  wait_ready slurmdbd 30 timeout 5 sacctmgr -n list cluster
}

ctld_up() { timeout 5 scontrol ping | grep -q 'is UP'; }

start_slurmctld() {
  if live_pid slurmctld >/dev/null; then
    say "slurmctld: already running"
  else
    slurmctld -f "$CONF" </dev/null >>"$LOG/slurmctld.out" 2>&1 9>&- ||
      {
        show_log_tail "$LOG/slurmctld.log"
        show_log_tail "$LOG/slurmctld.out"
        die "slurmctld did not start"
      }
  fi
  wait_ready slurmctld 30 ctld_up
}

UTS_WORKS=""
start_slurmd() {
  local node=$1
  if live_pid "slurmd-$node" >/dev/null; then
    say "slurmd-$node: already running"
    return 0
  fi
  if [[ -z $UTS_WORKS ]]; then
    if unshare --uts true 2>/dev/null; then UTS_WORKS=yes; else UTS_WORKS=no; fi
    [[ $UTS_WORKS == yes ]] ||
      warn "unshare --uts is not permitted here: nodes start without their own hostnames"
  fi
  # In its own UTS namespace each slurmd reports its node name as the hostname, so jobs on
  # different simulated nodes see different `hostname` output, as on a real cluster.
  if [[ $UTS_WORKS == yes ]]; then
    # shellcheck disable=SC2016 # $1/$2 are expanded by the inner sh
    unshare --uts sh -c 'hostname "$1" && exec slurmd -f "$2" -N "$1"' sh "$node" "$CONF" \
      </dev/null >>"$LOG/slurmd-$node.out" 2>&1 9>&-
  else
    slurmd -f "$CONF" -N "$node" </dev/null >>"$LOG/slurmd-$node.out" 2>&1 9>&-
  fi || {
    show_log_tail "$LOG/slurmd-$node.log"
    show_log_tail "$LOG/slurmd-$node.out"
    die "slurmd $node did not start"
  }
}

nodes_ready() { # every node registered and idle (or busy with jobs), none "not responding" (*)
  local out count=0
  out=$(timeout 5 sinfo -h -N -p debug -o '%N %t') || return 1
  while read -r _ state; do
    [[ $state =~ ^(idle|mix|alloc|comp)$ ]] || return 1
    count=$((count + 1))
  done <<<"$out"
  ((count == ${#NODES[@]}))
}

cluster_registered() { timeout 5 sacctmgr -n -P list cluster format=cluster | grep -qx ci; }
sacct_answers() { timeout 5 sacct -n -X >/dev/null; }

all_ready() {
  nodes_ready && cluster_registered && sacct_answers
}

# ---------------------------------------------------------------------------------------------
# Commands

take_lock() {
  # Two `up`s racing on one DIR (two test files starting together) would start two munged on
  # one socket. Daemons are started with 9>&- so none of them inherits (and holds) the lock.
  exec 9>"$DIR/.lock"
  flock -w 300 9 || die "another slurm-test-cluster.sh holds $DIR/.lock"
}

healthy() {
  local id
  for id in "${DAEMONS[@]}"; do
    live_pid "$id" >/dev/null || return 1
  done
  munge_ok >/dev/null 2>&1 && ctld_up >/dev/null 2>&1 && nodes_ready >/dev/null 2>&1
}

cmd_up() {
  [[ $(id -u) == 0 ]] || die "needs root (SlurmUser=root, and it may install packages)"
  local started
  started=$(now_us)
  mkdir -p "$DIR"
  chmod 0755 "$DIR"
  take_lock
  if [[ -r $CONF ]] && healthy; then
    say "already up in $DIR (source $DIR/env)"
    return 0
  fi
  ensure_packages
  local t0
  t0=$(now_us)
  mkdir -p "$ETC" "$RUN" "$LOG" "$SPOOL/ctld" "$SPOOL/slurmd-n1" "$SPOOL/slurmd-n2" "$DIR/mysql" "$DIR/munge"
  chmod 0755 "$DIR/munge" "$ETC" "$RUN" "$LOG" "$SPOOL"
  # Each node's TmpFS (see the configuration), world-writable and sticky like /tmp.
  mkdir -p "$DIR/nodetmp/n1" "$DIR/nodetmp/n2"
  chmod 0755 "$DIR/nodetmp"
  chmod 1777 "$DIR/nodetmp/n1" "$DIR/nodetmp/n2"
  check_socket_path
  rm -f "$DIR/READY"
  if any_live && [[ -r $CONF ]]; then
    say "partly up: keeping the configuration the running daemons use"
  else
    write_config on
  fi
  choose_ports keep

  local step
  step=$(now_us)
  start_munged
  say "munged ready ($(since "$step") s)"
  step=$(now_us)
  start_mariadbd
  say "mariadbd ready ($(since "$step") s)"
  step=$(now_us)
  start_slurmdbd
  say "slurmdbd ready ($(since "$step") s)"
  step=$(now_us)
  start_slurmctld
  say "slurmctld ready ($(since "$step") s)"
  step=$(now_us)
  local node
  for node in "${NODES[@]}"; do start_slurmd "$node"; done
  wait_ready slurmd-n1 60 all_ready
  say "slurmd ${NODES[*]} ready, accounting answers ($(since "$step") s)"
  date -u +%Y-%m-%dT%H:%M:%SZ >"$DIR/READY"
  say "up in $(since "$t0") s (total $(since "$started") s): source $DIR/env"
}

cmd_down() {
  if [[ ! -d $DIR ]]; then
    say "nothing at $DIR"
    return 0
  fi
  local started
  started=$(now_us)
  take_lock
  rm -f "$DIR/READY"
  cancel_all_jobs
  local i
  for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
    stop_daemon "${DAEMONS[i]}"
  done
  say "down in $(since "$started") s"
}

cancel_all_jobs() {
  # A running job's slurmstepd outlives slurmd; cancelling through the cluster is how its
  # processes end without us killing anything that is not in a PID file.
  live_pid slurmctld >/dev/null || return 0
  local jobs
  jobs=$(timeout 5 squeue -h -o %i 2>/dev/null) || return 0
  [[ -n $jobs ]] || return 0
  # shellcheck disable=SC2086 # one job id per word
  timeout 5 scancel $jobs 2>/dev/null || true
  local end=$(($(now_us) + 15 * 1000000))
  while [[ -n $(timeout 5 squeue -h -o %i 2>/dev/null) ]]; do
    if (($(now_us) > end)); then
      warn "jobs still listed 15 s after scancel; stopping anyway"
      return 0
    fi
    sleep 0.2
  done
  say "cancelled jobs: $(tr '\n' ' ' <<<"$jobs")"
}

cmd_status() {
  [[ -r $CONF ]] || {
    say "no cluster configured in $DIR"
    return 1
  }
  local id pid ok=0
  for id in "${DAEMONS[@]}"; do
    if pid=$(live_pid "$id"); then
      say "$id: running (pid $pid)"
    else
      say "$id: NOT running"
      ok=1
    fi
  done
  ((ok == 0)) || return 1
  munge_ok >/dev/null 2>&1 || {
    say "munge: NOT answering"
    return 1
  }
  ctld_up >/dev/null 2>&1 || {
    say "slurmctld: NOT answering"
    return 1
  }
  nodes_ready >/dev/null 2>&1 || {
    say "nodes: NOT all idle: $(timeout 5 sinfo -h -N -o '%N=%t' 2>&1 | tr '\n' ' ')"
    return 1
  }
  say "up (source $DIR/env)"
}

require_configured() {
  [[ -r $CONF ]] || die "no cluster configured in $DIR (run: $0 up $DIR)"
  choose_ports keep
}

cmd_stop_ctld() {
  require_configured
  take_lock
  stop_daemon slurmctld
}

cmd_start_ctld() {
  require_configured
  take_lock
  local started
  started=$(now_us)
  start_slurmctld
  wait_ready slurmctld 30 nodes_ready
  say "slurmctld up in $(since "$started") s"
}

cmd_restart_ctld() {
  local flag=$1
  require_configured
  take_lock
  local line
  line=$(accounting_flags_line "$flag")
  # Rewrite only that one line, so everything else the running daemons read stays identical.
  sed -i -E "s|^#?AccountingStoreFlags=.*$|$line|" "$CONF"
  grep -qxF -- "$line" "$CONF" || die "could not set AccountingStoreFlags in $CONF"
  local started
  started=$(now_us)
  stop_daemon slurmctld
  start_slurmctld
  wait_ready slurmctld 30 nodes_ready
  say "slurmctld restarted with job comments $flag in $(since "$started") s"
}

cmd_smoke() {
  require_configured
  local started out
  started=$(now_us)
  out=$(mktemp -d)
  chmod 0755 "$out"
  local id
  id=$(sbatch --parsable -N2 --job-name=o4s-smoke --output="$out/%j.out" \
    --wrap 'srun printenv SLURM_PROCID; srun hostname') || die "sbatch failed"
  local end=$(($(now_us) + 60 * 1000000)) state=""
  while :; do
    (($(now_us) > end)) && die "smoke job $id still ${state:-unobserved} after 60 s"
    # A failing squeue (a controller being restarted) is no answer, not "the job is done".
    if state=$(squeue -h -j "$id" -o %T 2>/dev/null) && [[ -z $state ]]; then break; fi
    sleep 0.1
  done
  local ranks hosts
  ranks=$(grep -xE '[0-9]+' "$out/$id.out" | sort -n | tr '\n' ' ')
  hosts=$(grep -vxE '[0-9]+' "$out/$id.out" | sort | tr '\n' ' ')
  rm -rf "$out"
  [[ $ranks == "0 1 " ]] || die "smoke job $id: expected ranks '0 1', got '$ranks'"
  say "smoke: job $id ran ranks ${ranks}on hosts ${hosts}in $(since "$started") s"
}

main() {
  (($# >= 2)) || usage
  local cmd=$1 raw=$2
  shift 2
  [[ $raw == /* ]] || raw=$PWD/$raw
  local dir
  dir=$(realpath -m -- "$raw")
  # DIR is written unquoted into slurm.conf and SQL; keep it to characters that need no quoting.
  [[ $dir =~ ^/[A-Za-z0-9._/-]+$ ]] || die "DIR may contain only letters, digits, . _ - and /: '$dir'"
  [[ $dir != / ]] || die "DIR must not be /"
  set_paths "$dir"
  case $cmd in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  stop-ctld) cmd_stop_ctld ;;
  start-ctld) cmd_start_ctld ;;
  restart-ctld)
    local flag=on arg
    for arg in "$@"; do
      case $arg in
      --job-comment=on | --job-comment=off) flag=${arg#--job-comment=} ;;
      *) die "restart-ctld: unknown option $arg (expected --job-comment=on|off)" ;;
      esac
    done
    cmd_restart_ctld "$flag"
    ;;
  smoke) cmd_smoke ;;
  *) usage ;;
  esac
}

# Sourcing the file (tests of single functions) defines them without running anything.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then main "$@"; fi
