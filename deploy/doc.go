// Package deploy holds examples for running optlake on a schedule: a
// systemd service and timer, a Kubernetes CronJob (with the kustomization
// that names its image), an Airflow DAG, a crontab line and an example
// config file (see README.md in this folder). It has no code; its tests
// check that every example parses, uses only real flags and OPTLAKE_*
// variables of `optlake run`, and passes the tools that are installed
// (systemd-analyze, python3, sh, kubectl kustomize); TestImage checks the
// release's container image that make release-ci builds.
package deploy
