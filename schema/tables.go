package schema

// Meta columns carried by every snapshot row.
var metaColumns = []Column{
	{Name: "snapshot_time", Type: TimestampMs, Doc: "when the snapshot was taken (UTC, ms)"},
	{Name: "run_id", Type: String, Doc: "time-sortable id of the run (UUIDv7)"},
	{Name: "source", Type: String, LowCardinality: true, Doc: "the venue's name (--source, default the API URL's host)"},
}

// Instruments is the flattened instrument listing of GET /v1/public/get_instruments:
// the 25 venue fields under their own names (index_price parsed), the raw
// index price text, timestamps parsed from the raw epoch values, and unknown
// fields kept as JSON text. Every venue field is nullable: the venue states no
// nullability; instrument_name is the key and is required.
var Instruments = &Table{
	Name: "instruments",
	Doc:  "one row per instrument per snapshot",
	Columns: append(append([]Column{}, metaColumns...),
		Column{Name: "base_currency", Type: String, JSON: JSONString, Nullable: true, LowCardinality: true},
		Column{Name: "block_trade_commission", Type: Float64, JSON: JSONNumber, Nullable: true},
		Column{Name: "block_trade_min_trade_amount", Type: Float64, JSON: JSONNumber, Nullable: true},
		Column{Name: "block_trade_tick_size", Type: Float64, JSON: JSONNumber, Nullable: true},
		Column{Name: "contract_size", Type: Float64, JSON: JSONNumber, Nullable: true},
		Column{Name: "counter_currency", Type: String, JSON: JSONString, Nullable: true, LowCardinality: true, Unfiltered: true},
		Column{Name: "creation_timestamp", Type: Int64, JSON: JSONInteger, Nullable: true, Doc: "raw epoch value as sent"},
		Column{Name: "deployed", Type: Bool, JSON: JSONBool, Nullable: true},
		Column{Name: "expiration_timestamp", Type: Int64, JSON: JSONInteger, Nullable: true, Doc: "raw epoch value as sent"},
		Column{Name: "index_price", Type: Float64, JSON: JSONDecimalText, Nullable: true, Doc: "index_price_raw parsed; null when not a finite decimal number"},
		Column{Name: "instrument_id", Type: String, JSON: JSONString, Nullable: true, SharedPrefix: true, Unfiltered: true},
		Column{Name: "instrument_name", Type: String, JSON: JSONString, SharedPrefix: true},
		Column{Name: "instrument_type", Type: String, JSON: JSONString, Nullable: true, LowCardinality: true},
		Column{Name: "is_active", Type: Bool, JSON: JSONBool, Nullable: true},
		Column{Name: "kind", Type: String, JSON: JSONString, Nullable: true, LowCardinality: true},
		Column{Name: "maker_commission", Type: Float64, JSON: JSONNumber, Nullable: true},
		Column{Name: "min_trade_amount", Type: Float64, JSON: JSONNumber, Nullable: true},
		Column{Name: "option_type", Type: String, JSON: JSONString, Nullable: true, LowCardinality: true},
		Column{Name: "quote_currency", Type: String, JSON: JSONString, Nullable: true, LowCardinality: true, Unfiltered: true},
		Column{Name: "rfq", Type: Bool, JSON: JSONBool, Nullable: true},
		Column{Name: "settlement_currency", Type: String, JSON: JSONString, Nullable: true, LowCardinality: true, Unfiltered: true},
		Column{Name: "settlement_period", Type: String, JSON: JSONString, Nullable: true, LowCardinality: true},
		Column{Name: "strike", Type: Float64, JSON: JSONNumber, Nullable: true},
		Column{Name: "taker_commission", Type: Float64, JSON: JSONNumber, Nullable: true},
		Column{Name: "tick_size", Type: Float64, JSON: JSONNumber, Nullable: true},
		Column{Name: "index_price_raw", Type: String, Nullable: true, Unfiltered: true, Doc: "index_price exactly as received"},
		Column{Name: "creation_time", Type: TimestampMs, Nullable: true, Doc: "creation_timestamp as UTC time (unit detected or --timestamp-unit)"},
		Column{Name: "expiration_time", Type: TimestampMs, Nullable: true, Doc: "expiration_timestamp as UTC time"},
		Column{Name: "extra", Type: String, Nullable: true, Unfiltered: true, Doc: "unknown fields as a JSON object, values as received"},
	),
	Key:           []string{"source", "instrument_name", "snapshot_time"},
	PartitionTime: "snapshot_time",
}

// Rejects holds every input row that could not be loaded, with the reason.
var Rejects = &Table{
	Name: "rejects",
	Doc:  "rows that could not be loaded, with the reason and the row as received",
	Columns: append(append([]Column{}, metaColumns...),
		Column{Name: "endpoint", Type: String, LowCardinality: true},
		Column{Name: "row_index", Type: Int64, Doc: "position of the row in the response (0-based, across groups)"},
		Column{Name: "reason", Type: String},
		Column{Name: "raw", Type: String, Doc: "the row's JSON as received (invalid UTF-8 replaced; the raw archive has the exact bytes)"},
	),
	Key:           []string{"source", "endpoint", "snapshot_time", "row_index"},
	PartitionTime: "snapshot_time",
}

// Runs has one row per run and endpoint.
var Runs = &Table{
	Name: "runs",
	Doc:  "one row per run and endpoint",
	Columns: append(append([]Column{}, metaColumns...),
		Column{Name: "endpoint", Type: String, LowCardinality: true},
		Column{Name: "status", Type: String, LowCardinality: true, Doc: "ok | failed"},
		Column{Name: "rows", Type: Int64},
		Column{Name: "rejects", Type: Int64},
		Column{Name: "bytes", Type: Int64, Doc: "response bytes received (decompressed)"},
		Column{Name: "duration_ms", Type: Int64},
		Column{Name: "error", Type: String, Nullable: true},
	),
	Key:           []string{"source", "endpoint", "snapshot_time", "run_id"},
	PartitionTime: "snapshot_time",
}

// InstrumentEvents is what changed between consecutive snapshots of the
// instrument listing of one source.
var InstrumentEvents = &Table{
	Name: "instrument_events",
	Doc:  "lifecycle events and parameter changes derived by comparing consecutive snapshots",
	Columns: append(append([]Column{}, metaColumns...),
		Column{Name: "instrument_name", Type: String, SharedPrefix: true},
		Column{Name: "event", Type: String, LowCardinality: true, Doc: "listed | delisted | expired | activated | deactivated | deployed | undeployed | changed"},
		Column{Name: "field", Type: String, Doc: "the venue field for changed (and the flag for flips); empty otherwise"},
		Column{Name: "old_value", Type: String, Nullable: true, Doc: "value before, as text (null when it was null or absent)"},
		Column{Name: "new_value", Type: String, Nullable: true, Doc: "value after, as text"},
		Column{Name: "previous_snapshot_time", Type: TimestampMs, Nullable: true, Doc: "the last snapshot before this one (the event happened between the two)"},
		Column{Name: "initial", Type: Bool, Doc: "true for the listed events of the first snapshot of a data directory (not a real listing)"},
	),
	Key:           []string{"source", "instrument_name", "snapshot_time", "event", "field"},
	PartitionTime: "snapshot_time",
}

// InferredColumns records the schema of the tables inferred from account
// payloads: one row per table and column, with when it first appeared. It is
// rewritten whole whenever a table evolves (the key deduplicates).
var InferredColumns = &Table{
	Name: "inferred_columns",
	Doc:  "the columns of the account tables inferred from payloads, with when each first appeared",
	Columns: []Column{
		{Name: "table_name", Type: String},
		{Name: "column_name", Type: String},
		{Name: "position", Type: Int64, Doc: "column order in the table"},
		{Name: "type", Type: String, Doc: "logical type, e.g. float64 or list<string>"},
		{Name: "role", Type: String, Doc: "meta, value, num, time, json or a variant v_<type>"},
		{Name: "field", Type: String, Doc: "the JSON path the column comes from"},
		{Name: "first_seen", Type: TimestampMs, Nullable: true, Doc: "snapshot time the column first appeared (null for meta columns)"},
		{Name: "recorded_at", Type: TimestampMs, Doc: "snapshot time of the run that recorded this row"},
	},
	Key:           []string{"table_name", "column_name"},
	PartitionTime: "",
}

// Tables lists every fixed table.
func Tables() []*Table {
	return []*Table{Instruments, Rejects, Runs, InstrumentEvents, InferredColumns}
}

// DefaultBatchRows is the rows of one Arrow record batch unless --batch-rows
// says otherwise (the transform, events and inferred account tables all
// default to it).
const DefaultBatchRows = 32768

// SortKey returns the columns a compacted Parquet file of the named table
// is sorted by: the table's Key (what identifies a row, the ClickHouse
// ORDER BY), so that one instrument's or one account's rows of a day sit
// together and row-group statistics skip the rest. Tables inferred from
// account payloads (any name that is not a fixed table) use AccountKey. It
// returns nil for a table without a partition time (not compacted).
func SortKey(table string) []string {
	for _, t := range Tables() {
		if t.Name == table {
			if t.PartitionTime == "" {
				return nil
			}
			return t.Key
		}
	}
	return AccountKey
}
