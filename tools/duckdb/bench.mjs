#!/usr/bin/env node
// bench.mjs — DuckDB reference for optlake's benchmark (bench/cmd/optlake-bench).
//
// Usage: node bench.mjs --json FILE --out FILE.parquet --columns 'STRUCT(...)[]'
//                       [--threads N] [--max-object-size BYTES] [--no-records]
//
// Converts a get_instruments listing (a JSON array of {"instruments": [...]})
// to one zstd Parquet file, the way a user would with DuckDB:
//
//   COPY (SELECT * REPLACE (TRY_CAST(index_price AS DOUBLE) AS index_price)
//         FROM (SELECT unnest(instruments, recursive := true)
//               FROM read_json(FILE, format='array', records=true,
//                              columns={instruments: '<STRUCT>[]'})))
//   TO OUT (FORMAT parquet, COMPRESSION zstd)
//
// Prints one JSON line on stdout:
//   {"version":"v1.5.6","threads":1,"rows":1000000,"seconds":4.5,"out_bytes":123}
// "seconds" times the COPY statement only (not node or DuckDB start-up).
// On failure: exit code 1, the error on stderr.

import { statSync } from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';

function parseArgs(argv) {
  const opt = { threads: 1, maxObjectSize: 0, records: true };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case '--json': opt.json = next(); break;
      case '--out': opt.out = next(); break;
      case '--columns': opt.columns = next(); break;
      case '--threads': opt.threads = Number.parseInt(next(), 10); break;
      case '--max-object-size': opt.maxObjectSize = Number.parseInt(next(), 10); break;
      case '--no-records': opt.records = false; break;
      default: throw new Error(`unknown argument ${a}`);
    }
  }
  if (!opt.json || !opt.out || !opt.columns) {
    throw new Error('usage: bench.mjs --json FILE --out FILE --columns TYPE [--threads N] [--max-object-size BYTES]');
  }
  return opt;
}

const lit = (s) => `'${String(s).replaceAll("'", "''")}'`;

async function main() {
  const opt = parseArgs(process.argv.slice(2));
  const instance = await DuckDBInstance.create(':memory:');
  const conn = await instance.connect();
  try {
    const version = (await conn.runAndReadAll('SELECT version()')).getRows()[0][0];
    await conn.run(`SET threads = ${opt.threads}`);
    const args = [lit(opt.json), "format = 'array'"];
    if (opt.records) args.push('records = true');
    args.push(`columns = {instruments: ${lit(opt.columns)}}`);
    if (opt.maxObjectSize > 0) args.push(`maximum_object_size = ${opt.maxObjectSize}`);
    const sql = `COPY (SELECT * REPLACE (TRY_CAST(index_price AS DOUBLE) AS index_price)
      FROM (SELECT unnest(instruments, recursive := true) FROM read_json(${args.join(', ')})))
      TO ${lit(opt.out)} (FORMAT parquet, COMPRESSION zstd)`;
    const t0 = process.hrtime.bigint();
    const res = await conn.runAndReadAll(sql);
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    const rows = Number(res.getRows()[0][0]);
    const outBytes = statSync(opt.out).size;
    process.stdout.write(JSON.stringify({ version, threads: opt.threads, rows, seconds, out_bytes: outBytes }) + '\n');
  } finally {
    conn.closeSync();
    instance.closeSync();
  }
}

main().catch((err) => {
  const msg = err && err.message ? err.message : String(err);
  process.stderr.write(msg.endsWith('\n') ? msg : msg + '\n');
  process.exitCode = 1;
});
