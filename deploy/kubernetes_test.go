package deploy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/optlake/optlake/storage"
)

// The subset of the Kubernetes API that the manifest uses. Documents are
// decoded strictly (yaml KnownFields): a misspelt or misplaced field, which
// the API server would drop or reject, fails the test. A field added to the
// manifest must be added here too.

type objectMeta struct {
	Name        string            `yaml:"name"`
	Namespace   string            `yaml:"namespace"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type typeMeta struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
}

type k8sSecret struct {
	typeMeta   `yaml:",inline"`
	Metadata   objectMeta        `yaml:"metadata"`
	Type       string            `yaml:"type"`
	StringData map[string]string `yaml:"stringData"`
	Data       map[string]string `yaml:"data"`
}

type k8sPVC struct {
	typeMeta `yaml:",inline"`
	Metadata objectMeta `yaml:"metadata"`
	Spec     struct {
		AccessModes      []string             `yaml:"accessModes"`
		StorageClassName *string              `yaml:"storageClassName"`
		Resources        resourceRequirements `yaml:"resources"`
	} `yaml:"spec"`
}

type resourceRequirements struct {
	Requests map[string]string `yaml:"requests"`
	Limits   map[string]string `yaml:"limits"`
}

type k8sCronJob struct {
	typeMeta `yaml:",inline"`
	Metadata objectMeta `yaml:"metadata"`
	Spec     struct {
		Schedule                   string  `yaml:"schedule"`
		TimeZone                   *string `yaml:"timeZone"`
		ConcurrencyPolicy          string  `yaml:"concurrencyPolicy"`
		StartingDeadlineSeconds    *int64  `yaml:"startingDeadlineSeconds"`
		Suspend                    *bool   `yaml:"suspend"`
		SuccessfulJobsHistoryLimit *int32  `yaml:"successfulJobsHistoryLimit"`
		FailedJobsHistoryLimit     *int32  `yaml:"failedJobsHistoryLimit"`
		JobTemplate                struct {
			Metadata objectMeta `yaml:"metadata"`
			Spec     struct {
				BackoffLimit            *int32 `yaml:"backoffLimit"`
				ActiveDeadlineSeconds   *int64 `yaml:"activeDeadlineSeconds"`
				TTLSecondsAfterFinished *int32 `yaml:"ttlSecondsAfterFinished"`
				Template                struct {
					Metadata objectMeta `yaml:"metadata"`
					Spec     podSpec    `yaml:"spec"`
				} `yaml:"template"`
			} `yaml:"spec"`
		} `yaml:"jobTemplate"`
	} `yaml:"spec"`
}

type podSpec struct {
	RestartPolicy                string      `yaml:"restartPolicy"`
	ServiceAccountName           string      `yaml:"serviceAccountName"`
	AutomountServiceAccountToken *bool       `yaml:"automountServiceAccountToken"`
	SecurityContext              *podSecCtx  `yaml:"securityContext"`
	Containers                   []container `yaml:"containers"`
	Volumes                      []volume    `yaml:"volumes"`
}

type podSecCtx struct {
	RunAsNonRoot   *bool  `yaml:"runAsNonRoot"`
	RunAsUser      *int64 `yaml:"runAsUser"`
	RunAsGroup     *int64 `yaml:"runAsGroup"`
	FSGroup        *int64 `yaml:"fsGroup"`
	SeccompProfile *struct {
		Type string `yaml:"type"`
	} `yaml:"seccompProfile"`
}

type container struct {
	Name            string               `yaml:"name"`
	Image           string               `yaml:"image"`
	ImagePullPolicy string               `yaml:"imagePullPolicy"`
	Command         []string             `yaml:"command"`
	Args            []string             `yaml:"args"`
	Env             []envVar             `yaml:"env"`
	Resources       resourceRequirements `yaml:"resources"`
	SecurityContext *struct {
		RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		Capabilities             *struct {
			Drop []string `yaml:"drop"`
			Add  []string `yaml:"add"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		SecretKeyRef *struct {
			Name     string `yaml:"name"`
			Key      string `yaml:"key"`
			Optional *bool  `yaml:"optional"`
		} `yaml:"secretKeyRef"`
	} `yaml:"valueFrom"`
}

type volume struct {
	Name                  string `yaml:"name"`
	PersistentVolumeClaim *struct {
		ClaimName string `yaml:"claimName"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"persistentVolumeClaim"`
	EmptyDir *struct {
		Medium    string `yaml:"medium"`
		SizeLimit string `yaml:"sizeLimit"`
	} `yaml:"emptyDir"`
}

// strict decodes a document into v, refusing unknown fields.
func strict(doc *yaml.Node, v any) error {
	b, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	return dec.Decode(v)
}

var (
	dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	quantity     = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$`)
)

// The CronJob with the lake on a PersistentVolumeClaim.
func TestKubernetesCronJob(t *testing.T) {
	checkCronJob(t, "kubernetes/cronjob.yaml", false)
}

// The variant with the whole data directory on an S3 bucket: no claim, no
// data volume, the bucket's credentials from the Secret.
func TestKubernetesCronJobOnS3(t *testing.T) {
	checkCronJob(t, "kubernetes/cronjob-s3.yaml", true)
}

// awsEnv are the AWS SDK's standard credential variables, allowed besides
// optlake's own in the bucket variant.
var awsEnv = map[string]bool{"AWS_ACCESS_KEY_ID": true, "AWS_SECRET_ACCESS_KEY": true, "AWS_SESSION_TOKEN": true, "AWS_REGION": true, "AWS_PROFILE": true}

func checkCronJob(t *testing.T, path string, bucket bool) {
	t.Helper()
	checkCronJobText(t, path, readFile(t, path), bucket)
}

// checkCronJobText checks a CronJob manifest's text; path names it in
// messages.
func checkCronJobText(t *testing.T, path, text string, bucket bool) {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(text))
	var (
		secrets  = map[string]k8sSecret{}
		pvcs     = map[string]k8sPVC{}
		cronJobs []k8sCronJob
	)
	for i := 0; ; i++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: document %d: %v", path, i, err)
		}
		var tm typeMeta
		if err := doc.Decode(&tm); err != nil {
			t.Fatalf("%s: document %d: %v", path, i, err)
		}
		where := path + ": " + tm.Kind
		var meta objectMeta
		switch {
		case tm.APIVersion == "v1" && tm.Kind == "Secret":
			var s k8sSecret
			if err := strict(&doc, &s); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			secrets[s.Metadata.Name], meta = s, s.Metadata
		case tm.APIVersion == "v1" && tm.Kind == "PersistentVolumeClaim":
			var p k8sPVC
			if err := strict(&doc, &p); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			pvcs[p.Metadata.Name], meta = p, p.Metadata
			if len(p.Spec.AccessModes) == 0 {
				t.Errorf("%s %s: no accessModes", where, p.Metadata.Name)
			}
			if s := p.Spec.Resources.Requests["storage"]; !quantity.MatchString(s) {
				t.Errorf("%s %s: storage request %q is not a quantity", where, p.Metadata.Name, s)
			}
		case tm.APIVersion == "batch/v1" && tm.Kind == "CronJob":
			var c k8sCronJob
			if err := strict(&doc, &c); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			cronJobs, meta = append(cronJobs, c), c.Metadata
		default:
			t.Fatalf("%s: document %d: unexpected %s %s", path, i, tm.APIVersion, tm.Kind)
		}
		if !dns1123Label.MatchString(meta.Name) || len(meta.Name) > 52 {
			t.Errorf("%s: name %q is not a DNS label of at most 52 characters (a CronJob's limit)", where, meta.Name)
		}
	}
	if len(cronJobs) != 1 {
		t.Fatalf("%s: %d CronJobs, want 1", path, len(cronJobs))
	}
	cj := cronJobs[0]
	spec := cj.Spec

	sched, err := parseCron(spec.Schedule)
	if err != nil {
		t.Errorf("schedule: %v", err)
	} else if !sched.everyFiveMinutes() {
		t.Errorf("schedule %q: want every 5 minutes", spec.Schedule)
	}
	if spec.ConcurrencyPolicy != "Forbid" {
		t.Errorf("concurrencyPolicy %q, want Forbid", spec.ConcurrencyPolicy)
	}
	if d := spec.StartingDeadlineSeconds; d == nil || *d < 10 || *d >= 300 {
		t.Errorf("startingDeadlineSeconds: want 10..299 (at least 10, under the 5-minute interval)")
	}
	job := spec.JobTemplate.Spec
	if job.BackoffLimit == nil || *job.BackoffLimit < 0 || *job.BackoffLimit > 3 {
		t.Errorf("backoffLimit: want 0..3")
	}
	pod := job.Template.Spec
	if pod.RestartPolicy != "Never" && pod.RestartPolicy != "OnFailure" {
		t.Errorf("restartPolicy %q: a Job's pod wants Never or OnFailure", pod.RestartPolicy)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image == "" || strings.HasSuffix(c.Image, ":latest") || !strings.Contains(c.Image, ":") {
		t.Errorf("image %q: want a pinned tag", c.Image)
	}
	if len(c.Command) > 0 {
		t.Errorf("command %q: the image's entrypoint is optlake; give args only", c.Command)
	}
	args := checkRunArgs(t, "container args", c.Args)
	if _, ok := args["every"]; ok {
		t.Error("args: --every in a CronJob (each Job takes one snapshot)")
	}

	// Environment: real OPTLAKE_* variables; the secrets from the Secret.
	vars := runEnvVars()
	env := map[string]envVar{}
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			// The Go runtime's soft limit: must stay under the container's.
			limit, ok1 := bytesOf(c.Resources.Limits["memory"])
			soft, ok2 := bytesOf(e.Value)
			if !ok1 || !ok2 || soft >= limit {
				t.Errorf("env GOMEMLIMIT=%q: want a size under limits.memory %q", e.Value, c.Resources.Limits["memory"])
			}
		} else if _, ok := vars[e.Name]; !ok && !(bucket && awsEnv[e.Name]) {
			t.Errorf("env %s: not a variable of optlake run", e.Name)
		}
		if _, dup := env[e.Name]; dup {
			t.Errorf("env %s twice", e.Name)
		}
		env[e.Name] = e
	}
	secretVars := []string{"OPTLAKE_HEADER", "OPTLAKE_CLICKHOUSE_DSN"}
	if bucket {
		secretVars = []string{"OPTLAKE_HEADER", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
	}
	for _, name := range secretVars {
		e, ok := env[name]
		if !ok {
			t.Errorf("env %s missing", name)
			continue
		}
		if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			t.Errorf("env %s: a secret must come from a secretKeyRef, not a value", name)
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		s, ok := secrets[ref.Name]
		if !ok {
			t.Errorf("env %s: Secret %q is not in the manifest", name, ref.Name)
			continue
		}
		if _, ok := s.StringData[ref.Key]; !ok {
			if _, ok := s.Data[ref.Key]; !ok {
				t.Errorf("env %s: Secret %s has no key %s", name, ref.Name, ref.Key)
			}
		}
	}
	for flag := range args {
		if _, ok := env[envName(flag)]; ok {
			t.Errorf("--%s both in args and as %s", flag, envName(flag))
		}
	}

	// --data-dir is a mount of the PersistentVolumeClaim.
	dataDir := ""
	if v := args["data-dir"]; len(v) > 0 {
		dataDir = v[len(v)-1]
	} else if e, ok := env["OPTLAKE_DATA_DIR"]; ok {
		dataDir = e.Value
	}
	if dataDir == "" {
		t.Fatal("no --data-dir (the default ./data is on the read-only root file system)")
	}
	if bucket {
		checkBucketDataDir(t, dataDir, pvcs, pod.Volumes)
	} else {
		checkClaimDataDir(t, dataDir, pvcs, pod.Volumes, c)
	}
	checkPodSecurity(t, pod, c)
}

// checkBucketDataDir: the data directory is a bucket URL the CLI accepts
// (storage.Open refuses credentials in it) and nothing is mounted for data.
func checkBucketDataDir(t *testing.T, dataDir string, pvcs map[string]k8sPVC, vols []volume) {
	t.Helper()
	if !strings.HasPrefix(dataDir, "s3://") {
		t.Errorf("--data-dir %s: want an s3:// bucket URL", dataDir)
	}
	st, err := storage.Open(context.Background(), dataDir)
	if err != nil {
		t.Errorf("--data-dir %s: %v", dataDir, err)
	} else {
		if _, local := st.(*storage.Local); local {
			t.Errorf("--data-dir %s: a local folder", dataDir)
		}
		st.Close()
	}
	if len(pvcs) > 0 {
		t.Errorf("%d PersistentVolumeClaims: the bucket variant needs none", len(pvcs))
	}
	for _, v := range vols {
		if v.EmptyDir == nil {
			t.Errorf("volume %s: only emptyDir scratch space, no data volume", v.Name)
		}
	}
}

// checkClaimDataDir: --data-dir is a writable mount of the manifest's
// PersistentVolumeClaim.
func checkClaimDataDir(t *testing.T, dataDir string, pvcs map[string]k8sPVC, podVols []volume, c container) {
	t.Helper()
	vols := map[string]volume{}
	for _, v := range podVols {
		vols[v.Name] = v
	}
	var dataClaim string
	for _, m := range c.VolumeMounts {
		v, ok := vols[m.Name]
		if !ok {
			t.Errorf("volumeMount %s: no such volume", m.Name)
			continue
		}
		if m.MountPath == dataDir {
			if v.PersistentVolumeClaim == nil || m.ReadOnly {
				t.Errorf("--data-dir %s: mounted from volume %s, want a writable persistentVolumeClaim", dataDir, m.Name)
			} else {
				dataClaim = v.PersistentVolumeClaim.ClaimName
			}
		}
	}
	if dataClaim == "" {
		t.Errorf("--data-dir %s is not a volume mount", dataDir)
	} else if _, ok := pvcs[dataClaim]; !ok {
		t.Errorf("claim %s: the PersistentVolumeClaim is not in the manifest", dataClaim)
	}
}

// checkPodSecurity checks resources and the security context.
func checkPodSecurity(t *testing.T, pod podSpec, c container) {
	t.Helper()

	// Resources and security.
	for _, r := range []string{"cpu", "memory"} {
		if q := c.Resources.Requests[r]; !quantity.MatchString(q) {
			t.Errorf("resources.requests.%s %q: want a quantity", r, q)
		}
	}
	if q := c.Resources.Limits["memory"]; !quantity.MatchString(q) {
		t.Errorf("resources.limits.memory %q: want a quantity", q)
	}
	sc := c.SecurityContext
	nonRoot := (pod.SecurityContext != nil && pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot) ||
		(sc != nil && sc.RunAsNonRoot != nil && *sc.RunAsNonRoot)
	if !nonRoot {
		t.Error("securityContext: runAsNonRoot is not true")
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("container securityContext: readOnlyRootFilesystem is not true")
	}
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("container securityContext: allowPrivilegeEscalation is not false")
	}
	if sc == nil || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) > 0 {
		t.Error("container securityContext: want capabilities drop [ALL], add none")
	}
}

// bytesOf parses the sizes used above: Kubernetes quantities ("1Gi",
// "512Mi") and Go's GOMEMLIMIT ("900MiB", "1GiB").
func bytesOf(s string) (int64, bool) {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"Gi", 1 << 30}, {"Mi", 1 << 20}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			return v * u.mult, err == nil && v > 0
		}
	}
	return 0, false
}
