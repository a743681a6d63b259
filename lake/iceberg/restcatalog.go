package iceberg

import (
	"context"
	"errors"
	"fmt"
	"github.com/optlake/optlake/internal/redact"
	"net/url"
	"strings"

	icego "github.com/optlake/optlake/third_party/iceberg-go"
	icerest "github.com/optlake/optlake/third_party/iceberg-go/catalog/rest"
	icetable "github.com/optlake/optlake/third_party/iceberg-go/table"
)

// RESTConfig is how optlake reaches a rest catalog besides its URI: the
// warehouse it asks for and its credentials. Token and the secret half of
// Credential are secrets: no error, log or status shows them.
type RESTConfig struct {
	// Warehouse is the warehouse the client asks the server's /v1/config
	// for (a Polaris catalog name, a Lakekeeper warehouse, an S3 Tables
	// bucket ARN); "" for the server's default.
	Warehouse string
	// Token is a static bearer token, sent as Authorization: Bearer on
	// every request.
	Token string
	// Credential is OAuth2 client credentials, CLIENT_ID:CLIENT_SECRET:
	// the client fetches a token from OAuth2URI (grant_type
	// client_credentials, with Scope) and refreshes it as it expires.
	Credential string
	// OAuth2URI is the token endpoint; "" is the catalog's own
	// {URI}/v1/oauth/tokens.
	OAuth2URI string
	// Scope is the OAuth2 scope asked for; "" is "catalog".
	Scope string
	// SigV4Region, when set, signs every request with AWS SigV4 for that
	// region (credentials from the AWS default chain), as the service
	// SigV4Service ("" is "glue"): Glue's and S3 Tables' Iceberg REST
	// endpoints.
	SigV4Region, SigV4Service string
}

// Secrets are the values of c that no output may show.
func (c RESTConfig) Secrets() []string {
	var out []string
	if c.Token != "" {
		out = append(out, c.Token)
	}
	if c.Credential != "" {
		_, sec, ok := strings.Cut(c.Credential, ":")
		if !ok {
			sec = c.Credential
		}
		if sec != "" {
			out = append(out, sec)
		}
	}
	return out
}

// options are the iceberg-go client options of c.
func (c RESTConfig) options() ([]icerest.Option, error) {
	var opts []icerest.Option
	if c.Warehouse != "" {
		opts = append(opts, icerest.WithWarehouseLocation(c.Warehouse))
	}
	if c.Token != "" && c.Credential != "" {
		return nil, errors.New("give a bearer token or OAuth2 client credentials, not both")
	}
	if c.Token != "" {
		opts = append(opts, icerest.WithOAuthToken(c.Token))
	}
	if c.Credential != "" {
		opts = append(opts, icerest.WithCredential(c.Credential))
	}
	if c.OAuth2URI != "" {
		u, err := url.Parse(c.OAuth2URI)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("OAuth2 token endpoint %s: want http(s)://host[:port]/path", RedactURI(c.OAuth2URI))
		}
		opts = append(opts, icerest.WithAuthURI(u))
	}
	if c.Scope != "" {
		opts = append(opts, icerest.WithScope(c.Scope))
	}
	if c.SigV4Region != "" {
		svc := c.SigV4Service
		if svc == "" {
			svc = "glue"
		}
		opts = append(opts, icerest.WithSigV4RegionSvc(c.SigV4Region, svc))
	}
	return opts, nil
}

// openREST opens the rest catalog of cfg: it asks the server for its
// configuration (GET /v1/config, authenticated), so a wrong URI or
// credential fails here, before a command does anything.
//
// The server writes each commit's metadata file itself, at the table's
// location (the lake's folder of the table): it must be able to write the
// lake's storage, and accept that location for the table.
func openREST(ctx context.Context, cfg CatalogConfig) (*remoteCatalog, error) {
	u, err := url.Parse(cfg.URI)
	if cfg.URI == "" || err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("--iceberg-catalog rest needs --iceberg-catalog-uri http(s)://host[:port][/path] (the catalog's base URL), not %s", RedactURI(cfg.URI))
	}
	opts, err := cfg.REST.options()
	if err != nil {
		return nil, fmt.Errorf("iceberg catalog %s: %w", cfg.Redacted(), err)
	}
	cat, err := icerest.NewCatalog(ctx, cfg.Name, cfg.URI, opts...)
	if err != nil {
		return nil, fmt.Errorf("iceberg catalog %s: %s", cfg.Redacted(), restError(err, cfg.REST))
	}
	return &remoteCatalog{kind: CatalogREST, cat: restServer{cat, cfg.REST}, close: cat.Close, rest: cfg.REST}, nil
}

// restServer is a rest catalog whose errors are one line without a
// secret (restError): a token refresh that fails mid-run quotes the token
// endpoint's answer, which may echo the client secret.
type restServer struct {
	cat *icerest.Catalog
	cfg RESTConfig
}

// cleanError is an error whose message is cleaned of secrets; errors.Is
// and As still see the error it wraps.
type cleanError struct {
	msg string
	err error
}

func (e *cleanError) Error() string { return e.msg }
func (e *cleanError) Unwrap() error { return e.err }

func (s restServer) clean(err error) error {
	if err == nil {
		return nil
	}
	return &cleanError{restError(err, s.cfg), err}
}

func (s restServer) LoadTable(ctx context.Context, ident icetable.Identifier) (*icetable.Table, error) {
	t, err := s.cat.LoadTable(ctx, ident)
	return t, s.clean(err)
}

func (s restServer) CheckTableExists(ctx context.Context, ident icetable.Identifier) (bool, error) {
	ok, err := s.cat.CheckTableExists(ctx, ident)
	return ok, s.clean(err)
}

func (s restServer) RegisterTable(ctx context.Context, ident icetable.Identifier, loc string) (*icetable.Table, error) {
	t, err := s.cat.RegisterTable(ctx, ident, loc)
	return t, s.clean(err)
}

func (s restServer) CommitTable(ctx context.Context, ident icetable.Identifier, reqs []icetable.Requirement, updates []icetable.Update) (icetable.Metadata, string, error) {
	md, loc, err := s.cat.CommitTable(ctx, ident, reqs, updates)
	return md, loc, s.clean(err)
}

func (s restServer) CreateNamespace(ctx context.Context, ns icetable.Identifier, props icego.Properties) error {
	return s.clean(s.cat.CreateNamespace(ctx, ns, props))
}

// restError is err of a rest catalog as one line without a secret of c:
// the client's errors may quote a server's answer, which may echo them.
func restError(err error, c RESTConfig) string {
	// The redactor also masks a secret's URL- and JSON-escaped forms: a
	// token endpoint echoes the form body, where a secret with + or / is
	// escaped.
	return redact.New(c.Secrets()...).String(strings.Join(strings.Fields(err.Error()), " "))
}

// commitUnknown is the error of a commit that a rest catalog answered
// with a server error (5xx): it may or may not have landed, so optlake
// neither retries it nor takes it as done.
func commitUnknown(name, where string, err error, c RESTConfig) error {
	return fmt.Errorf("commit table %s in iceberg catalog %s: the catalog failed while committing (%s), so whether the commit landed is unknown; nothing was retried: the next run loads the table from the catalog and its catch-up loads the snapshot again if it is missing", name, where, restError(err, c))
}

// isCommitUnknown reports a rest commit whose outcome is unknown.
func isCommitUnknown(err error) bool { return errors.Is(err, icerest.ErrCommitStateUnknown) }
