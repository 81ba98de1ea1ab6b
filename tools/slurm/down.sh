#!/usr/bin/env bash
# Stop the daemons that tools/slurm/up.sh started (recorded in $QUADNN_SLURM_DIR/started), and
# only those: a daemon that was already running before up.sh is left alone. State, logs and the
# accounting database stay in $QUADNN_SLURM_DIR (remove that directory to start from nothing;
# SLURM then numbers jobs from 1 again).
set -u
STATE=${QUADNN_SLURM_DIR:-/var/tmp/quadnn-slurm}
STARTED="$STATE/started"
[ -s "$STARTED" ] || { echo "slurm-down: nothing recorded in $STARTED"; exit 0; }

# Newest first: slurmd, slurmctld, slurmdbd, then mariadbd and munged they depend on.
tac "$STARTED" | while read -r name pid; do
  [ -n "$pid" ] || continue
  comm=$(cat "/proc/$pid/comm" 2>/dev/null) || { echo "slurm-down: $name ($pid) already gone"; continue; }
  # A recycled pid belongs to someone else: compare the process name before killing.
  if [ "$comm" != "$name" ]; then echo "slurm-down: pid $pid is now '$comm', not $name; left alone"; continue; fi
  kill "$pid"
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; echo "slurm-down: $name ($pid) killed"
  else echo "slurm-down: stopped $name ($pid)"; fi
done
rm -f "$STARTED"
