package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// kustomization is kubernetes/kustomization.yaml: the one place the image
// is named (the Makefile's IMAGE reads newName from it too).
type kustomization struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Resources  []string `yaml:"resources"`
	Images     []struct {
		Name    string `yaml:"name"`
		NewName string `yaml:"newName"`
		NewTag  string `yaml:"newTag"`
	} `yaml:"images"`
}

func readKustomization(t *testing.T) kustomization {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(readFile(t, "kubernetes/kustomization.yaml")))
	dec.KnownFields(true)
	var k kustomization
	if err := dec.Decode(&k); err != nil {
		t.Fatalf("kubernetes/kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Fatalf("kubernetes/kustomization.yaml: %s %s, want a kustomize.config.k8s.io/v1beta1 Kustomization", k.APIVersion, k.Kind)
	}
	if len(k.Images) != 1 || k.Images[0].Name == "" || k.Images[0].NewName == "" || k.Images[0].NewTag == "" {
		t.Fatalf("kubernetes/kustomization.yaml: want one image with name, newName and newTag, got %+v", k.Images)
	}
	return k
}

// containerImages lists the image of every container in a manifest's
// documents.
func containerImages(t *testing.T, text string) []string {
	t.Helper()
	var images []string
	dec := yaml.NewDecoder(strings.NewReader(text))
	for {
		var doc struct {
			Kind string `yaml:"kind"`
			Spec struct {
				JobTemplate struct {
					Spec struct {
						Template struct {
							Spec podSpec `yaml:"spec"`
						} `yaml:"template"`
					} `yaml:"spec"`
				} `yaml:"jobTemplate"`
			} `yaml:"spec"`
		}
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return images
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range doc.Spec.JobTemplate.Spec.Template.Spec.Containers {
			images = append(images, c.Image)
		}
	}
}

// The Kubernetes examples run the release image: kubectl kustomize renders
// each manifest with the image kustomization.yaml names (a registry set
// there reaches both), and the rendered manifests pass the CronJob checks.
// kubectl (with its built-in kustomize) is needed; CI fails without it.
func TestKubernetesImage(t *testing.T) {
	k := readKustomization(t)
	img := k.Images[0]
	if len(k.Resources) != 1 || k.Resources[0] != "cronjob.yaml" {
		t.Errorf("resources %q: want cronjob.yaml (its header says how to take cronjob-s3.yaml)", k.Resources)
	}
	// Unrendered, the manifests already name the image (apply -f works) by
	// the name the kustomization replaces.
	manifests := map[string]bool{"cronjob.yaml": false, "cronjob-s3.yaml": true}
	for m := range manifests {
		for _, image := range containerImages(t, readFile(t, "kubernetes/"+m)) {
			if image != img.Name+":"+img.NewTag {
				t.Errorf("%s: image %q, want %s:%s (kustomization.yaml's name and tag)", m, image, img.Name, img.NewTag)
			}
		}
	}

	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("kubectl is not installed: the manifests were not rendered (scripts/deps.sh installs it)")
		}
		t.Skip("kubectl is not installed: the manifests were not rendered")
	}
	render := func(t *testing.T, manifest string, k kustomization) string {
		t.Helper()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, manifest), []byte(readFile(t, "kubernetes/"+manifest)), 0o644); err != nil {
			t.Fatal(err)
		}
		k.Resources = []string{manifest}
		b, err := yaml.Marshal(k)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		cmd := exec.Command(kubectl, "kustomize", dir)
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("kubectl kustomize %s: %v\n%s", manifest, err, errb.String())
		}
		return out.String()
	}
	for m, bucket := range manifests {
		t.Run(m, func(t *testing.T) {
			text := render(t, m, k)
			images := containerImages(t, text)
			if len(images) != 1 || images[0] != img.NewName+":"+img.NewTag {
				t.Errorf("rendered images %q, want [%s:%s]", images, img.NewName, img.NewTag)
			}
			checkCronJobText(t, m+" (rendered)", text, bucket)

			// Another registry, set in the one place, reaches the manifest.
			other := k
			other.Images = append(other.Images[:0:0], k.Images...)
			other.Images[0].NewName, other.Images[0].NewTag = "registry.internal.example/platform/optlake", "9.8.7"
			if images := containerImages(t, render(t, m, other)); len(images) != 1 || images[0] != "registry.internal.example/platform/optlake:9.8.7" {
				t.Errorf("with newName registry.internal.example/platform/optlake and newTag 9.8.7: images %q", images)
			}
		})
	}

	// The Makefile builds and tags the image under kustomization.yaml's
	// newName (make image: IMAGE:VERSION).
	if make, err := exec.LookPath("make"); err == nil {
		out, err := exec.Command(make, "-s", "-n", "-C", "..", "image").CombinedOutput()
		if err != nil {
			t.Fatalf("make -n image: %v\n%s", err, out)
		}
		if want := "scripts/image.sh '" + img.NewName + "'"; !strings.Contains(string(out), want) {
			t.Errorf("make -n image: %q, want it to run %s", out, want)
		}
	}
}
