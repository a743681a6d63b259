package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/optlake/optlake/internal/redact"
	"github.com/optlake/optlake/internal/secret"
	"github.com/optlake/optlake/venuesim"
)

func venueSimCommand() *cli.Command {
	f := func(name string) []string { return envs("sim-" + name) }
	return &cli.Command{
		Name:  "venue-sim",
		Usage: "serve a simulated options venue (deterministic for a seed) for tests and demos",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:8765", Usage: "listen address", EnvVars: f("addr")},
			&cli.Int64Flag{Name: "seed", Value: 1, Usage: "seed: same seed and ticks give byte-identical bodies", EnvVars: f("seed")},
			&cli.IntFlag{Name: "instruments", Usage: "listing size (0 = a realistic few thousand; up to millions)", EnvVars: f("instruments")},
			&cli.IntFlag{Name: "group-size", Usage: "instruments per outer element (0 = one group per currency)", EnvVars: f("group-size")},
			&cli.DurationFlag{Name: "tick", Value: 10 * time.Second, Usage: "wall time per state tick (index moves, listings, expiries, flips); 0 = frozen", EnvVars: f("tick")},
			&cli.DurationFlag{Name: "tick-span", Value: time.Hour, Usage: "simulated time per tick", EnvVars: f("tick-span")},
			&cli.Float64Flag{Name: "error-rate", Usage: "fraction of requests answered 500/503", EnvVars: f("error-rate")},
			&cli.IntFlag{Name: "fail-first", Usage: "answer the first N requests 503", EnvVars: f("fail-first")},
			&cli.Float64Flag{Name: "rate-limit-rate", Usage: "fraction of requests answered 429 + Retry-After", EnvVars: f("rate-limit-rate")},
			&cli.IntFlag{Name: "rate-limit-first", Usage: "answer the first N requests 429 + Retry-After", EnvVars: f("rate-limit-first")},
			&cli.DurationFlag{Name: "retry-after", Value: time.Second, Usage: "Retry-After sent with 429", EnvVars: f("retry-after")},
			&cli.DurationFlag{Name: "latency", Usage: "added before every response", EnvVars: f("latency")},
			&cli.Float64Flag{Name: "truncate-rate", Usage: "fraction of bodies cut off mid-way", EnvVars: f("truncate-rate")},
			&cli.Float64Flag{Name: "malformed-rate", Usage: "fraction of bodies with broken JSON", EnvVars: f("malformed-rate")},
			&cli.BoolFlag{Name: "index-price-variants", Usage: `some index_price values "", "abc", "1e3", null, numbers`, EnvVars: f("index-price-variants")},
			&cli.BoolFlag{Name: "wrong-types", Usage: "a few values of the wrong JSON type and missing instrument_name", EnvVars: f("wrong-types")},
			&cli.BoolFlag{Name: "timestamps-in-seconds", Usage: "epoch seconds instead of ms", EnvVars: f("timestamps-in-seconds")},
			&cli.BoolFlag{Name: "extra-fields", Usage: "unknown extra fields on instruments", EnvVars: f("extra-fields")},
			&cli.BoolFlag{Name: "schema-drift", Usage: "account payloads gain a field and change a type over time", EnvVars: f("schema-drift")},
			&cli.StringFlag{Name: "require-header", Usage: "`'Name: value'` required on account endpoints (401 without)", EnvVars: f("require-header")},
			// A real exchange (venuesim.RealVenue).
			&cli.StringFlag{Name: "auth", Usage: "require authentication on every endpoint: " + strings.Join(venuesim.AuthSchemes, ", "), EnvVars: f("auth")},
			&cli.StringFlag{Name: "auth-key", Usage: "with --auth: the token, user, API key or client id (may be ${ENV} or @file)", EnvVars: f("auth-key")},
			&cli.StringFlag{Name: "auth-secret", Usage: "with --auth: the password, signing secret or client secret (may be ${ENV} or @file)", EnvVars: f("auth-secret")},
			&cli.DurationFlag{Name: "token-ttl", Value: time.Hour, Usage: "lifetime of session and oauth2 tokens", EnvVars: f("token-ttl")},
			&cli.IntFlag{Name: "session-uses", Usage: "a session token is refused (401) after N requests (0 = never)", EnvVars: f("session-uses")},
			&cli.StringFlag{Name: "envelope", Usage: "wrap answers: jsonrpc ({\"result\": …}) or data ({\"data\": …}); the listing becomes bare instruments", EnvVars: f("envelope")},
			&cli.StringFlag{Name: "paginate", Usage: "split answers into pages: " + strings.Join(venuesim.PaginateStyles, ", "), EnvVars: f("paginate")},
			&cli.IntFlag{Name: "page-size", Value: 100, Usage: "elements per page", EnvVars: f("page-size")},
			&cli.BoolFlag{Name: "page-loop", Usage: "pages from the second on point back at the second (a cursor that never ends)", EnvVars: f("page-loop")},
			&cli.IntFlag{Name: "fail-page", Usage: "answer page N with 500, always", EnvVars: f("fail-page")},
			&cli.IntFlag{Name: "page-cap", Usage: "a page holds at most N elements, whatever the limit asked", EnvVars: f("page-cap")},
			&cli.IntFlag{Name: "page-skew", Usage: "a page holds the limit asked plus N elements (-1: one short, 1: one long)", EnvVars: f("page-skew")},
			&cli.IntFlag{Name: "shift-walks", Usage: "the listing moves under the first N walks of its pages: an instrument is listed at its front after the first page", EnvVars: f("shift-walks")},
			&cli.BoolFlag{Name: "shift-delist", Usage: "with --shift-walks: the listing's first instrument is delisted instead", EnvVars: f("shift-delist")},
			&cli.IntFlag{Name: "venue-error-first", Usage: "answer the first N requests 200 with an error body {\"error\": {\"code\": …}}", EnvVars: f("venue-error-first")},
			&cli.IntFlag{Name: "venue-error-code", Value: 10028, Usage: "code of those error bodies", EnvVars: f("venue-error-code")},
		},
		Action: func(c *cli.Context) error {
			red := redact.New()
			if _, v, ok := strings.Cut(c.String("require-header"), ":"); ok {
				red.Add(strings.TrimSpace(v))
			}
			key, err := secret.Resolve(c.String("auth-key"))
			if err != nil {
				return usagef("--auth-key: %v", err)
			}
			sec, err := secret.Resolve(c.String("auth-secret"))
			if err != nil {
				return usagef("--auth-secret: %v", err)
			}
			red.Add(key, sec)
			real := venuesim.RealVenue{
				Auth: c.String("auth"), Key: key, Secret: sec, TokenTTL: c.Duration("token-ttl"), SessionUses: c.Int("session-uses"),
				Envelope: c.String("envelope"), Paginate: c.String("paginate"), PageSize: c.Int("page-size"), PageLoop: c.Bool("page-loop"),
				FailPage: c.Int("fail-page"), PageCap: c.Int("page-cap"), PageSkew: c.Int("page-skew"),
				ShiftWalks: c.Int("shift-walks"), ShiftDelist: c.Bool("shift-delist"), VenueErrorFirst: c.Int("venue-error-first"), VenueErrorCode: c.Int("venue-error-code"),
			}
			if err := real.Check(); err != nil {
				return usagef("venue-sim: %v", err)
			}
			log := slog.New(red.Handler(slog.NewTextHandler(c.App.ErrWriter, nil)))
			sim := venuesim.New(venuesim.Config{
				Seed: c.Int64("seed"), Instruments: c.Int("instruments"), GroupSize: c.Int("group-size"),
				TickEvery: c.Duration("tick-span"), AutoTick: c.Duration("tick"),
				RequireHeader: c.String("require-header"), Logger: log, Real: real,
				Faults: venuesim.Faults{
					ErrorRate: c.Float64("error-rate"), FailFirst: c.Int("fail-first"),
					RateLimitRate: c.Float64("rate-limit-rate"), RateLimitFirst: c.Int("rate-limit-first"),
					RetryAfter: c.Duration("retry-after"), Latency: c.Duration("latency"),
					TruncateRate: c.Float64("truncate-rate"), MalformedRate: c.Float64("malformed-rate"),
					IndexPriceVariants: c.Bool("index-price-variants"), WrongTypes: c.Bool("wrong-types"),
					TimestampsInSeconds: c.Bool("timestamps-in-seconds"), ExtraFields: c.Bool("extra-fields"),
					SchemaDrift: c.Bool("schema-drift"),
				},
			})
			ln, err := net.Listen("tcp", c.String("addr"))
			if err != nil {
				return usagef("venue-sim: %v", err)
			}
			fmt.Fprintf(c.App.Writer, "venue-sim listening on http://%s (seed %d, %d instruments)\n", ln.Addr(), c.Int64("seed"), sim.NumInstruments())
			return serve(c.Context, ln, sim.Handler())
		},
	}
}

// serve runs an HTTP server until ctx ends, then shuts it down gracefully.
func serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
