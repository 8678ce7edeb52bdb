#!/bin/bash
# The Slurm array recipe of docs/batch.md, as tests/slurm/run_slurm_test.sh submits it: one shard per array
# task, each task writing its own manifest, resumable with --skip-existing. (No --mem: the test's node
# declares no memory. --time bounds a task that would hang: Slurm ends it.)
#   usage: sbatch --array=1-N array_job.sh ATTNMAP IN OUT N [more attnmap render options]
#SBATCH --job-name=attnmap-test
#SBATCH --cpus-per-task=1
#SBATCH --time=00:04:00
set -euo pipefail
bin=$1 in=$2 out=$3 n=$4
shift 4
srun "$bin" render "$in" -o "$out" --shard "${SLURM_ARRAY_TASK_ID}/$n" \
     --skip-existing --manifest "$out/manifest-${SLURM_ARRAY_TASK_ID}.jsonl" "$@"
