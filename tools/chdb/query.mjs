#!/usr/bin/env node
// query.mjs — a current ClickHouse (chDB: libchdb embedded in node) for
// optlake's tests.
//
// Usage: node query.mjs SESSION_DIR < statements.sql
//
// Runs the SQL on stdin (one or more statements, each ended by ";") in a chDB
// session kept in SESSION_DIR, so databases, tables and views persist from one
// call to the next. Prints the result of every statement that has one, in
// ClickHouse's TabSeparated format, as clickhouse-client --multiquery does.
// Only one session directory per process (a libchdb limit): one call, one
// directory.
//
// On failure: exit code 1, the ClickHouse error on stderr, nothing on stdout.
//
// Hive partitioning is off (use_hive_partitioning = 0): left on (ClickHouse's
// default), file() and the data lake table functions read every "key=value"
// folder of a file's absolute path as a column, and infer its type from the
// value. A test's temporary folder is named after the test (Go truncates the
// name to 64 characters, then appends random digits), so a subtest like
// ".../bucket=false" gets a folder ".../bucket=fal2140439/": inferred as Bool,
// the value fails to parse ("Unexpected data 'fal2140439' after parsed Number
// value '0'") in one subtest and not in its neighbour with a shorter name.
// The tests name the columns they read; a path is never one.

import { Session } from 'chdb';

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

async function main() {
  const dir = process.argv[2];
  if (!dir) {
    throw new Error('usage: node query.mjs SESSION_DIR < statements.sql');
  }
  const sql = await readStdin();
  if (sql.trim() === '') {
    throw new Error('no SQL on stdin');
  }
  const session = new Session(dir);
  try {
    await writeOut(session.query('SET use_hive_partitioning = 0;\n' + sql, 'TabSeparated'));
  } finally {
    session.close();
  }
}

main().catch((err) => {
  const msg = err && err.message ? err.message : String(err);
  process.stderr.write(msg.endsWith('\n') ? msg : msg + '\n');
  process.exitCode = 1;
});
