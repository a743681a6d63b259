// Package clustertest holds the tests of the ClickHouse sink against a real
// local cluster (internal/testenv.SharedCluster: ZooKeeper and 2 shards × 2
// replicas of clickhouse-server on 127.0.0.1), kept apart so that the rest
// of the test suite stays quick. It has no code of its own.
package clustertest
