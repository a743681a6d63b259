package main

import "os"

// openDataDir is the one place where a command opens its --data-dir (run,
// demo, replay, status, schema, history all call it): it returns the
// directory the command works in. mustExist is for commands that only read
// what a run wrote. A storage layer (local or object store) replaces the
// body of this function, not its callers.
func openDataDir(path string, mustExist bool) (string, error) {
	if path == "" {
		return "", usagef("--data-dir must not be empty")
	}
	if mustExist {
		if _, err := os.Stat(path); err != nil {
			return "", usagef("--data-dir: %v", err)
		}
	}
	return path, nil
}
