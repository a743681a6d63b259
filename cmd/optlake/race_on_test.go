//go:build race

package main

// raceEnabled: the race detector slows the CPU-bound paths ~10×; tests that
// only measure scale run without it (make test runs them in a second step).
const raceEnabled = true
