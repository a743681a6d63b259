package deploy

import (
	"bytes"
	"crypto/x509"
	"debug/elf"
	"encoding/json"
	"encoding/pem"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/optlake/optlake/venuesim"
)

// imageConfig is what `podman image inspect` reports of an image.
type imageConfig struct {
	Os, Architecture string
	Config           struct {
		User       string
		Env        []string
		Entrypoint []string
		Cmd        []string
		WorkingDir string
		Labels     map[string]string
	}
}

// TestImage checks the container image that make release-ci builds
// (Containerfile, scripts/image.sh) from GoReleaser's linux/amd64 snapshot
// binary, named by OPTLAKE_TEST_IMAGE (the test is skipped without it: go
// test ./... does not build images). It exports the image's file system and
// runs the binary in it with chroot, as the image's user, in its working
// directory, with the image's environment: --version reports the build,
// demo writes a lake into /data, and an HTTPS run trusts exactly the
// image's CA bundle. Then it starts the container itself with podman
// (runc: this sandbox refuses crun).
func TestImage(t *testing.T) {
	ref := os.Getenv("OPTLAKE_TEST_IMAGE")
	if ref == "" {
		t.Skip("OPTLAKE_TEST_IMAGE is not set: make release-ci builds the image and runs this test")
	}
	if os.Geteuid() != 0 {
		t.Fatal("chroot and the switch to the image's user need root")
	}
	podman, err := exec.LookPath("podman")
	if err != nil {
		t.Fatal("podman is not installed (scripts/deps.sh)")
	}
	run := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		cmd := exec.Command(podman, args...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.String()
	}

	// The name: kustomization.yaml's newName, the one place it is set.
	k := readKustomization(t)
	name, version, _ := strings.Cut(ref, ":")
	if name != k.Images[0].NewName {
		t.Errorf("image %s: want it named %s (kubernetes/kustomization.yaml)", ref, k.Images[0].NewName)
	}

	// The image's configuration.
	var inspected []imageConfig
	if err := json.Unmarshal([]byte(run("image", "inspect", ref)), &inspected); err != nil || len(inspected) != 1 {
		t.Fatalf("podman image inspect %s: %v (%d images)", ref, err, len(inspected))
	}
	img := inspected[0]
	cfg := img.Config
	if img.Os != "linux" || img.Architecture != "amd64" {
		t.Errorf("platform %s/%s, want linux/amd64", img.Os, img.Architecture)
	}
	if len(cfg.Entrypoint) != 1 || cfg.Entrypoint[0] != "/optlake" {
		t.Errorf("entrypoint %q, want [/optlake]", cfg.Entrypoint)
	}
	if cfg.WorkingDir != "/data" {
		t.Errorf("workdir %q, want /data", cfg.WorkingDir)
	}
	uidS, gidS, _ := strings.Cut(cfg.User, ":")
	uid, err1 := strconv.Atoi(uidS)
	gid, err2 := strconv.Atoi(gidS)
	if err1 != nil || err2 != nil || uid == 0 || gid == 0 {
		// Numeric, so that Kubernetes' runAsNonRoot can check it.
		t.Fatalf("user %q: want a numeric non-root uid:gid", cfg.User)
	}
	commit := strings.TrimSpace(gitOutput(t, "rev-parse", "HEAD"))
	labels := cfg.Labels
	for key, want := range map[string]string{
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": commit,
		"org.opencontainers.image.source":   "https://github.com/optlake/optlake",
		"org.opencontainers.image.title":    "optlake",
		// The repository's LICENSE (checked below to be that licence).
		"org.opencontainers.image.licenses": "Apache-2.0",
	} {
		if labels[key] != want {
			t.Errorf("label %s = %q, want %q", key, labels[key], want)
		}
	}
	if labels["org.opencontainers.image.created"] == "" {
		t.Error("label org.opencontainers.image.created is empty")
	}

	// Its file system, from a container created (not started) from it.
	id := strings.TrimSpace(run("create", ref))
	t.Cleanup(func() { exec.Command(podman, "rm", "--force", id).Run() })
	root := t.TempDir()
	tarPath := filepath.Join(t.TempDir(), "rootfs.tar")
	run("export", "--output", tarPath, id)
	if out, err := exec.Command("tar", "--numeric-owner", "-xpf", tarPath, "-C", root).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	checkOwner := func(path string, wantUID int, wantMode os.FileMode) {
		t.Helper()
		fi, err := os.Lstat(filepath.Join(root, path))
		if err != nil {
			t.Errorf("image: %v", err)
			return
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != wantUID || fi.Mode()&(os.ModePerm|os.ModeSticky) != wantMode {
			t.Errorf("image: %s: uid %d mode %v, want uid %d mode %v", path, st.Uid, fi.Mode(), wantUID, wantMode)
		}
	}
	checkOwner("optlake", 0, 0o755)
	checkOwner("data", uid, 0o755)
	checkOwner("tmp", 0, 0o777|os.ModeSticky)
	if passwd := readIn(t, root, "etc/passwd"); !strings.Contains(passwd, ":x:"+uidS+":"+gidS+":") {
		t.Errorf("etc/passwd has no user %s:%s:\n%s", uidS, gidS, passwd)
	}
	// Static: no program interpreter (the base has no libc).
	if f, err := elf.Open(filepath.Join(root, "optlake")); err != nil {
		t.Errorf("optlake: %v", err)
	} else {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Error("optlake is dynamically linked: the image has no libc")
			}
		}
		f.Close()
	}
	// The licence texts, as the release archives carry them.
	for in, repo := range map[string]string{
		"usr/share/doc/optlake/LICENSE":                        "LICENSE",
		"usr/share/doc/optlake/third_party/iceberg-go/LICENSE": "third_party/iceberg-go/LICENSE",
		"usr/share/doc/optlake/third_party/iceberg-go/NOTICE":  "third_party/iceberg-go/NOTICE",
	} {
		if readIn(t, root, in) != readFile(t, filepath.Join("..", repo)) {
			t.Errorf("image: /%s is not the repository's %s", in, repo)
		}
	}
	if lic := readIn(t, root, "usr/share/doc/optlake/LICENSE"); !strings.Contains(lic, "Apache License") || !strings.Contains(lic, "Version 2.0, January 2004") {
		t.Errorf("image: /usr/share/doc/optlake/LICENSE is not the Apache License 2.0 the label names")
	}
	bundle := filepath.Join(root, "etc/ssl/certs/ca-certificates.crt")
	if n := countCerts(t, readIn(t, root, "etc/ssl/certs/ca-certificates.crt")); n < 50 {
		t.Errorf("CA bundle: %d certificates, want the system's (at least 50)", n)
	}

	// The binary, inside the image's file system, as the image's user.
	inImage := func(args ...string) (int, string) {
		t.Helper()
		var out bytes.Buffer
		cmd := &exec.Cmd{
			Path:   cfg.Entrypoint[0],
			Args:   append([]string{cfg.Entrypoint[0]}, args...),
			Env:    cfg.Env,
			Dir:    cfg.WorkingDir,
			Stdout: &out, Stderr: &out,
			SysProcAttr: &syscall.SysProcAttr{
				Chroot:     root,
				Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}},
			},
		}
		err := cmd.Run()
		if err != nil && cmd.ProcessState == nil {
			t.Fatalf("optlake %s in the image: %v", strings.Join(args, " "), err)
		}
		return cmd.ProcessState.ExitCode(), out.String()
	}

	// --version: the release build's stamp (GoReleaser's version, the commit).
	code, out := inImage("--version")
	want := "optlake version " + version + " (commit " + commit[:12] + ", "
	if code != 0 || !strings.HasPrefix(out, want) || !strings.HasSuffix(out, " linux/amd64)\n") {
		t.Errorf("--version: exit %d, %q; want %q...linux/amd64)", code, out, want)
	}

	// demo: a simulated venue into ./data, under the image's /data.
	if code, out := inImage("demo"); code != 0 {
		t.Fatalf("demo: exit %d\n%s", code, out)
	}
	parquet, _ := filepath.Glob(filepath.Join(root, "data", "data", "instruments", "*", "*.parquet"))
	if len(parquet) == 0 {
		t.Fatal("demo wrote no Parquet under /data/data/instruments")
	}
	if st, err := os.Stat(parquet[0]); err != nil || int(st.Sys().(*syscall.Stat_t).Uid) != uid {
		t.Errorf("%s: not written by uid %d (%v)", parquet[0], uid, err)
	}

	// HTTPS: the binary trusts the image's CA bundle, and only it. A venue
	// whose certificate no public CA signed is refused; once its CA is in the
	// bundle (of this exported copy), the same run succeeds.
	sim := venuesim.New(venuesim.Config{Seed: 11})
	srv := httptest.NewTLSServer(sim.Handler())
	defer srv.Close()
	tlsRun := func(dir string) (int, string) {
		return inImage("run", "--api-url", srv.URL, "--data-dir", "/data/"+dir, "--endpoints", "instruments", "--max-attempts", "1")
	}
	if code, out := tlsRun("untrusted"); code == 0 || !strings.Contains(out, "certificate") {
		t.Errorf("HTTPS to a venue outside the bundle: exit %d, want a certificate error:\n%s", code, out)
	}
	f, err := os.OpenFile(bundle, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	pem.Encode(f, &pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if code, out := tlsRun("trusted"); code != 0 {
		t.Errorf("HTTPS with the venue's CA in the image's bundle: exit %d\n%s", code, out)
	}

	// The container itself. This sandbox refuses crun (setrlimit, cgroups in
	// hybrid mode); runc with explicit limits and no network runs it. Where
	// the runtime refuses to start a container at all, that is logged and
	// the checks above stand; any other failure fails the test.
	podmanRun := func(args ...string) (string, error) {
		full := append([]string{"run", "--rm", "--runtime", "runc", "--network", "none",
			"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", ref}, args...)
		out, err := exec.Command(podman, full...).CombinedOutput()
		return string(out), err
	}
	out, err = podmanRun("--version")
	if err != nil && refusedRuntime.MatchString(out) {
		t.Logf("podman run refused here, the container was not started: %s", strings.TrimSpace(out))
		return
	}
	if err != nil || !strings.HasPrefix(out, want) {
		t.Errorf("podman run %s --version: %v, %q; want %q...", ref, err, out, want)
	}
	if out, err := podmanRun("demo", "--interval", "100ms"); err != nil {
		t.Errorf("podman run %s demo: %v\n%s", ref, err, out)
	}
}

// refusedRuntime matches an OCI runtime's refusal to start any container
// (the sandbox's limits), as opposed to a failure of the image.
var refusedRuntime = regexp.MustCompile(`OCI runtime|OCI permission denied|runtime runc|setrlimit|cgroups? |executable file .runc. not found`)

// readIn reads a file of the exported image.
func readIn(t *testing.T, root, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatalf("image: %v", err)
	}
	return string(b)
}

// countCerts parses every certificate of a PEM bundle.
func countCerts(t *testing.T, bundle string) int {
	t.Helper()
	n, rest := 0, []byte(bundle)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return n
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			t.Errorf("CA bundle: certificate %d: %v", n+1, err)
		}
		n++
	}
}

// gitOutput runs git in the repository.
func gitOutput(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", ".."}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}
