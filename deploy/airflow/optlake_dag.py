"""Airflow DAG: one optlake snapshot of the venue every 5 minutes.

Copy this file into the DAGs folder. optlake must be on the workers' PATH
with its config at /etc/optlake/optlake.yaml (deploy/optlake.example.yaml).
Secrets come from Airflow Variables whose names Airflow masks in logs
(they contain "secret"):

    airflow variables set optlake_header_secret "Authorization: Bearer ..."
    airflow variables set optlake_clickhouse_dsn_secret "clickhouse://optlake:...@ch:9000/optlake"

The task's XCom (return_value) is the run summary: the JSON that
`optlake run --summary-json` writes, on one line (rows, rejects, bytes,
status and duration per endpoint), for downstream tasks to read. The run
exits non-zero when the snapshot failed; Airflow retries it (a retry takes a
new snapshot: the venue as it is then).

Without optlake on the workers, run the container instead with the
KubernetesPodOperator (arguments ["run", "--config", ...], the same env from
a Kubernetes Secret, do_xcom_push=True and --summary-json
/airflow/xcom/return.json) -- see deploy/kubernetes/cronjob.yaml for the pod.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow import DAG

try:  # Airflow 3 (standard provider)
    from airflow.providers.standard.operators.bash import BashOperator
except ImportError:  # Airflow 2
    from airflow.operators.bash import BashOperator

# The summary goes to a temp file, optlake's own stdout line to stderr (the
# task log), and the summary, compacted to one line, is the last line on
# stdout, which BashOperator pushes to XCom. The exit code is optlake's.
SNAPSHOT = r"""
set -u
summary="$(mktemp)"
trap 'rm -f "$summary"' EXIT
optlake run --config /etc/optlake/optlake.yaml --summary-json "$summary" >&2
rc=$?
if [ -s "$summary" ]; then
  python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1])), separators=(",", ":")))' "$summary"
fi
exit "$rc"
"""

with DAG(
    dag_id="optlake_snapshot",
    description="Snapshot the options venue into Parquet / ClickHouse",
    schedule="*/5 * * * *",
    start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
    catchup=False,  # a snapshot is of "now": never backfill missed intervals
    max_active_runs=1,  # never two snapshots at once
    dagrun_timeout=timedelta(minutes=10),
    default_args={
        "owner": "data",
        "retries": 2,
        "retry_delay": timedelta(seconds=30),
        "execution_timeout": timedelta(minutes=5),
    },
    tags=["optlake"],
) as dag:
    snapshot = BashOperator(
        task_id="snapshot",
        bash_command=SNAPSHOT,
        env={
            "OPTLAKE_HEADER": "{{ var.value.optlake_header_secret }}",
            "OPTLAKE_CLICKHOUSE_DSN": "{{ var.value.optlake_clickhouse_dsn_secret }}",
            "OPTLAKE_DEADLINE": "4m",
        },
        append_env=True,  # keep PATH and the rest of the worker's environment
        do_xcom_push=True,
    )
