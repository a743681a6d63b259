package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
)

// Each whole profile of deploy/venues (its listing, its private endpoints,
// every page) against its venue's recorded answers, every private request
// first verified by ccxt's sign() for that venue: the run exits 0, every
// endpoint is ok, and ccxt refused nothing.
func TestVenueProfilesSignedOnRealShapes(t *testing.T) {
	oracle := testenv.NewCCXT(t)
	for _, v := range signerVenues(t) {
		if v.variant != "" {
			continue
		}
		if _, err := os.Stat(filepath.Join("testdata", "venues", v.name)); err != nil {
			continue // no recorded answers (TestProfilesSignLikeCCXT checks its signing)
		}
		t.Run(v.name, func(t *testing.T) {
			fixtures, _ := fixtureVenue(t, v.name)
			target, _ := url.Parse(fixtures)
			proxy := httputil.NewSingleHostReverseProxy(target)
			o := &oracleServer{t: t, v: v, ccxt: oracle, next: proxy}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if v.isPrivate(r.URL.Path) {
					o.ServeHTTP(w, r)
					return
				}
				proxy.ServeHTTP(w, r)
			}))
			defer srv.Close()
			o.base = "https://" + strings.TrimPrefix(srv.URL, "http://")
			for k, val := range v.env {
				t.Setenv(k, val)
			}
			dir := t.TempDir()
			sum := filepath.Join(t.TempDir(), "summary.json")
			profile := filepath.Join("..", "..", "deploy", "venues", v.name+".yaml")
			res := optlake(t, "run", "--config", profile, "--api-url", srv.URL, "--data-dir", dir, "--summary-json", sum)
			o.mu.Lock()
			refused, accepted := o.refused, o.accepted
			o.mu.Unlock()
			if res.code != exitOK || len(refused) > 0 || accepted == 0 {
				t.Fatalf("exit %d, %d private requests accepted, refused: %q\n%s", res.code, accepted, refused, res.stderr)
			}
			for ep, e := range readSummary(t, sum) {
				if e.Status != "ok" || e.Rows == 0 {
					t.Errorf("%s: %+v", ep, e)
				}
			}
		})
	}
}
