#!/usr/bin/env node
// query.mjs — the independent Parquet reader used by optlake's tests.
//
// Usage: node query.mjs 'SELECT ...'      (or the SQL on stdin when no argument)
//        node query.mjs --serve            (one query per line of stdin, see below)
//
// Runs the SQL in a fresh in-memory DuckDB (TimeZone = UTC); several statements
// separated by ";" run in order. Prints the result of the last statement as ONE
// JSON document on stdout:
//
//   {"columns":[{"name":"a","type":"BIGINT"},...],"rows":[["1",...],...]}
//
// With --serve it answers queries until stdin ends, one at a time, each in a
// fresh in-memory DuckDB of its own as above: each line of stdin is the SQL as
// a JSON string, each answer one line on stdout, the document above or
// {"error":"DuckDB's error"}. The tests keep a few of these processes (the
// start of node and of DuckDB's library costs more than most queries).
//
// Values are converted losslessly:
//   BIGINT/UBIGINT/HUGEINT/UHUGEINT/DECIMAL/BIGNUM -> decimal string
//   TINYINT..UINTEGER                               -> JSON number
//   FLOAT/DOUBLE -> JSON number; NaN/±Inf -> "NaN", "Infinity", "-Infinity"
//   TIMESTAMP[_S|_MS|_NS], TIMESTAMPTZ -> ISO-8601 UTC with milliseconds,
//       "2026-11-20T08:00:00.000Z"; sub-millisecond precision, when present, is kept
//       as extra digits ("...00.000123Z"); years outside 0000-9999 as "+294247-...";
//       ±infinity -> "infinity"/"-infinity"
//   DATE -> "YYYY-MM-DD"; BOOLEAN -> true/false; NULL -> null
//   LIST/ARRAY -> array; STRUCT -> object; MAP -> [{"key":..,"value":..}]
//   everything else (VARCHAR, UUID, BLOB, INTERVAL, ...) -> DuckDB's JSON form.
//
// On failure: exit code 1, the DuckDB error on stderr, nothing on stdout.

import {
  DuckDBInstance,
  DuckDBTypeId,
  JsonDuckDBValueConverter,
} from '@duckdb/node-api';
import readline from 'node:readline';

function floorDiv(a, b) {
  const q = a / b;
  return a % b !== 0n && (a < 0n) !== (b < 0n) ? q - 1n : q;
}

function pad(n, width) {
  return n.toString().padStart(width, '0');
}

// civilFromDays converts days since 1970-01-01 to a proleptic Gregorian
// [year, month, day] (H. Hinnant's algorithm, in BigInt so no range limit).
function civilFromDays(days) {
  const z = days + 719468n;
  const era = floorDiv(z, 146097n);
  const doe = z - era * 146097n;
  const yoe = (doe - doe / 1460n + doe / 36524n - doe / 146096n) / 365n;
  const doy = doe - (365n * yoe + yoe / 4n - yoe / 100n);
  const mp = (5n * doy + 2n) / 153n;
  const d = doy - (153n * mp + 2n) / 5n + 1n;
  const m = mp < 10n ? mp + 3n : mp - 9n;
  const y = yoe + era * 400n + (m <= 2n ? 1n : 0n);
  return [y, m, d];
}

// isoFromUnits formats `units` since the epoch, where one second is
// `perSecond` units (1, 1e3, 1e6 or 1e9), as ISO-8601 UTC with at least
// milliseconds: "2026-11-20T08:00:00.000Z". Finer precision, when present, is
// kept ("...:00.000001Z"), so nothing is lost. Years outside 0000-9999 use the
// expanded form "+294247-01-10T..." like JS Date. DuckDB's ±infinity
// (±(2^63-1)) become "infinity" / "-infinity".
function isoFromUnits(units, perSecond) {
  if (units === 2n ** 63n - 1n) return 'infinity';
  if (units === -(2n ** 63n - 1n)) return '-infinity';
  const perDay = 86400n * perSecond;
  const days = floorDiv(units, perDay);
  let rest = units - days * perDay; // 0 <= rest < perDay
  const secsOfDay = rest / perSecond;
  const frac = rest - secsOfDay * perSecond;
  const [y, m, d] = civilFromDays(days);
  const hh = secsOfDay / 3600n;
  const mi = (secsOfDay % 3600n) / 60n;
  const ss = secsOfDay % 60n;
  const digits = perSecond.toString().length - 1; // 0, 3, 6 or 9
  let fracStr = digits > 0 ? pad(frac, digits) : '';
  fracStr = (fracStr + '000').slice(0, Math.max(3, fracStr.replace(/0+$/, '').length));
  const year = y >= 0n && y <= 9999n ? pad(y, 4) : (y < 0n ? '-' : '+') + pad(y < 0n ? -y : y, 6);
  return `${year}-${pad(m, 2)}-${pad(d, 2)}T${pad(hh, 2)}:${pad(mi, 2)}:${pad(ss, 2)}.${fracStr}Z`;
}

function timestampToJson(value, type) {
  switch (type.typeId) {
    case DuckDBTypeId.TIMESTAMP:
    case DuckDBTypeId.TIMESTAMP_TZ:
      return isoFromUnits(value.micros, 1000000n);
    case DuckDBTypeId.TIMESTAMP_MS:
      return isoFromUnits(value.millis, 1000n);
    case DuckDBTypeId.TIMESTAMP_NS:
      return isoFromUnits(value.nanos, 1000000000n);
    case DuckDBTypeId.TIMESTAMP_S:
      return isoFromUnits(value.seconds, 1n);
  }
  throw new Error(`not a timestamp type: ${type}`);
}

const TIMESTAMP_TYPES = new Set([
  DuckDBTypeId.TIMESTAMP,
  DuckDBTypeId.TIMESTAMP_TZ,
  DuckDBTypeId.TIMESTAMP_MS,
  DuckDBTypeId.TIMESTAMP_NS,
  DuckDBTypeId.TIMESTAMP_S,
]);

// convert is a DuckDBValueConverter: DuckDB's own Json converter, with
// timestamps rendered as ISO-8601 UTC. Nested values (lists, structs, maps,
// unions) recurse through `convert`, so timestamps inside them match.
function convert(value, type, _self) {
  if (value == null) {
    return null;
  }
  if (TIMESTAMP_TYPES.has(type.typeId)) {
    return timestampToJson(value, type);
  }
  return JsonDuckDBValueConverter(value, type, convert);
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) {
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function writeOut(text) {
  return new Promise((resolve, reject) => {
    process.stdout.write(text, (err) => (err ? reject(err) : resolve()));
  });
}

// query runs sql in a fresh in-memory DuckDB and returns the result of its
// last statement as the JSON document (one line).
async function query(sql) {
  if (sql.trim() === '') {
    throw new Error('no SQL given (argv[2] or stdin)');
  }
  const instance = await DuckDBInstance.create(':memory:');
  const conn = await instance.connect();
  try {
    await conn.run("SET TimeZone='UTC'");
    // Run every statement in order; the last one's result is printed.
    const extracted = await conn.extractStatements(sql);
    if (extracted.count === 0) {
      throw new Error("no statement in the SQL given");
    }
    let reader;
    for (let i = 0; i < extracted.count; i++) {
      const stmt = await extracted.prepare(i);
      reader = await stmt.runAndReadAll();
    }
    const columns = [];
    for (let i = 0; i < reader.columnCount; i++) {
      columns.push({ name: reader.columnName(i), type: reader.columnType(i).toString() });
    }
    const rows = reader.convertRows(convert);
    return JSON.stringify({ columns, rows });
  } finally {
    conn.closeSync();
    instance.closeSync();
  }
}

function message(err) {
  return err && err.message ? err.message : String(err);
}

// serve answers each line of stdin (a JSON string: the SQL) with one line.
async function serve() {
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (line.trim() === '') {
      continue;
    }
    let out;
    try {
      out = await query(JSON.parse(line));
    } catch (err) {
      out = JSON.stringify({ error: message(err) });
    }
    await writeOut(out + '\n');
  }
}

async function main() {
  if (process.argv[2] === '--serve') {
    return serve();
  }
  const sql = process.argv.length > 2 ? process.argv[2] : await readStdin();
  await writeOut((await query(sql)) + '\n');
}

main().catch((err) => {
  const msg = message(err);
  process.stderr.write(msg.endsWith('\n') ? msg : msg + '\n');
  process.exitCode = 1;
});
