#!/usr/bin/env bash
# ctest Slurm.ArrayJobShardsEqualOneRun: docs/batch.md's Slurm array recipe on a real Slurm (Debian's
# slurm-wlm + munge), started on 127.0.0.1 by this script and stopped again on every exit path.
#   1. A private cluster in a fresh temporary folder: its own munge key and socket (munged), its own
#      slurm.conf (SLURM_CONF) with free ports chosen now, state and spool folders, no cgroups, no
#      accounting, no systemd; one node "attnmap0" of 4 CPUs (whatever the machine has:
#      SlurmdParameters=config_overrides) so the 4 tasks run at once, as on 4 machines.
#   2. A folder of 30 images (data/composites, data/'s photos in a subfolder, one large generated image);
#      one single-machine run of it (REF, with a manifest).
#   3. sbatch --array=1-4 of tests/slurm/array_job.sh (the recipe: srun attnmap render --shard K/4
#      --skip-existing --manifest OUT/manifest-K.jsonl): every task completes; OUT equals REF byte for byte
#      (every file but the manifests); the 4 manifests hold one row per input, each once, in their shard,
#      with the single run's statistics (tests/slurm/check_manifests.py).
#   4. The array again over a fresh OUT2 with --jobs 1; the task holding the large image is cancelled
#      (scancel: SIGTERM, then SIGKILL) while it renders that image, i.e. after some of its outputs were
#      written and before the rest; then the same array is resubmitted as the recipe says: OUT2 equals REF,
#      every image written before the kill is skipped (the summary lines), its row in the new manifests
#      carried from the earlier one ("done", "carried": true) or, when the kill came before its row was
#      written, "skipped".
# Not as root: exit 77 (skipped; slurmd launches jobs as root here). Every wait is bounded; the whole test
# takes well under a minute (docs/slurm.md). ATTNMAP_SLURM_KEEP=1 keeps the temporary folder;
# ATTNMAP_SLURM_WATCHDOG=S moves the watchdog (below) from 200 s.
#   usage: run_slurm_test.sh SOURCE_DIR ATTNMAP_BINARY
set -euo pipefail
src="$(cd "$1" && pwd)"
bin="$(realpath "$2")"
here="$src/tests/slurm"
check="/usr/bin/python3 $here/check_manifests.py"
t0=$SECONDS
say() { printf '[slurm %3ds] %s\n' $((SECONDS - t0)) "$*"; }
fail() { say "FAILED: $*"; exit 1; }

export PATH="$PATH:/usr/sbin:/sbin"  # munged, slurmctld, slurmd
if [ "$(id -u)" != 0 ]; then
  echo "skipped: this test starts slurmd, which runs the jobs' processes as root here; run it as root"
  exit 77
fi
for c in munged munge slurmctld slurmd sbatch squeue sinfo scancel scontrol srun /usr/bin/python3; do
  command -v "$c" >/dev/null || fail "$c not found (bash tools/deps.sh test installs slurm-wlm, munge, python3)"
done

# Settings inherited from outside must not steer this cluster's commands (a CI that itself runs inside a
# Slurm job) nor the byte-for-byte comparison (OPENBLAS_NUM_THREADS hands the thread count to OpenBLAS,
# whose rounding then depends on it: docs/batch.md).
for v in $(compgen -e); do
  case "$v" in
    SLURM_* | SBATCH_* | SRUN_* | SALLOC_* | SQUEUE_* | SINFO_* | SCONTROL_* | SCANCEL_*) unset "$v" ;;
    OPENBLAS_NUM_THREADS | OMP_NUM_THREADS | GOTO_NUM_THREADS) unset "$v" ;;
  esac
done

T="" MARK="" munged_pid="" ctld_pid="" slurmd_pid="" watchdog_pid=""

# Ends a process started here: SIGTERM, up to $2 seconds, then SIGKILL.
stop_pid() {
  local pid=$1 waited=0
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt $(($2 * 10)) ]; do sleep 0.1; waited=$((waited + 1)); done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# Pids of the processes whose environment holds $MARK (slurmstepd, job scripts, srun, attnmap): this run's.
marked_pids() {
  local e
  for e in $(grep -lszxF "$MARK" /proc/[0-9]*/environ); do
    e="${e#/proc/}"
    echo "${e%/environ}"
  done
}

# The marked processes but the daemons (slurmctld, its slurmscriptd, slurmd): the jobs' ones. They are
# also added to $T/seen, so that the teardown can wait for them to be gone from the process table even
# after they stopped showing the marker (a process that is exiting has no environment left).
job_pids() {
  local p c
  for p in $(marked_pids); do
    c="$(cat "/proc/$p/comm" 2>/dev/null)" || continue
    case "$c" in slurmctld | slurmscriptd | slurmd) ;; *) echo "$p" ;; esac
  done | tee -a "$T/seen"
}

print_logs() {
  say "cluster state and logs ($T)"
  timeout 10 squeue 2>&1 || true
  timeout 10 sinfo -N -l 2>&1 || true
  local f
  for f in "$T"/log/* "$T"/jobs/*.out; do
    [ -f "$f" ] || continue
    echo "----- ${f#"$T"/} (last 40 lines)"
    tail -n 40 "$f"
  done
}

cleanup() {
  local rc=$? end
  trap - EXIT
  trap ':' INT TERM HUP  # the cleanup is bounded; it is not cut short (':', not '': children keep SIGTERM)
  set +eu
  [ -z "$watchdog_pid" ] || { kill -TERM "$watchdog_pid" 2>/dev/null; wait "$watchdog_pid" 2>/dev/null; }
  if [ -n "$ctld_pid" ] && kill -0 "$ctld_pid" 2>/dev/null; then
    timeout 10 scancel --quiet --user=root 2>/dev/null
    end=$((SECONDS + 20))
    while [ $SECONDS -lt $end ] && [ -n "$(timeout 5 squeue -h -o %i 2>/dev/null)" ]; do sleep 0.2; done
  fi
  # The jobs' slurmstepd processes end a little after their job leaves the queue, talking to slurmd: let
  # them (at most 15 s) before slurmd stops.
  if [ -n "$MARK" ]; then
    end=$((SECONDS + 15))
    while [ $SECONDS -lt $end ] && [ -n "$(job_pids)" ]; do
      sleep 0.2
    done
  fi
  [ "$rc" = 0 ] || print_logs
  say "stopping slurmd, slurmctld, munged"
  stop_pid "$slurmd_pid" 10
  stop_pid "$ctld_pid" 10
  local p left
  [ -z "$MARK" ] || left="$(marked_pids)"
  for p in $left; do kill -KILL "$p" 2>/dev/null; done
  [ -z "$left" ] || say "killed leftover processes of this run: $(echo $left)"
  if [ -f "$T/seen" ]; then  # ended, but perhaps not yet reaped: at most 5 s
    end=$((SECONDS + 5))
    for p in $(sort -u "$T/seen"); do
      while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.05; done
    done
  fi
  stop_pid "$munged_pid" 5
  if [ "${ATTNMAP_SLURM_KEEP:-0}" = 1 ]; then say "kept $T"; elif [ -n "$T" ]; then rm -rf "$T"; fi
  say "exit $rc"
  exit "$rc"
}
# /tmp, not TMPDIR: munged and slurmd put unix sockets in it (108-byte path limit); munged wants the
# folders above its socket not writable by others (sticky /tmp is fine).
T="$(mktemp -d /tmp/attnmap-slurm.XXXXXX)"
trap cleanup EXIT
trap 'exit 143' INT TERM HUP
chmod 0755 "$T"
mkdir -p "$T/munge" "$T/state" "$T/spool" "$T/log" "$T/jobs"
cd "$T"  # the jobs' working folder too (sbatch's default)
export SLURM_CONF="$T/slurm.conf"
MARK="ATTNMAP_SLURM_TEST=$T"  # in the environment of the Slurm daemons and jobs started here, of nothing else
# The watchdog: SIGTERM to this script after 200 s, so that the cleanup above runs well within ctest's
# TIMEOUT (290 s; a ctest timeout kills without a trap). It waits in bash's own `read -t` on a FIFO that
# nobody writes, so killing it leaves no child behind.
mkfifo "$T/watchdog"
wd="${ATTNMAP_SLURM_WATCHDOG:-200}"
( exec 3<>"$T/watchdog"; read -r -t "$wd" -u 3 || { echo "[slurm] watchdog: $wd s, stopping"; kill -TERM $$; } ) &
watchdog_pid=$!

# Two TCP ports no socket of this machine uses now (/proc/net/tcp*), below the ephemeral range.
free_ports() {
  local used=" " h p out=()
  for h in $(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk 'NR > 0 && $2 ~ /:/ {sub(/.*:/, "", $2); print $2}'); do
    used+="$((16#$h)) "
  done
  while [ ${#out[@]} -lt 2 ]; do
    p=$((20000 + RANDOM % 12000))
    case "$used" in *" $p "*) continue ;; esac
    used+="$p "
    out+=("$p")
  done
  echo "${out[@]}"
}

start_munge() {
  dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$T/munge/munge.key"
  munged --foreground --force --socket="$T/munge/socket" --key-file="$T/munge/munge.key" \
      --pid-file="$T/munge/munged.pid" --log-file="$T/log/munged.log" --seed-file="$T/munge/munged.seed" \
      >"$T/log/munged.out" 2>&1 &
  munged_pid=$!
  local end=$((SECONDS + 20))
  while [ $SECONDS -lt $end ]; do
    if munge -S "$T/munge/socket" -n 2>/dev/null | unmunge -S "$T/munge/socket" >/dev/null 2>&1; then return 0; fi
    kill -0 "$munged_pid" 2>/dev/null || break
    sleep 0.1
  done
  fail "munged did not start"
}

write_conf() {
  local host
  host="$(uname -n)"
  host="${host%%.*}"  # what slurmctld compares SlurmctldHost with
  cat >"$SLURM_CONF" <<EOF
# attnmap test cluster (tests/slurm/run_slurm_test.sh); everything under $T
ClusterName=attnmaptest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$1
SlurmdPort=$2
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/socket
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$T/plugstack.conf
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmdParameters=config_overrides
MessageTimeout=20
KillWait=5
MinJobAge=600
NodeName=attnmap0 NodeAddr=127.0.0.1 NodeHostname=$host CPUs=4 State=UNKNOWN
PartitionName=test Nodes=attnmap0 Default=YES MaxTime=INFINITE State=UP
EOF
  : >"$T/plugstack.conf"
}

# slurmctld, then slurmd; returns 1 (daemons stopped again) when the controller does not answer within
# 40 s or the node is not idle 40 s later (a daemon that cannot bind its port exits at once).
start_slurm() {
  local end=$((SECONDS + 40))
  env "$MARK" slurmctld -D -f "$SLURM_CONF" >>"$T/log/slurmctld.out" 2>&1 &
  ctld_pid=$!
  until [[ "$(timeout 5 scontrol ping 2>/dev/null)" == *"is UP"* ]]; do
    kill -0 "$ctld_pid" 2>/dev/null && [ $SECONDS -lt $end ] || break
    sleep 0.3
  done
  env "$MARK" slurmd -D -N attnmap0 -f "$SLURM_CONF" >>"$T/log/slurmd.out" 2>&1 &
  slurmd_pid=$!
  end=$((SECONDS + 40))
  while [ $SECONDS -lt $end ]; do
    [ "$(timeout 5 sinfo -h -N -n attnmap0 -o %T 2>/dev/null)" = idle ] && return 0
    kill -0 "$ctld_pid" 2>/dev/null && kill -0 "$slurmd_pid" 2>/dev/null || break
    sleep 0.3
  done
  stop_pid "$slurmd_pid" 10
  stop_pid "$ctld_pid" 10
  slurmd_pid="" ctld_pid=""
  return 1
}

# Submits the array over OUT ($1) with more attnmap options ($2...); prints the job id.
submit() {
  local out=$1
  shift
  env "$MARK" sbatch --parsable --array=1-4 --output="$T/jobs/%A_%a.out" \
      "$here/array_job.sh" "$bin" "$T/in" "$out" 4 "$@"
}

# Waits (at most $2 seconds) until no task of job $1 is pending, running or completing.
wait_job() {
  local end=$((SECONDS + $2))
  while [ -n "$(timeout 10 squeue -h -j "$1" -o %i 2>/dev/null)" ] || ! timeout 10 squeue -h -j "$1" >/dev/null 2>&1; do
    [ $SECONDS -lt "$end" ] || fail "job $1 still queued or running after $2 s"
    job_pids >/dev/null
    sleep 0.3
  done
  job_pids >/dev/null
}

# "TASK STATE EXITCODE" lines of job $1, by task.
task_states() {
  timeout 10 scontrol -o show job "$1" |
    sed -n 's/.* ArrayTaskId=\([0-9]*\) .* JobState=\([A-Z_]*\) .* ExitCode=\([0-9:]*\) .*/\1 \2 \3/p' | sort -n
}

expect_states() {  # JOB "1 COMPLETED 0:0;2 ..." - the tasks' final states
  local got
  got="$(task_states "$1" | tr '\n' ';')"
  [ "$got" = "$2;" ] || fail "job $1: tasks ended as '$got', expected '$2;'"
}

make_inputs() {
  mkdir -p "$T/in/photos"
  cp "$src"/data/composites/*.png "$T/in/"
  cp "$src"/data/*.png "$src"/data/*.jpg "$T/in/photos/"
  # A large image (3000x2000, ~1 s to render here) so that a kill lands while it renders: a binary PPM of
  # a fixed byte pattern, the same bytes on every run.
  { printf 'P6\n3000 2000\n255\n'; yes 'attnmap slurm test 0123456789 ' | head -c 18000000 || true; } >"$T/in/0010_big.ppm"
  [ "$(stat -c %s "$T/in/0010_big.ppm")" = 18000017 ] || fail "could not write the large image"
}

# ---- 1. the cluster
say "temporary folder $T; $(slurmctld -V), $(munged -V 2>&1 | head -n 1)"
start_munge
started=0
for attempt in 1 2 3; do
  read -r ctld_port slurmd_port <<<"$(free_ports)"
  write_conf "$ctld_port" "$slurmd_port"
  if start_slurm; then started=1; break; fi
  rm -rf "${T:?}/state" && mkdir "$T/state"
  say "attempt $attempt: the node did not come up idle (ports $ctld_port, $slurmd_port); retrying"
  tail -n 5 "$T/log/slurmctld.out" "$T/log/slurmd.out" || true
done
[ "$started" = 1 ] || fail "slurmctld/slurmd did not start"
say "slurmctld on 127.0.0.1:$ctld_port, slurmd on :$slurmd_port; node attnmap0 idle"

# ---- 2. the inputs and the single-machine run
make_inputs
n_inputs="$(find "$T/in" -type f | wc -l)"
"$bin" render "$T/in" -o "$T/ref" --manifest "$T/ref.jsonl" --quiet || fail "the single-machine run failed"
[ "$(find "$T/ref" -type f -name '*.png' | wc -l)" = "$n_inputs" ] || fail "the single run did not write $n_inputs PNGs"
say "single-machine run: $n_inputs images"

# ---- 3. the array job
jid="$(submit "$T/out")"
wait_job "$jid" 120
expect_states "$jid" "1 COMPLETED 0:0;2 COMPLETED 0:0;3 COMPLETED 0:0;4 COMPLETED 0:0"
diff -r --exclude='manifest-*.jsonl' "$T/ref" "$T/out" || fail "the array's outputs differ from the single run's"
$check check --in "$T/in" --ref-manifest "$T/ref.jsonl" --ref-out "$T/ref" --out "$T/out" --shards 4 \
    "$T"/out/manifest-{1,2,3,4}.jsonl || fail "the array's manifests"
say "array job $jid: 4 tasks completed; outputs equal the single run's byte for byte; manifests cover every input once"

# ---- 4. a task cancelled mid-run, then the array resubmitted
# The victim is the task whose shard holds the large image; it is cancelled once the output before that
# image exists, i.e. while (with --jobs 1) it renders the large one.
victim="" before=""
for k in 1 2 3 4; do
  mapfile -t outs < <($check outputs "$T/out/manifest-$k.jsonl")
  for i in "${!outs[@]}"; do
    if [ "${outs[$i]}" = "$T/out/0010_big.png" ]; then
      [ "$i" -ge 1 ] || fail "the large image is the first of shard $k/4; the test needs one before it"
      victim=$k
      victim_outs=("${outs[@]}")
      before="${outs[$((i - 1))]#"$T/out/"}"
      shard_total=${#outs[@]}
    fi
  done
done
[ -n "$victim" ] || fail "no manifest row for the large image"
killed=0
for attempt in 1 2 3; do
  rm -rf "$T/out2"
  jid2="$(submit "$T/out2" --jobs 1)"
  end=$((SECONDS + 90))
  until [ -e "$T/out2/$before" ]; do
    [ $SECONDS -lt "$end" ] || fail "job $jid2: $before not written within 90 s"
    sleep 0.02
  done
  scancel "${jid2}_$victim" || true  # it may have ended already: counted below
  wait_job "$jid2" 60
  written=0
  for o in "${victim_outs[@]}"; do
    if [ -e "$T/out2/${o#"$T/out/"}" ]; then written=$((written + 1)); fi
  done
  say "attempt $attempt: job $jid2 task $victim cancelled with $written of its $shard_total outputs written"
  if [ "$written" -lt "$shard_total" ]; then killed=1; break; fi
  say "the task had finished before the cancel reached it; again"
done
[ "$killed" = 1 ] || fail "task $victim could not be cancelled mid-run in 3 attempts"
[ "$written" -ge 1 ] || fail "no output of task $victim before the cancel"
states="$(task_states "$jid2" | tr '\n' ';')"
for k in 1 2 3 4; do
  want="COMPLETED 0:0"
  [ "$k" = "$victim" ] && want="CANCELLED"
  case ";$states" in *";$k $want"*) ;; *) fail "job $jid2: task $k not $want: $states" ;; esac
done
leftover="$(find "$T/out2" -name '.*')"
[ -z "$leftover" ] || fail "the cancelled task left temporary files: $leftover"
cp "$T/out2/manifest-$victim.jsonl" "$T/killed-manifest.jsonl"
/usr/bin/python3 -c '
import json, sys
for n, line in enumerate(open(sys.argv[1], encoding="utf-8"), 1):
    assert line.endswith("\n"), f"line {n} incomplete"
    json.loads(line)
' "$T/killed-manifest.jsonl" || fail "the cancelled task's manifest has an incomplete line"
(cd "$T/out2" && find . -type f -name '*.png' | sed 's|^\./||' | sort) >"$T/present.txt"
n_present="$(wc -l <"$T/present.txt")"

jid3="$(submit "$T/out2")"
wait_job "$jid3" 120
expect_states "$jid3" "1 COMPLETED 0:0;2 COMPLETED 0:0;3 COMPLETED 0:0;4 COMPLETED 0:0"
diff -r --exclude='manifest-*.jsonl' "$T/ref" "$T/out2" || fail "the resumed array's outputs differ from the single run's"
$check check --in "$T/in" --ref-manifest "$T/ref.jsonl" --ref-out "$T/ref" --out "$T/out2" --shards 4 \
    --skipped "$T/present.txt" "$T"/out2/manifest-{1,2,3,4}.jsonl || fail "the resumed array's manifests"
summary="$(grep -h '^attnmap: .* done, .* failed, .* skipped' "$T/jobs/${jid3}_$victim.out" || true)"
case "$summary" in
  "attnmap: $((shard_total - written)) done, 0 failed, $written skipped, "*) ;;
  *) fail "task $victim of the resubmitted job: summary '$summary', expected $((shard_total - written)) done, $written skipped" ;;
esac
say "resubmitted job $jid3: task $victim skipped its $written written images and rendered $((shard_total - written));" \
    "$n_present outputs were skipped in all; outputs equal the single run's byte for byte"
say "passed"
