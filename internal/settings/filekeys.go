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
	{Key: "endpoints.<name>.params", Type: "mapping key -> value",
		Usage: "query parameters, like --param name.key=value; a comma list fans out into one request per value"},
	{Key: "endpoints.<name>.maps.force", Type: "list of JSON paths",
		Usage: "account tables: objects at these paths are maps (one row per key in a child table) whatever their shape"},
	{Key: "endpoints.<name>.maps.forbid", Type: "list of JSON paths",
		Usage: "account tables: objects at these paths stay columns"},
	{Key: "accounts", Type: "list of {label, headers}", Default: "one account, default",
		Usage: "accounts snapshotted by the account endpoints, each with its own headers (like --account and --account-header)"},
}

// FileKeys returns every structured key of the config file, in order.
func FileKeys() []FileKey { return append([]FileKey(nil), fileKeys...) }
