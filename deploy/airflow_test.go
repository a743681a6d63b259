package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
)

const dagFile = "airflow/optlake_dag.py"

// python3 returns the interpreter, or skips the test (fails it under CI,
// where python3 is part of the machine).
func python3(t *testing.T) string {
	t.Helper()
	return testenv.Command(t, "apt-get install python3", "python3")
}

// The DAG file is valid Python (parsed, not imported: no Airflow here).
func TestAirflowDAGSyntax(t *testing.T) {
	py := python3(t)
	out, err := exec.Command(py, "-c", "import ast,sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])", dagFile).CombinedOutput()
	if err != nil {
		t.Fatalf("python3 ast.parse %s: %v\n%s", dagFile, err, out)
	}
}

// stubAirflow is just enough of Airflow for the DAG file to run: DAG as a
// context manager and BashOperator, both recording their arguments.
// variant "2" has only airflow.operators.bash, "3" only the standard
// provider's module, so both import paths of the file are exercised.
const stubAirflow = `
import json, os, sys, runpy, datetime

variant, dag_file, stubs = sys.argv[1], sys.argv[2], sys.argv[3]
RECORD = []

class DAG:
    current = None
    def __init__(self, dag_id=None, **kw):
        if dag_id is None:
            raise TypeError("DAG needs a dag_id")
        self.kw = dict(kw, dag_id=dag_id)
        self.tasks = []
        RECORD.append(self)
    def __enter__(self):
        DAG.current = self
        return self
    def __exit__(self, *exc):
        DAG.current = None

class BashOperator:
    def __init__(self, task_id=None, bash_command=None, **kw):
        if DAG.current is None:
            raise RuntimeError("BashOperator outside a DAG")
        if task_id is None or bash_command is None:
            raise TypeError("BashOperator needs task_id and bash_command")
        DAG.current.tasks.append(dict(kw, task_id=task_id, bash_command=bash_command, operator="BashOperator"))

def write(path, text=""):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)

write(os.path.join(stubs, "airflow", "__init__.py"))
if variant == "2":
    write(os.path.join(stubs, "airflow", "operators", "__init__.py"))
    write(os.path.join(stubs, "airflow", "operators", "bash.py"))
else:
    for p in ("providers", "providers/standard", "providers/standard/operators"):
        write(os.path.join(stubs, "airflow", p, "__init__.py"))
    write(os.path.join(stubs, "airflow", "providers", "standard", "operators", "bash.py"))
sys.path.insert(0, stubs)
import airflow
airflow.DAG = DAG
if variant == "2":
    import airflow.operators.bash as bash
else:
    import airflow.providers.standard.operators.bash as bash
bash.BashOperator = BashOperator

runpy.run_path(dag_file, run_name="__dag__")

def plain(v):
    if isinstance(v, datetime.timedelta):
        return v.total_seconds()
    if isinstance(v, datetime.datetime):
        return v.isoformat()
    raise TypeError(repr(v))

print(json.dumps([dict(d.kw, tasks=d.tasks) for d in RECORD], default=plain))
`

type dagRecord struct {
	DagID         string         `json:"dag_id"`
	Schedule      string         `json:"schedule"`
	StartDate     string         `json:"start_date"`
	Catchup       *bool          `json:"catchup"`
	MaxActiveRuns int            `json:"max_active_runs"`
	DefaultArgs   map[string]any `json:"default_args"`
	Tasks         []struct {
		TaskID      string            `json:"task_id"`
		BashCommand string            `json:"bash_command"`
		Env         map[string]string `json:"env"`
		AppendEnv   bool              `json:"append_env"`
		DoXcomPush  *bool             `json:"do_xcom_push"`
		Retries     *float64          `json:"retries"`
	} `json:"tasks"`
}

// The DAG, run against stand-ins for Airflow 2 and 3: every 5 minutes, one
// run at a time, no catch-up, retries, and one BashOperator that runs
// `optlake run` with real flags and OPTLAKE_* variables and pushes the
// summary to XCom.
func TestAirflowDAG(t *testing.T) {
	py := python3(t)
	for _, variant := range []string{"2", "3"} {
		t.Run("airflow"+variant, func(t *testing.T) {
			out, err := exec.Command(py, "-c", stubAirflow, variant, dagFile, t.TempDir()).Output()
			if err != nil {
				if ee, ok := err.(*exec.ExitError); ok {
					t.Fatalf("running the DAG file: %v\n%s", err, ee.Stderr)
				}
				t.Fatal(err)
			}
			var dags []dagRecord
			if err := json.Unmarshal(out, &dags); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if len(dags) != 1 {
				t.Fatalf("%d DAGs, want 1", len(dags))
			}
			checkDAG(t, dags[0])
		})
	}
}

func checkDAG(t *testing.T, d dagRecord) {
	sched, err := parseCron(d.Schedule)
	if err != nil {
		t.Errorf("schedule: %v", err)
	} else if !sched.everyFiveMinutes() {
		t.Errorf("schedule %q: want every 5 minutes", d.Schedule)
	}
	if d.MaxActiveRuns != 1 {
		t.Errorf("max_active_runs=%d, want 1", d.MaxActiveRuns)
	}
	if d.Catchup == nil || *d.Catchup {
		t.Error("catchup is not False: Airflow would backfill snapshots of moments long gone")
	}
	if d.StartDate == "" || !strings.HasSuffix(d.StartDate, "+00:00") {
		t.Errorf("start_date %q: want a UTC datetime", d.StartDate)
	}
	if len(d.Tasks) != 1 {
		t.Fatalf("%d tasks, want 1", len(d.Tasks))
	}
	task := d.Tasks[0]
	retries, _ := d.DefaultArgs["retries"].(float64)
	if task.Retries != nil {
		retries = *task.Retries
	}
	if retries < 1 {
		t.Error("no retries")
	}
	if task.DoXcomPush == nil || !*task.DoXcomPush {
		t.Error("do_xcom_push is not True")
	}
	vars := runEnvVars()
	for name := range task.Env {
		if _, ok := vars[name]; !ok {
			t.Errorf("env %s: not a variable of optlake run", name)
		}
	}
	if len(task.Env) > 0 && !task.AppendEnv {
		t.Error("env without append_env=True replaces the worker's environment (PATH)")
	}
	calls := shellRunArgs(task.BashCommand)
	if len(calls) != 1 {
		t.Fatalf("bash_command: %d `optlake run` calls, want 1:\n%s", len(calls), task.BashCommand)
	}
	vals := checkRunArgs(t, "bash_command", calls[0])
	if len(vals["summary-json"]) == 0 {
		t.Error("bash_command: no --summary-json")
	}
	if _, ok := vals["every"]; ok {
		t.Error("bash_command: --every in an Airflow task")
	}
	if strings.Contains(task.BashCommand, "{{") || strings.Contains(task.BashCommand, "{%") {
		t.Log("bash_command holds Jinja: the behaviour test below runs it unrendered")
	}
	checkBashCommand(t, task.BashCommand)
}

// checkBashCommand runs the task's command with a stand-in optlake: the
// last line on stdout (what BashOperator pushes to XCom) is the summary as
// one line of JSON, optlake's own stdout is kept out of it, and the exit code
// is optlake's.
func checkBashCommand(t *testing.T, command string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Log("no bash: the command was not run")
		return
	}
	if out, err := exec.Command(bash, "-n", "-c", command).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v: %s", err, out)
	}
	dir := t.TempDir()
	stub := `#!/bin/sh
summary=""
while [ $# -gt 0 ]; do
  case "$1" in
    --summary-json) summary="$2"; shift ;;
    --summary-json=*) summary="${1#*=}" ;;
  esac
  shift
done
echo "run 0193 ok in 1s — instruments ok: 3000 rows"
[ -n "$summary" ] && printf '{\n  "run_id": "0193",\n  "ok": %s,\n  "endpoints": []\n}\n' "$STUB_OK" > "$summary"
exit "$STUB_RC"
`
	if err := os.WriteFile(filepath.Join(dir, "optlake"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rc int
		ok string
	}{{0, "true"}, {1, "false"}} {
		c := exec.Command(bash, "-c", command)
		c.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "STUB_RC="+strconv.Itoa(tc.rc), "STUB_OK="+tc.ok, "TMPDIR="+dir)
		out, err := c.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.rc {
			t.Errorf("optlake exited %d, the task %d", tc.rc, code)
		}
		lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		last := lines[len(lines)-1]
		var sum struct {
			RunID string `json:"run_id"`
			OK    bool   `json:"ok"`
		}
		if err := json.Unmarshal([]byte(last), &sum); err != nil || sum.RunID != "0193" || (sum.OK != (tc.ok == "true")) {
			t.Errorf("rc %d: XCom (last stdout line) %q: want the summary as one line of JSON (%v)", tc.rc, last, err)
		}
		if strings.Contains(string(out), "instruments ok") {
			t.Errorf("rc %d: optlake's own stdout is on the task's stdout: %q", tc.rc, out)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "tmp*")); len(left) > 0 {
			t.Errorf("rc %d: temp files left: %v", tc.rc, left)
		}
	}
}
