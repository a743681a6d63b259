package pipeline

import (
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/optlake/optlake/pipeline/extract/auth"
	"github.com/optlake/optlake/pipeline/extract/envelope"
	"github.com/optlake/optlake/pipeline/extract/paginate"
	"github.com/optlake/optlake/pipeline/fieldmap"
)

// Kind says how an endpoint's body is turned into tables.
type Kind int

const (
	// KindInstruments bodies are decoded into the instruments table.
	KindInstruments Kind = iota
	// KindAccount bodies have no known shape; they are archived raw (their
	// tables are inferred by a later stage).
	KindAccount
)

// Endpoint is one venue endpoint under its logical name.
type Endpoint struct {
	Name string // logical name: instruments, account_balance, ...
	Path string // URL path, overridable in config
	Kind Kind
	// Requires names a query parameter without which the endpoint is not
	// called (get_position needs an instrument).
	Requires string
	// Public: an inferred table requested once, not once per account
	// (kind: public in the config).
	Public bool

	// What a real venue varies in (config file, DESIGN.md "Real venues").
	Method string // GET (default) or POST
	Body   []byte // POST body (JSON-RPC)
	// Records is the dotted path of the rows in each body; the rest is
	// envelope, kept only in the raw archive.
	Records string
	// Auth authenticates the endpoint's requests instead of the account's
	// or the run's; NoAuth sends none (auth: none).
	Auth       auth.Authenticator
	NoAuth     bool
	Pagination *paginate.Spec
	Errors     *envelope.Errors
	// Shape: records that are keyed objects or positional arrays.
	Shape envelope.Shape
	// Fields maps the listing's fields to the instruments columns.
	Fields fieldmap.Map
	// Params are sent with every request as they are (never split at
	// commas), besides the fanned-out parameters.
	Params url.Values
}

// enveloped reports whether bodies go through package envelope (records,
// pages, error bodies, shapes or a field mapping) instead of straight to
// the decoder.
func (e Endpoint) enveloped() bool {
	return e.Records != "" || e.Pagination != nil || e.Errors != nil || e.Shape.Shaped() || len(e.Fields) > 0
}

// DefaultEndpoints is the registry of the venue's endpoints, in run order.
func DefaultEndpoints() []Endpoint {
	return []Endpoint{
		{Name: "instruments", Path: "/v1/public/get_instruments", Kind: KindInstruments},
		{Name: "account_balance", Path: "/v1/public/get_account_balance", Kind: KindAccount},
		{Name: "account_collateral", Path: "/v1/public/get_account_collateral", Kind: KindAccount},
		{Name: "account_summary", Path: "/v1/public/get_account_summary", Kind: KindAccount},
		{Name: "exercisable_options", Path: "/v1/public/get_exercisable_options", Kind: KindAccount},
		{Name: "position", Path: "/v1/public/get_position", Kind: KindAccount, Requires: "instrument_name"},
		{Name: "positions", Path: "/v1/public/get_positions", Kind: KindAccount},
		{Name: "all_account_balances", Path: "/v1/public/get_all_account_balances", Kind: KindAccount},
		{Name: "positions_with_mints", Path: "/v1/public/get_positions_with_mints", Kind: KindAccount},
	}
}

// EndpointNames lists the logical names of the registry.
func EndpointNames() []string {
	var out []string
	for _, e := range DefaultEndpoints() {
		out = append(out, e.Name)
	}
	return out
}

// SelectEndpoints resolves --endpoints (empty = the default set: every
// endpoint that needs no parameter) against the registry, with path
// overrides applied.
func SelectEndpoints(names []string, paths map[string]string) ([]Endpoint, error) {
	return Select(DefaultEndpoints(), names, paths)
}

// Extra returns the registry with more endpoints (kind account or public,
// beyond the seed's) added at its end; a name already in it is an error.
func Extra(reg []Endpoint, extra map[string]bool) ([]Endpoint, error) {
	names := make([]string, 0, len(extra))
	for n := range extra {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, e := range reg {
			if e.Name == n {
				return nil, fmt.Errorf("endpoint %q is one of the venue's: it takes no kind", n)
			}
		}
		if n == "" || strings.ContainsAny(n, "/ .,") {
			return nil, fmt.Errorf("endpoint name %q: a plain word (it names the table)", n)
		}
		reg = append(reg, Endpoint{Name: n, Path: "/" + n, Kind: KindAccount, Public: extra[n]})
	}
	return reg, nil
}

// Select is SelectEndpoints against the registry reg.
func Select(reg []Endpoint, names []string, paths map[string]string) ([]Endpoint, error) {
	known := func() string {
		var out []string
		for _, e := range reg {
			out = append(out, e.Name)
		}
		return strings.Join(out, ", ")
	}
	for name, p := range paths {
		found := false
		for i := range reg {
			if reg[i].Name == name {
				reg[i].Path = p
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("path override for unknown endpoint %q (known: %s; another endpoint needs kind: account or public)", name, known())
		}
	}
	if len(names) == 0 {
		// The default: every endpoint that needs no parameter.
		for _, e := range reg {
			if e.Requires == "" {
				names = append(names, e.Name)
			}
		}
	}
	var out []Endpoint
	seen := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		var ep *Endpoint
		for i := range reg {
			if reg[i].Name == n {
				ep = &reg[i]
			}
		}
		if ep == nil {
			return nil, fmt.Errorf("unknown endpoint %q (known: %s)", n, known())
		}
		out = append(out, *ep)
	}
	return out, nil
}

// ParamError is a parameter spec that is not of the form endpoint.key=value.
type ParamError struct {
	Spec string // as given
}

func (e *ParamError) Error() string {
	return fmt.Sprintf("parameter %q: want endpoint.key=value", e.Spec)
}

// MissingParamError is an endpoint selected without the query parameter it
// requires (Endpoint.Requires).
type MissingParamError struct {
	Endpoint string // logical endpoint name
	Key      string // the required query parameter
}

func (e *MissingParamError) Error() string {
	return fmt.Sprintf("endpoint %s needs the parameter %s.%s=VALUE", e.Endpoint, e.Endpoint, e.Key)
}

// ParseParams parses parameter specs of the form endpoint.key=value into
// per-endpoint query parameters; a malformed spec fails with a *ParamError.
// A comma list (currency=BTC,ETH) is kept as one value and fanned out by
// ParamSets.
func ParseParams(specs []string) (map[string]url.Values, error) {
	out := map[string]url.Values{}
	for _, s := range specs {
		kv := strings.SplitN(s, "=", 2)
		dot := strings.IndexByte(kv[0], '.')
		if len(kv) != 2 || dot <= 0 || dot == len(kv[0])-1 {
			return nil, &ParamError{Spec: s}
		}
		ep, key := kv[0][:dot], kv[0][dot+1:]
		if out[ep] == nil {
			out[ep] = url.Values{}
		}
		out[ep].Add(key, kv[1])
	}
	return out, nil
}

// ParamSets expands comma lists into one parameter set per combination, in a
// deterministic order (keys sorted, values in the order given).
func ParamSets(p url.Values) []url.Values {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := []url.Values{{}}
	for _, k := range keys {
		var vals []string
		for _, v := range p[k] {
			for _, part := range strings.Split(v, ",") {
				if part = strings.TrimSpace(part); part != "" {
					vals = append(vals, part)
				}
			}
		}
		if len(vals) == 0 {
			continue
		}
		next := make([]url.Values, 0, len(out)*len(vals))
		for _, base := range out {
			for _, v := range vals {
				c := url.Values{}
				for bk, bv := range base {
					c[bk] = bv
				}
				c.Set(k, v)
				next = append(next, c)
			}
		}
		out = next
	}
	return out
}
