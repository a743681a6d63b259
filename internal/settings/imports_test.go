package settings

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Settings declare values and read them; the packages that use a value
// interpret it. So settings imports nothing of the pipeline, the sinks,
// the lake or the commands: the one arrow that ran back up the house.
func TestImportsNothingAbove(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	const module = "github.com/optlake/optlake/"
	out, err := exec.Command(goTool, "list", "-deps", "-tags", "disable_grpc_modules",
		"-f", "{{.ImportPath}}", module+"internal/settings").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var above []string
	for _, p := range strings.Fields(string(out)) {
		rest, ok := strings.CutPrefix(p, module)
		if !ok {
			continue
		}
		for _, top := range []string{"pipeline", "sinks", "lake", "cmd"} {
			if rest == top || strings.HasPrefix(rest, top+"/") {
				above = append(above, p)
			}
		}
	}
	if len(above) > 0 {
		t.Errorf("internal/settings imports %s", strings.Join(above, ", "))
	}
}
