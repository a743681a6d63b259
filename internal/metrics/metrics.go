// Package metrics exports run metrics for Prometheus (placeholder until the
// package is written).
package metrics

import _ "github.com/prometheus/client_golang/prometheus"
