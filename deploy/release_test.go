package deploy

import (
	"os"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// goreleaserConfig is the part of ../.goreleaser.yaml that decides what a
// release's archives hold and which times they carry.
type goreleaserConfig struct {
	Builds []struct {
		ID           string
		ModTimestamp string `yaml:"mod_timestamp"`
	}
	Archives []struct {
		ID         string
		Files      []archiveFile
		BuildsInfo fileInfo `yaml:"builds_info"`
	}
	Metadata struct {
		ModTimestamp string `yaml:"mod_timestamp"`
	}
}

type archiveFile struct {
	Src, Dst string
	Info     fileInfo
}

// UnmarshalYAML takes a bare path too, as GoReleaser does.
func (f *archiveFile) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		f.Src = n.Value
		return nil
	}
	type plain archiveFile
	return n.Decode((*plain)(f))
}

type fileInfo struct {
	Owner, Group, MTime string
	Mode                uint32
}

// TestReleaseArchivesReproducible checks that .goreleaser.yaml stamps
// everything a release archive holds with the commit (not the build) time,
// a fixed owner and mode, so two builds of one commit give the same
// archives (make release-repro builds twice and compares the checksums),
// and that the archives carry the licence texts: the project's LICENSE
// (Apache-2.0, as the image's label says) and iceberg-go's.
func TestReleaseArchivesReproducible(t *testing.T) {
	var cfg goreleaserConfig
	if err := yaml.Unmarshal([]byte(readFile(t, "../.goreleaser.yaml")), &cfg); err != nil {
		t.Fatalf(".goreleaser.yaml: %v", err)
	}
	const commitDate, commitTimestamp = "{{ .CommitDate }}", "{{ .CommitTimestamp }}"
	if len(cfg.Builds) == 0 || len(cfg.Archives) == 0 {
		t.Fatalf(".goreleaser.yaml: %d builds, %d archives", len(cfg.Builds), len(cfg.Archives))
	}
	for _, b := range cfg.Builds {
		// The binary's time in the archive is its file's.
		if b.ModTimestamp != commitTimestamp {
			t.Errorf("build %s: mod_timestamp %q, want %q", b.ID, b.ModTimestamp, commitTimestamp)
		}
	}
	if cfg.Metadata.ModTimestamp != commitTimestamp {
		t.Errorf("metadata.mod_timestamp %q, want %q", cfg.Metadata.ModTimestamp, commitTimestamp)
	}
	for _, a := range cfg.Archives {
		if a.BuildsInfo.Owner == "" || a.BuildsInfo.Group == "" {
			t.Errorf("archive %s: builds_info without owner and group: the builder's user goes into the archive", a.ID)
		}
		dsts := map[string]bool{}
		for _, f := range a.Files {
			dst := f.Dst
			if dst == "" {
				dst = f.Src
			}
			dsts[dst] = true
			if strings.ContainsAny(f.Src, "*?[") {
				t.Errorf("archive %s: %s is a glob: name each file", a.ID, f.Src)
			}
			if _, err := os.Stat("../" + f.Src); err != nil {
				t.Errorf("archive %s: %v", a.ID, err)
			}
			if f.Info.MTime != commitDate || f.Info.Owner == "" || f.Info.Group == "" || f.Info.Mode == 0 {
				t.Errorf("archive %s: %s has info %+v; want mtime %q, an owner, a group and a mode (else the checkout's time and owner go into the archive)",
					a.ID, f.Src, f.Info, commitDate)
			}
		}
		for _, want := range []string{"LICENSE", "third_party/iceberg-go/LICENSE", "third_party/iceberg-go/NOTICE"} {
			if !dsts[want] {
				t.Errorf("archive %s does not carry %s", a.ID, want)
			}
		}
	}
	if lic := readFile(t, "../LICENSE"); !strings.Contains(lic, "Apache License") || !strings.Contains(lic, "Version 2.0, January 2004") {
		t.Error("LICENSE is not the Apache License 2.0 that the image's label and the README name")
	}
}
