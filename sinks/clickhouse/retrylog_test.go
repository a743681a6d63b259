package clickhouse

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// A server that is down shows in the log as retries (info level: the
// attempt, of how many, the wait), not as a silent pause.
func TestRetriesAreLogged(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there: connection refused
	var logs bytes.Buffer
	s, err := New(Options{DSN: "clickhouse://optlake:pw@" + addr + "/db", MaxAttempts: 3, Backoff: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if _, _, err := s.connect(context.Background()); err == nil {
		t.Fatal("connected to nothing")
	}
	for _, want := range []string{"op=connect attempt=1 of=3 wait=1ms", "attempt=2 of=3 wait=2ms"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	if strings.Count(logs.String(), "msg=retrying") != 2 || strings.Contains(logs.String(), ":pw@") {
		t.Errorf("want 2 retries logged, no password:\n%s", logs.String())
	}
}
