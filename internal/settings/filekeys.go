package settings

// FileKey documents a structured key of the config file: one that is not a
// setting of the list (those are keys under their flag names), such as
// headers, endpoints and accounts. The configuration reference
// (docs/configuration.md, `optlake docs config`) is generated from List and
// FileKeys, so a key the file parser accepts is added here too.
type FileKey struct {
	Key     string // the YAML path: "endpoints.<name>.path"
	Type    string // what it holds: "string", "list of {name, value}", …
	Default string // "" when none
	Usage   string // what it does
	Secret  bool   // values are redacted by `config check`; may be ${ENV} or a *_file
}

// fileKeys is every structured key, in the order the reference shows them.
var fileKeys = []FileKey{
	{Key: "headers", Type: "list of {name, value | value_file}", Secret: true,
		Usage: "headers sent with every request, like --header; a value may be ${ENV}, value_file reads it from a file"},
	{Key: "endpoints", Type: "list of names, or mapping name -> {path, params, maps}", Default: "every endpoint that needs no parameter",
		Usage: "the endpoints snapshotted, like --endpoints; as a mapping, each with its own settings below"},
	{Key: "endpoints.<name>.path", Type: "string", Default: "the venue's /v1/public/get_<name>",
		Usage: "the endpoint's path on the venue"},
	{Key: "endpoints.<name>.params", Type: "mapping key -> value | {value, split}",
		Usage: "query parameters, like --param name.key=value; a comma list (or a YAML list) fans out into one request per value; {value: 'A,B', split: false} sends it as one parameter, commas and all"},
	{Key: "endpoints.<name>.maps.force", Type: "list of JSON paths",
		Usage: "account tables: objects at these paths are maps (one row per key in a child table) whatever their shape"},
	{Key: "endpoints.<name>.maps.forbid", Type: "list of JSON paths",
		Usage: "account tables: objects at these paths stay columns"},
	{Key: "endpoints.<name>.method", Type: "GET | POST", Default: "GET",
		Usage: "the request's method; POST sends body (JSON-RPC over HTTP)"},
	{Key: "endpoints.<name>.body", Type: "string (JSON)",
		Usage: "the body of a POST request, sent as application/json; ${VAR} is the environment variable (redacted like a secret), a $ otherwise stays as written"},
	{Key: "endpoints.<name>.records", Type: "dotted path, or {path, key, columns}", Default: "the whole body",
		Usage: "where the rows are in each body (result, data.items); the rest is envelope, kept only in the raw archive. key: an object there holds rows by name, one row per member with its name in this column (Kraken's result: {\"XXBTZUSD\": {…}}); columns: rows that are arrays get these names by position"},
	{Key: "endpoints.instruments.fields", Type: "mapping column -> venue field | {from, value, values, default, time, scale, decimals, split, part}",
		Usage: "the listing's fields by instruments column (instrument_name: instId); from is a dotted path in the record, value a constant; values replaces codes (C: call), default the codes not listed; time: iso, s, ms, us or ns makes epoch milliseconds; scale multiplies a number, decimals by 10^-(the record's field of that name: Bitget's priceEndStep at pricePlace); split and part take a piece of a text (part 2 of BTC-29DEC23-40000-C split at - is the strike); numbers sent as strings become numbers, \"\" null; the other fields go to extra"},
	{Key: "endpoints.<name>.kind", Type: "account | public",
		Usage: "an endpoint beyond the venue's: an inferred table named after it, requested per account (account) or once (public)"},
	{Key: "endpoints.<name>.auth", Type: "none, or an auth mapping (see auth)", Default: "the account's, else the top-level auth",
		Usage: "the endpoint's own authentication; none sends no credentials (no headers either)"},
	{Key: "endpoints.<name>.pagination", Type: "{type, max_pages, …}", Default: "one page",
		Usage: "type cursor {cursor_path or cursor_from_record (a field of the page's last record; cursor_plus adds to it), cursor_param, limit_param, limit}, next_url {next_path}, link_header (RFC 8288 rel=next), offset {offset_param, limit_param, limit, total_path} or page {page_param, start, limit_param, limit, total_path}; max_pages (default 10000) or a cursor/URL seen twice fails the endpoint; an offset or page walk short of total, or that received an instrument twice, is walked again (3 walks) and then fails the endpoint"},
	{Key: "endpoints.<name>.errors", Type: "{path, code, message, ok, non_empty, retry_codes}", Default: "the top-level errors",
		Usage: "the endpoint's own error bodies (see errors)"},
	{Key: "accounts", Type: "list of {label, headers, auth}", Default: "one account, default",
		Usage: "accounts snapshotted by the account endpoints, each with its own headers (like --account and --account-header) and auth"},
	{Key: "auth", Type: "{type, …}", Secret: true,
		Usage: "authentication of every request: type headers {headers}, bearer {token}, basic {user, password}, query_key {name, value}, oauth2 {token_url, client_id, client_secret, scopes}, session {login: {method, path, query, body}, token, expires_in, headers}, hmac {key, secret, hash, encoding, timestamp, sign, headers, query}, template {key, secret, passphrase, vars, timestamp, query, params, body, content_type, sign, headers} (Go templates with signing functions); secret values may be ${ENV} or @file (docs/real-venues.md)"},
	{Key: "errors", Type: "{path, code, message, ok, non_empty, retry_codes}",
		Usage: "error bodies: a 2xx body fails the request (\"venue error CODE: MESSAGE\", never loaded as rows) when path is present and not null (with non_empty: true, not empty either), or when ok lists the codes of success and the code is not one of them; codes in retry_codes are retried like a 429, in 2xx bodies and in 4xx answers (other 4xx fail at once)"},
}

// FileKeys returns every structured key of the config file, in order.
func FileKeys() []FileKey { return append([]FileKey(nil), fileKeys...) }
