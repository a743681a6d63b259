#!/usr/bin/env node
// compact_bench.mjs — DuckDB side of optlake's compaction benchmark
// (bench/cmd/optlake-compact-bench).
//
// Usage:
//   node compact_bench.mjs sort --in GLOB|--in-list FILE --out FILE.parquet
//       (--in-list: a file naming the Parquet files, one a line)
//       DuckDB's own sorted single file of the same rows:
//       COPY (SELECT * FROM read_parquet(GLOB) ORDER BY source, instrument_name, snapshot_time)
//       TO FILE (FORMAT parquet, COMPRESSION zstd)
//       prints {"version":…,"rows":N,"seconds":S,"out_bytes":B}
//   node compact_bench.mjs query --lake NAME=GLOB [--lake NAME=GLOB …] --instrument NAME [--runs N]
//       times the three notebook queries on each lake (a fresh
//       connection per lake, one untimed warm-up, then the fastest of N
//       runs), and checks every lake gives the same answer;
//       prints {"version":…,"queries":{"<query>":{"<lake>":ms,…},…}}
// On failure: exit code 1, the error on stderr.

import { readFileSync, statSync } from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';

const lit = (s) => (Array.isArray(s) ? `[${s.map(lit).join(', ')}]` : `'${String(s).replaceAll("'", "''")}'`);

const queries = {
  // count per snapshot × currency
  count_per_snapshot_currency: (g) =>
    `SELECT snapshot_time, base_currency, count(*) AS n FROM read_parquet(${lit(g)}) GROUP BY ALL ORDER BY ALL`,
  // one instrument's history
  instrument_history: (g, inst) =>
    `SELECT snapshot_time, index_price, is_active, tick_size FROM read_parquet(${lit(g)}) WHERE instrument_name = ${lit(inst)} ORDER BY snapshot_time`,
  // BTC index price history
  btc_index_history: (g) =>
    `SELECT snapshot_time, max(index_price) AS index_price FROM read_parquet(${lit(g)}) WHERE base_currency = 'BTC' GROUP BY snapshot_time ORDER BY snapshot_time`,
};

function parseArgs(argv) {
  const opt = { mode: argv[0], lakes: [], runs: 5 };
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case '--in': opt.in = next(); break;
      case '--out': opt.out = next(); break;
      case '--in-list': opt.inList = next(); break;
      case '--lake': {
        const v = next();
        const eq = v.indexOf('=');
        if (eq < 0) throw new Error('--lake wants NAME=GLOB');
        opt.lakes.push([v.slice(0, eq), v.slice(eq + 1)]);
        break;
      }
      case '--instrument': opt.instrument = next(); break;
      case '--runs': opt.runs = Number.parseInt(next(), 10); break;
      default: throw new Error(`unknown argument ${a}`);
    }
  }
  return opt;
}

async function sort(conn, opt) {
  if (opt.inList) {
    const files = readFileSync(opt.inList, 'utf8').split('\n').filter((l) => l !== '');
    opt.in = files;
  }
  if (!opt.in || !opt.out) throw new Error('sort needs --in (or --in-list) and --out');
  const t0 = process.hrtime.bigint();
  const res = await conn.runAndReadAll(`COPY (SELECT * FROM read_parquet(${lit(opt.in)}) ORDER BY source, instrument_name, snapshot_time)
    TO ${lit(opt.out)} (FORMAT parquet, COMPRESSION zstd)`);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  return { rows: Number(res.getRows()[0][0]), seconds, out_bytes: statSync(opt.out).size };
}

async function query(instance, opt) {
  if (opt.lakes.length === 0 || !opt.instrument) throw new Error('query needs --lake and --instrument');
  const out = {};
  const answers = {};
  for (const [q, sql] of Object.entries(queries)) {
    out[q] = {};
    for (const [name, glob] of opt.lakes) {
      const conn = await instance.connect();
      try {
        const text = sql(glob, opt.instrument);
        const warm = await conn.runAndReadAll(text);
        const answer = JSON.stringify(warm.getRowsJson());
        if (answers[q] === undefined) answers[q] = answer;
        else if (answers[q] !== answer) throw new Error(`${q}: lake ${name} answers differently`);
        let best = Infinity;
        for (let r = 0; r < opt.runs; r++) {
          const t0 = process.hrtime.bigint();
          await conn.runAndReadAll(text);
          best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e6);
        }
        out[q][name] = best;
      } finally {
        conn.closeSync();
      }
    }
  }
  return { queries: out };
}

async function main() {
  const opt = parseArgs(process.argv.slice(2));
  const instance = await DuckDBInstance.create(':memory:');
  const conn = await instance.connect();
  try {
    const version = (await conn.runAndReadAll('SELECT version()')).getRows()[0][0];
    await conn.run('SET threads = 1');
    let res;
    switch (opt.mode) {
      case 'sort': res = await sort(conn, opt); break;
      case 'query': res = await query(instance, opt); break;
      default: throw new Error('usage: compact_bench.mjs sort|query …');
    }
    process.stdout.write(JSON.stringify({ version, ...res }) + '\n');
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
