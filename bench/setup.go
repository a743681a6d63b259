package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// WorkDir is a bench's work folder: keep when given (created if needed),
// else a new temporary folder that done removes.
func WorkDir(keep, pattern string) (dir string, done func(), err error) {
	if keep != "" {
		return keep, func() {}, os.MkdirAll(keep, 0o755)
	}
	if dir, err = os.MkdirTemp("", pattern); err != nil {
		return "", nil, err
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// Binary is the optlake binary a bench runs: bin when given, else
// REPO/bin/optlake, built from repo when missing.
func Binary(ctx context.Context, repo, bin string, log func(format string, args ...any)) (string, error) {
	if bin != "" {
		return bin, nil
	}
	bin = filepath.Join(repo, "bin", "optlake")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	log("building %s", bin)
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "disable_grpc_modules", "-o", bin, "./cmd/optlake")
	cmd.Dir, cmd.Stderr = repo, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build optlake: %w", err)
	}
	return bin, nil
}
