#!/usr/bin/env bash
# Bring up a single-node SLURM on localhost (slurmctld, slurmd, slurmdbd on MariaDB, munge), so
# that the `slurm` runner can be tested for real. Idempotent: what is already running is left as
# it is, and a second call takes about a second. Every daemon this script starts is recorded in
# $QUADNN_SLURM_DIR/started; tools/slurm/down.sh stops those and nothing else.
#
# Needs root and apt-get (Debian packages slurmctld slurmd slurm-client munge slurmdbd
# mariadb-server, installed when missing). When it cannot, it prints one line saying why and
# exits 3, so callers (tests/slurm_fixture.py) can skip with that reason.
#
# No systemd here: each daemon is started by hand. Facts this relies on:
# - munged runs as the munge user (runuser -u munge);
# - mariadbd with --skip-networking, its pid file inside its own datadir; slurmdbd reaches it
#   through the client library's default socket (/run/mysqld/mysqld.sock);
# - `sacctmgr -i add cluster` works only once slurm.conf names slurmdbd and slurmdbd is up;
#   without slurmdbd, sacct knows nothing and submitit never sees a cancelled job as finished;
# - no cgroups: ProctrackType=proctrack/linuxproc, TaskPlugin=task/none,
#   SelectType=select/cons_tres with CR_Core; no GRES.
#
# Environment:
#   QUADNN_SLURM_DIR   state, logs and the MariaDB datadir (default /var/tmp/quadnn-slurm)
#   QUADNN_SLURM_CPUS  CPUs the node advertises (default: the real count, at least 4). The tests'
#                      jobs sleep, so advertising more CPUs than there are is harmless and lets
#                      several run at once (SlurmdParameters=config_overrides).
set -u
STATE=${QUADNN_SLURM_DIR:-/var/tmp/quadnn-slurm}
CLUSTER=quadnn
PACKAGES="slurmctld slurmd slurm-client munge slurmdbd mariadb-server"
CONF_DIR=/etc/slurm
DB_SOCKET=/run/mysqld/mysqld.sock

cannot() { echo "SLURM cannot be brought up: $*" >&2; exit 3; }
fail() { echo "SLURM bring-up failed: $*" >&2; [ -n "${2:-}" ] && tail -n 20 "$2" >&2; exit 1; }
say() { [ -n "${QUADNN_SLURM_QUIET:-}" ] || echo "slurm-up: $*"; }

# Already up and answering (e.g. a cluster someone else runs)? Then there is nothing to do,
# root or not.
node_ready() { timeout 10 sinfo -h -N -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated|completing)'; }

if [ "$(id -u)" != 0 ]; then
  if command -v sinfo >/dev/null && node_ready; then say "already up (not root, not touching it)"; exit 0; fi
  cannot "not root (needed to install packages and start daemons)"
fi

mkdir -p "$STATE/log"

# --- packages -------------------------------------------------------------------------------
missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  command -v apt-get >/dev/null || cannot "no apt-get to install:$missing"
  say "installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  # policy-rc.d keeps the packages' postinst from starting daemons we would not have recorded.
  own_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; own_policy=1
  fi
  ok=1
  apt-get update -qq >"$STATE/log/apt.log" 2>&1 \
    && apt-get install -y -qq --no-install-recommends $PACKAGES >>"$STATE/log/apt.log" 2>&1 || ok=0
  [ $own_policy = 0 ] || rm -f /usr/sbin/policy-rc.d
  [ $ok = 1 ] || cannot "apt-get install failed (see $STATE/log/apt.log)"
fi

mkdir -p "$STATE"/ctld "$STATE"/slurmd "$CONF_DIR"
STARTED="$STATE/started"
touch "$STARTED"

# record NAME PID: remember that this script started the daemon NAME whose pid is PID
record() { { grep -v "^$1 " "$STARTED"; echo "$1 $2"; } > "$STARTED.tmp"; mv "$STARTED.tmp" "$STARTED"; }
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
pid_of_file() { [ -s "$1" ] && cat "$1"; }
wait_for() {  # wait_for SECONDS CMD...: poll CMD until it succeeds
  local n=$(( $1 * 10 )); shift
  while ! "$@" >/dev/null 2>&1; do n=$((n - 1)); [ $n -gt 0 ] || return 1; sleep 0.1; done
}

# --- munge ----------------------------------------------------------------------------------
if [ ! -s /etc/munge/munge.key ]; then
  if command -v mungekey >/dev/null; then mungekey --create --force >/dev/null 2>&1
  else dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 2>/dev/null; fi
  chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
fi
munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
if ! munge_ok; then
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  rm -f /run/munge/munged.pid
  runuser -u munge -- /usr/sbin/munged --force || fail "munged did not start" /var/log/munge/munged.log
  wait_for 10 munge_ok || fail "munged does not answer" /var/log/munge/munged.log
  record munged "$(cat /run/munge/munged.pid)"
  say "started munged"
fi

# --- mariadb (own datadir under $STATE, no TCP) ------------------------------------------------
DATADIR="$STATE/mysql"
db_ok() { mariadb-admin --socket="$DB_SOCKET" ping >/dev/null 2>&1; }
if ! db_ok; then
  if [ ! -d "$DATADIR/mysql" ]; then
    mkdir -p "$DATADIR"; chown mysql:mysql "$DATADIR"
    mariadb-install-db --user=mysql --datadir="$DATADIR" --skip-test-db >"$STATE/log/mariadb-install.log" 2>&1 \
      || fail "mariadb-install-db failed" "$STATE/log/mariadb-install.log"
  fi
  mkdir -p /run/mysqld; chown mysql:mysql /run/mysqld
  rm -f "$DATADIR/mariadbd.pid"
  # --no-defaults: Debian's my.cnf would point at /var/lib/mysql; ours is self-contained.
  setsid mariadbd --no-defaults --user=mysql --datadir="$DATADIR" --socket="$DB_SOCKET" \
    --pid-file="$DATADIR/mariadbd.pid" --skip-networking --log-error="$STATE/log/mariadb.log" \
    --innodb-buffer-pool-size=64M --innodb-lock-wait-timeout=900 </dev/null >/dev/null 2>&1 &
  wait_for 30 db_ok || fail "mariadbd does not answer" "$STATE/log/mariadb.log"
  wait_for 5 test -s "$DATADIR/mariadbd.pid"
  record mariadbd "$(cat "$DATADIR/mariadbd.pid")"
  say "started mariadbd"
fi

# --- configuration ----------------------------------------------------------------------------
HOST=$(hostname -s)
NODE_LINE=$(slurmd -C 2>/dev/null | grep '^NodeName=') || fail "slurmd -C printed no node line"
REAL_CPUS=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$NODE_LINE")
MEM=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$NODE_LINE")
CPUS=${QUADNN_SLURM_CPUS:-$(( REAL_CPUS > 4 ? REAL_CPUS : 4 ))}
if [ "$CPUS" = "$REAL_CPUS" ]; then
  NODE_LINE="$NODE_LINE NodeAddr=127.0.0.1 State=UNKNOWN"
else
  # Topology from slurmd -C would contradict CPUs; a flat CPUs= count with config_overrides does not.
  NODE_LINE="NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM State=UNKNOWN"
fi

write_if_changed() {  # write_if_changed FILE MODE < content; returns 0 when it changed
  local tmp; tmp=$(mktemp); cat > "$tmp"
  if [ -f "$1" ] && cmp -s "$tmp" "$1"; then rm -f "$tmp"; return 1; fi
  install -m "$2" "$tmp" "$1"; rm -f "$tmp"; return 0
}

conf_changed=0
write_if_changed "$CONF_DIR/slurm.conf" 644 <<EOF && conf_changed=1
# Written by tools/slurm/up.sh: a single-node test cluster.
ClusterName=$CLUSTER
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# A requeued job waits cred_expire seconds before it may start again (default 120 s); the
# scheduler passes every 2 s instead of 60 s. Both keep requeue tests short.
AuthInfo=cred_expire=10
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/slurmd
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
MailProg=/bin/true
SwitchType=switch/none
SlurmdParameters=config_overrides
ReturnToService=2
JobRequeue=1
MinJobAge=10
KillWait=5
InactiveLimit=0
OverTimeLimit=0
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2,sched_min_interval=100000
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
$NODE_LINE
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF

write_if_changed "$CONF_DIR/slurmdbd.conf" 600 <<EOF && conf_changed=1
# Written by tools/slurm/up.sh
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=root
StorageLoc=slurm_acct_db
PidFile=$STATE/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
DebugLevel=info
EOF

# --- slurmdbd, cluster, slurmctld, slurmd -------------------------------------------------------
running() { alive "$(pid_of_file "$1")"; }
restart_if_changed() {  # a daemon started by us with a stale config is restarted
  local name=$1 pidfile=$2
  if [ $conf_changed = 1 ] && running "$pidfile"; then
    local pid; pid=$(cat "$pidfile")
    say "restarting $name (configuration changed)"
    kill "$pid"; wait_for 10 bash -c "! kill -0 $pid 2>/dev/null"
  fi
}

restart_if_changed slurmdbd "$STATE/slurmdbd.pid"
if ! running "$STATE/slurmdbd.pid"; then
  rm -f "$STATE/slurmdbd.pid"
  slurmdbd || fail "slurmdbd did not start" "$STATE/log/slurmdbd.log"
  wait_for 20 test -s "$STATE/slurmdbd.pid" || fail "slurmdbd wrote no pid file" "$STATE/log/slurmdbd.log"
  record slurmdbd "$(cat "$STATE/slurmdbd.pid")"
  say "started slurmdbd"
fi
wait_for 30 sacctmgr -n list cluster || fail "slurmdbd does not answer" "$STATE/log/slurmdbd.log"
if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
  sacctmgr -i add cluster "$CLUSTER" >/dev/null || fail "sacctmgr add cluster failed"
fi

restart_if_changed slurmctld "$STATE/slurmctld.pid"
if ! running "$STATE/slurmctld.pid"; then
  rm -f "$STATE/slurmctld.pid"
  slurmctld || fail "slurmctld did not start" "$STATE/log/slurmctld.log"
  wait_for 20 scontrol ping || fail "slurmctld does not answer" "$STATE/log/slurmctld.log"
  record slurmctld "$(cat "$STATE/slurmctld.pid")"
  say "started slurmctld"
fi

restart_if_changed slurmd "$STATE/slurmd.pid"
if ! running "$STATE/slurmd.pid"; then
  rm -f "$STATE/slurmd.pid"
  slurmd || fail "slurmd did not start" "$STATE/log/slurmd.log"
  wait_for 10 test -s "$STATE/slurmd.pid" || fail "slurmd wrote no pid file" "$STATE/log/slurmd.log"
  record slurmd "$(cat "$STATE/slurmd.pid")"
  say "started slurmd"
fi

# A node left down/drained by an earlier run (e.g. killed mid-job) is put back into service.
if ! wait_for 20 node_ready; then
  scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1
  wait_for 20 node_ready || fail "node $HOST is not idle: $(sinfo -h -N -o '%T %E')" "$STATE/log/slurmd.log"
fi
say "up: $(sinfo -h -N -o '%N %T %c CPUs') (state in $STATE)"
