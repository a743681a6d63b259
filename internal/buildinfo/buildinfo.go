// Package buildinfo says which optlake a binary is: the version, commit and
// date that a release build stamps into it with the linker
// (-X main.version=... -X main.commit=... -X main.date=..., as
// .goreleaser.yaml and the Makefile do), completed from what the Go
// toolchain records in every binary (debug.ReadBuildInfo): the module
// version of `go install ...@v0.1.0`, the VCS revision and commit time of a
// `go build` in a git checkout, and the Go version.
//
// `optlake --version`, the run summary and the optlake_build_info metric all
// show the same Info.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Info identifies a build. Fields that nothing recorded are empty, except
// Version, which is "dev" then.
type Info struct {
	// Version is the release's version ("0.1.0", from the git tag v0.1.0),
	// a snapshot's ("0.1.1-SNAPSHOT-1a2b3c4"), git describe's for make
	// build, or the module version of go install.
	Version string `json:"version"`
	// Commit is the full git commit the binary was built from.
	Commit string `json:"commit,omitempty"`
	// Date is the commit's date (RFC 3339, UTC): release builds stamp it
	// rather than the wall clock so that a rebuild of a tag is the same
	// binary, byte for byte.
	Date string `json:"date,omitempty"`
	// Modified is true when the working tree had uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// GoVersion is the toolchain that built the binary ("go1.26.8").
	GoVersion string `json:"go_version"`
	// Platform is GOOS/GOARCH ("linux/amd64").
	Platform string `json:"platform"`
}

// Read returns the Info of the running binary: the linker-stamped version,
// commit and date (empty or "dev" when not stamped), completed from the
// binary's own build information.
func Read(version, commit, date string) Info {
	bi, _ := debug.ReadBuildInfo()
	return From(bi, version, commit, date)
}

// From is Read with the build information given (nil when the binary has
// none). A stamped value wins over a recorded one.
func From(bi *debug.BuildInfo, version, commit, date string) Info {
	info := Info{Version: version, Commit: commit, Date: date, Platform: runtime.GOOS + "/" + runtime.GOARCH, GoVersion: runtime.Version()}
	if bi == nil {
		if info.Version == "" {
			info.Version = "dev"
		}
		return info
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if info.Version == "" || info.Version == "dev" {
		info.Version = "dev"
		// "(devel)" is what go build records without VCS information.
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			info.Version = v
		}
	}
	if info.Commit == "" {
		info.Commit = settings["vcs.revision"]
	}
	if info.Date == "" {
		info.Date = settings["vcs.time"]
	}
	info.Modified = settings["vcs.modified"] == "true" || strings.HasSuffix(info.Version, "-dirty") || strings.HasSuffix(info.Version, "+dirty")
	return info
}

// String is the line `optlake --version` prints after "optlake version ":
// "0.1.0 (commit 1a2b3c4d5e6f, 2026-12-07T01:00:00Z, go1.26.8 linux/amd64)".
func (i Info) String() string {
	var parts []string
	if i.Commit != "" {
		c := i.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		if i.Modified && !strings.HasSuffix(i.Version, "dirty") {
			c += ", modified"
		}
		parts = append(parts, "commit "+c)
	}
	if i.Date != "" {
		parts = append(parts, i.Date)
	}
	parts = append(parts, strings.TrimSpace(i.GoVersion+" "+i.Platform))
	return fmt.Sprintf("%s (%s)", i.Version, strings.Join(parts, ", "))
}
