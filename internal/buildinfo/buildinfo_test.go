package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFrom(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name                  string
		bi                    *debug.BuildInfo
		version, commit, date string
		want                  Info
		wantString            string
	}{{
		name:    "release: the stamp wins over what the toolchain recorded",
		bi:      &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs("vcs.revision", "ffff", "vcs.time", "2000-01-01T00:00:00Z")},
		version: "0.1.0", commit: rev, date: "2026-12-07T01:00:00Z",
		want:       Info{Version: "0.1.0", Commit: rev, Date: "2026-12-07T01:00:00Z", GoVersion: "go1.26.8"},
		wantString: "0.1.0 (commit 0123456789ab, 2026-12-07T01:00:00Z, go1.26.8 ",
	}, {
		name:       "go install module@v0.1.0: the module version",
		bi:         &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.1.0"}},
		version:    "dev",
		want:       Info{Version: "v0.1.0", GoVersion: "go1.26.8"},
		wantString: "v0.1.0 (go1.26.8 ",
	}, {
		name:       "go build in a checkout with changes: VCS revision, time and modified",
		bi:         &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs("vcs.revision", rev, "vcs.time", "2026-12-06T10:00:00Z", "vcs.modified", "true")},
		version:    "dev",
		want:       Info{Version: "dev", Commit: rev, Date: "2026-12-06T10:00:00Z", Modified: true, GoVersion: "go1.26.8"},
		wantString: "dev (commit 0123456789ab, modified, 2026-12-06T10:00:00Z, go1.26.8 ",
	}, {
		name:    "make build of a dirty tree: git describe says so once",
		bi:      &debug.BuildInfo{GoVersion: "go1.26.8"},
		version: "v0.1.0-3-g0123456-dirty", commit: rev,
		want:       Info{Version: "v0.1.0-3-g0123456-dirty", Commit: rev, Modified: true, GoVersion: "go1.26.8"},
		wantString: "v0.1.0-3-g0123456-dirty (commit 0123456789ab, go1.26.8 ",
	}, {
		name: "no build information at all",
		want: Info{Version: "dev", GoVersion: runtime.Version()},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := From(tc.bi, tc.version, tc.commit, tc.date)
			tc.want.Platform = runtime.GOOS + "/" + runtime.GOARCH
			if got != tc.want {
				t.Errorf("From = %+v\nwant %+v", got, tc.want)
			}
			if s := got.String(); !strings.HasPrefix(s, tc.wantString) || !strings.HasSuffix(s, tc.want.Platform+")") {
				t.Errorf("String = %q, want %q...%s)", s, tc.wantString, tc.want.Platform)
			}
		})
	}
}

// The test binary itself has build information: Read finds the Go version.
func TestRead(t *testing.T) {
	got := Read("", "", "")
	if got.Version == "" || got.GoVersion != runtime.Version() {
		t.Errorf("Read = %+v, want a version and GoVersion %s", got, runtime.Version())
	}
}
