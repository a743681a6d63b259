// Package icebergrest is an Iceberg REST catalog server for tests: the
// endpoints of the REST catalog protocol that optlake's client (iceberg-go's
// catalog/rest), chDB's DataLakeCatalog and pyiceberg-style clients use,
// over iceberg-go's SQL catalog (catalog/sql) on a SQLite file.
//
// It is our own, and thin, because no independently written REST catalog
// server that can hold optlake's tables installs on the test machines: the
// JVM and Rust servers (Polaris, Nessie, Gravitino, Unity, Lakekeeper, the
// Iceberg project's REST fixture) come only as Maven, Docker or crate
// artifacts, the Go ones are refused by the module proxy, and SeaweedFS
// confines tables to its own bucket layout. What keeps it honest: the
// commit is the SQL catalog's real compare-and-swap with the requirements
// checked on the server (a stale writer gets 409 CommitFailedException, as
// from any REST catalog), and chDB's C++ REST client, written
// independently of iceberg-go, reads every table through it.
package icebergrest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite" // driver "sqlite"

	icego "github.com/optlake/optlake/third_party/iceberg-go"
	icecatalog "github.com/optlake/optlake/third_party/iceberg-go/catalog"
	icesql "github.com/optlake/optlake/third_party/iceberg-go/catalog/sql"
	iceio "github.com/optlake/optlake/third_party/iceberg-go/io"
	icetable "github.com/optlake/optlake/third_party/iceberg-go/table"
)

// Options configure a Server. A request is authorised by a bearer token:
// Token, or one the token endpoint issued for ClientID:ClientSecret.
type Options struct {
	// Token is a static bearer token the server accepts ("" for none).
	Token string
	// ClientID and ClientSecret are the OAuth2 client credentials
	// POST /v1/oauth/tokens exchanges for a token ("" for none).
	ClientID, ClientSecret string
	// TokenTTL is how long an issued token lasts (default one hour).
	TokenTTL time.Duration
	// FileIO, when set, is how the catalog reads and writes the tables'
	// metadata files (a bucket's tables); default: iceberg-go's, local
	// files for file:// locations.
	FileIO func(ctx context.Context, location string) (iceio.IO, error)
}

// Server is a running REST catalog on 127.0.0.1.
type Server struct {
	// URL is the catalog's base URL (clients add /v1/…).
	URL string

	opts Options
	cat  *icesql.Catalog
	db   *sql.DB
	srv  *httptest.Server

	mu       sync.Mutex
	fileIO   func(ctx context.Context, location string) (iceio.IO, error)
	tokens   map[string]time.Time // issued token → expiry
	fail     []int                // statuses the next commits answer, after committing
	commits  int                  // commits that moved a table
	conflict int                  // commits answered 409
	denied   int                  // requests answered 401
}

// Start starts a server whose catalog lives in a temporary directory of t;
// it stops when t ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := New(filepath.Join(t.TempDir(), "rest-catalog.db"), opts)
	if err != nil {
		t.Fatalf("iceberg rest catalog: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// New starts a server over the SQLite catalog file db (created if absent).
func New(db string, opts Options) (*Server, error) {
	if opts.TokenTTL == 0 {
		opts.TokenTTL = time.Hour
	}
	h, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return nil, err
	}
	cat, err := icesql.NewCatalog("rest", h, icesql.SQLite, icego.Properties{})
	if err != nil {
		h.Close()
		return nil, err
	}
	s := &Server{opts: opts, cat: cat, db: h, tokens: map[string]time.Time{}, fileIO: opts.FileIO}
	cat.SetFileIO(s.io)
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s, nil
}

// Close stops the server.
func (s *Server) Close() {
	s.srv.Close()
	s.db.Close()
}

// SetFileIO sets how the catalog reads and writes metadata files from now
// on (Options.FileIO).
func (s *Server) SetFileIO(f func(ctx context.Context, location string) (iceio.IO, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fileIO = f
}

// io is the file IO of the table at location: Options.FileIO, else
// iceberg-go's (local files).
func (s *Server) io(ctx context.Context, location string) (iceio.IO, error) {
	s.mu.Lock()
	f := s.fileIO
	s.mu.Unlock()
	if f != nil {
		return f(ctx, location)
	}
	return iceio.LoadFS(ctx, nil, location)
}

// FailNextCommits makes the next commits (one per status) answer status
// (a 5xx) after committing: the commit lands, the client cannot know.
func (s *Server) FailNextCommits(status ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = append(s.fail, status...)
}

// Stats are what the server counted: commits that moved a table, commits
// refused with 409, requests refused with 401.
func (s *Server) Stats() (commits, conflicts, denied int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commits, s.conflict, s.denied
}

// MetadataLocation is the current metadata file of table ns.name.
func (s *Server) MetadataLocation(ctx context.Context, ns, name string) (string, error) {
	t, err := s.cat.LoadTable(ctx, append(strings.Split(ns, "."), name))
	if err != nil {
		return "", err
	}
	return t.MetadataLocation(), nil
}

// errorModel is the protocol's error body.
type errorModel struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    int    `json:"code"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, code int, typ, format string, args ...any) {
	var e errorModel
	e.Error.Message, e.Error.Type, e.Error.Code = fmt.Sprintf(format, args...), typ, code
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	}
	writeJSON(w, code, e)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// catalogError answers err of the SQL catalog.
func catalogError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, icecatalog.ErrNoSuchTable):
		writeError(w, http.StatusNotFound, "NoSuchTableException", "%v", err)
	case errors.Is(err, icecatalog.ErrNoSuchNamespace):
		writeError(w, http.StatusNotFound, "NoSuchNamespaceException", "%v", err)
	case errors.Is(err, icecatalog.ErrTableAlreadyExists), errors.Is(err, icecatalog.ErrNamespaceAlreadyExists):
		writeError(w, http.StatusConflict, "AlreadyExistsException", "%v", err)
	case errors.Is(err, icecatalog.ErrNamespaceNotEmpty):
		writeError(w, http.StatusConflict, "NamespaceNotEmptyException", "%v", err)
	case errors.Is(err, icetable.ErrCommitFailed):
		writeError(w, http.StatusConflict, "CommitFailedException", "%v", err)
	default:
		writeError(w, http.StatusInternalServerError, "ServerError", "%v", err)
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimPrefix(r.URL.EscapedPath(), "/")
	segs := strings.Split(p, "/")
	for i := range segs {
		var err error
		if segs[i], err = url.PathUnescape(segs[i]); err != nil {
			writeError(w, http.StatusBadRequest, "BadRequestException", "path %q", p)
			return
		}
	}
	if len(segs) < 2 || segs[0] != "v1" {
		writeError(w, http.StatusNotFound, "NotFoundException", "no route %s %s", r.Method, r.URL.Path)
		return
	}
	segs = segs[1:]
	if r.Method == http.MethodPost && len(segs) == 2 && segs[0] == "oauth" && segs[1] == "tokens" {
		s.token(w, r)
		return
	}
	if !s.authorised(r) {
		s.mu.Lock()
		s.denied++
		s.mu.Unlock()
		writeError(w, http.StatusUnauthorized, "NotAuthorizedException", "a valid bearer token is required")
		return
	}
	ctx := r.Context()
	switch {
	case len(segs) == 1 && segs[0] == "config" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]any{"defaults": map[string]string{}, "overrides": map[string]string{}})
	case len(segs) == 1 && segs[0] == "namespaces":
		s.namespaces(ctx, w, r)
	case len(segs) == 2 && segs[0] == "namespaces":
		s.namespace(ctx, w, r, ns(segs[1]))
	case len(segs) == 3 && segs[0] == "namespaces" && segs[2] == "tables":
		s.tables(ctx, w, r, ns(segs[1]))
	case len(segs) == 3 && segs[0] == "namespaces" && segs[2] == "register" && r.Method == http.MethodPost:
		s.register(ctx, w, r, ns(segs[1]))
	case len(segs) == 4 && segs[0] == "namespaces" && segs[2] == "tables":
		s.table(ctx, w, r, append(ns(segs[1]), segs[3]))
	default:
		writeError(w, http.StatusNotFound, "NotFoundException", "no route %s %s", r.Method, r.URL.Path)
	}
}

// ns is a namespace of a path: its levels joined by the unit separator.
func ns(seg string) icetable.Identifier { return strings.Split(seg, "\x1f") }

// authorised checks the request's bearer token.
func (s *Server) authorised(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return false
	}
	if s.opts.Token != "" && tok == s.opts.Token {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.tokens[tok]
	return ok && time.Now().Before(exp)
}

// token is the OAuth2 token endpoint (client credentials grant; the
// client's id and secret in the form or as HTTP Basic).
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return
	}
	id, sec, basic := r.BasicAuth()
	if !basic {
		id, sec = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if r.PostForm.Get("grant_type") != "client_credentials" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	if s.opts.ClientID == "" || id != s.opts.ClientID || sec != s.opts.ClientSecret {
		s.mu.Lock()
		s.denied++
		s.mu.Unlock()
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client", "error_description": "unknown client or wrong secret"})
		return
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	tok := hex.EncodeToString(b)
	s.mu.Lock()
	s.tokens[tok] = time.Now().Add(s.opts.TokenTTL)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": tok, "token_type": "bearer", "expires_in": int(s.opts.TokenTTL / time.Second),
		"issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
	})
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err == nil {
		err = json.Unmarshal(body, v)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "BadRequestException", "request body: %v", err)
		return false
	}
	return true
}

func (s *Server) namespaces(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		var parent icetable.Identifier
		if p := r.URL.Query().Get("parent"); p != "" {
			parent = ns(p)
		}
		list, err := s.cat.ListNamespaces(ctx, parent)
		if err != nil {
			catalogError(w, err)
			return
		}
		out := make([][]string, 0, len(list))
		for _, n := range list {
			if len(n) == len(parent)+1 { // the parent's children only
				out = append(out, n)
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"namespaces": out})
	case http.MethodPost:
		var req struct {
			Namespace  []string          `json:"namespace"`
			Properties map[string]string `json:"properties"`
		}
		if !decode(w, r, &req) {
			return
		}
		if len(req.Namespace) == 0 {
			writeError(w, http.StatusBadRequest, "BadRequestException", "no namespace")
			return
		}
		if err := s.cat.CreateNamespace(ctx, req.Namespace, req.Properties); err != nil {
			catalogError(w, err)
			return
		}
		if req.Properties == nil {
			req.Properties = map[string]string{}
		}
		writeJSON(w, http.StatusOK, req)
	default:
		writeError(w, http.StatusMethodNotAllowed, "BadRequestException", "%s", r.Method)
	}
}

func (s *Server) namespace(ctx context.Context, w http.ResponseWriter, r *http.Request, n icetable.Identifier) {
	switch r.Method {
	case http.MethodGet:
		props, err := s.cat.LoadNamespaceProperties(ctx, n)
		if err != nil {
			catalogError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"namespace": n, "properties": props})
	case http.MethodHead:
		ok, err := s.cat.CheckNamespaceExists(ctx, n)
		switch {
		case err != nil:
			catalogError(w, err)
		case ok:
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	case http.MethodDelete:
		if err := s.cat.DropNamespace(ctx, n); err != nil {
			catalogError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		writeError(w, http.StatusMethodNotAllowed, "BadRequestException", "%s", r.Method)
	}
}

// loadResult is the protocol's LoadTableResult of t.
func loadResult(t *icetable.Table) map[string]any {
	return map[string]any{"metadata-location": t.MetadataLocation(), "metadata": t.Metadata(), "config": map[string]string{}}
}

func (s *Server) tables(ctx context.Context, w http.ResponseWriter, r *http.Request, n icetable.Identifier) {
	switch r.Method {
	case http.MethodGet:
		type ident struct {
			Namespace []string `json:"namespace"`
			Name      string   `json:"name"`
		}
		out := []ident{}
		for id, err := range s.cat.ListTables(ctx, n) {
			if err != nil {
				catalogError(w, err)
				return
			}
			out = append(out, ident{id[:len(id)-1], id[len(id)-1]})
		}
		writeJSON(w, http.StatusOK, map[string]any{"identifiers": out})
	case http.MethodPost:
		var req struct {
			Name       string               `json:"name"`
			Location   string               `json:"location"`
			Schema     *icego.Schema        `json:"schema"`
			Spec       *icego.PartitionSpec `json:"partition-spec"`
			Order      *icetable.SortOrder  `json:"write-order"`
			Properties icego.Properties     `json:"properties"`
			Stage      bool                 `json:"stage-create"`
		}
		if !decode(w, r, &req) {
			return
		}
		if req.Name == "" || req.Schema == nil || req.Stage {
			writeError(w, http.StatusBadRequest, "BadRequestException", "create table: a name and a schema are required; staged creates are not supported")
			return
		}
		var opts []icecatalog.CreateTableOpt
		if req.Location != "" {
			opts = append(opts, icecatalog.WithLocation(req.Location))
		}
		if req.Spec != nil {
			opts = append(opts, icecatalog.WithPartitionSpec(req.Spec))
		}
		if req.Order != nil {
			opts = append(opts, icecatalog.WithSortOrder(*req.Order))
		}
		if req.Properties != nil {
			opts = append(opts, icecatalog.WithProperties(req.Properties))
		}
		t, err := s.cat.CreateTable(ctx, append(n, req.Name), req.Schema, opts...)
		if err != nil {
			catalogError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, loadResult(t))
	default:
		writeError(w, http.StatusMethodNotAllowed, "BadRequestException", "%s", r.Method)
	}
}

func (s *Server) register(ctx context.Context, w http.ResponseWriter, r *http.Request, n icetable.Identifier) {
	var req struct {
		Name     string `json:"name"`
		Metadata string `json:"metadata-location"`
	}
	if !decode(w, r, &req) {
		return
	}
	if req.Name == "" || req.Metadata == "" {
		writeError(w, http.StatusBadRequest, "BadRequestException", "register: name and metadata-location are required")
		return
	}
	if ok, err := s.cat.CheckNamespaceExists(ctx, n); err != nil || !ok {
		catalogError(w, errors.Join(err, icecatalog.ErrNoSuchNamespace))
		return
	}
	t, err := s.cat.RegisterTable(ctx, append(n, req.Name), req.Metadata)
	if err != nil {
		catalogError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, loadResult(t))
}

func (s *Server) table(ctx context.Context, w http.ResponseWriter, r *http.Request, id icetable.Identifier) {
	switch r.Method {
	case http.MethodGet:
		t, err := s.cat.LoadTable(ctx, id)
		if err != nil {
			catalogError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, loadResult(t))
	case http.MethodHead:
		ok, err := s.cat.CheckTableExists(ctx, id)
		switch {
		case err != nil:
			catalogError(w, err)
		case ok:
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	case http.MethodDelete:
		if err := s.cat.DropTable(ctx, id); err != nil {
			catalogError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case http.MethodPost:
		s.commit(ctx, w, r, id)
	default:
		writeError(w, http.StatusMethodNotAllowed, "BadRequestException", "%s", r.Method)
	}
}

// commit is CommitTable: the SQL catalog checks the requirements against
// the table's current metadata and swaps its pointer only if no one moved
// it since; either failing is 409 CommitFailedException.
func (s *Server) commit(ctx context.Context, w http.ResponseWriter, r *http.Request, id icetable.Identifier) {
	var req struct {
		Requirements icetable.Requirements `json:"requirements"`
		Updates      icetable.Updates      `json:"updates"`
	}
	if !decode(w, r, &req) {
		return
	}
	// A commit creates a table only when it asserts that it does not
	// exist (a staged create); else a missing table is 404.
	create := slices.ContainsFunc(req.Requirements, func(q icetable.Requirement) bool { return q.GetType() == "assert-create" })
	if ok, err := s.cat.CheckTableExists(ctx, id); err != nil || !ok && !create {
		catalogError(w, errors.Join(err, fmt.Errorf("%w: %s", icecatalog.ErrNoSuchTable, strings.Join(id, "."))))
		return
	}
	md, loc, err := s.cat.CommitTable(ctx, id, req.Requirements, req.Updates)
	if err != nil {
		if errors.Is(err, icetable.ErrCommitFailed) {
			s.mu.Lock()
			s.conflict++
			s.mu.Unlock()
		}
		catalogError(w, err)
		return
	}
	s.mu.Lock()
	s.commits++
	fail := 0
	if len(s.fail) > 0 {
		fail, s.fail = s.fail[0], s.fail[1:]
	}
	s.mu.Unlock()
	if fail != 0 {
		writeError(w, fail, "ServiceUnavailableException", "the catalog failed after committing (injected)")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"metadata-location": loc, "metadata": md})
}
