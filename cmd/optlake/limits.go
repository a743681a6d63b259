package main

import (
	"golang.org/x/time/rate"

	"github.com/optlake/optlake/pipeline/extract"
	"github.com/optlake/optlake/pipeline/infer"
)

// validateLimits checks --rate-limit, --rate-burst, --column-budget and the
// map rules without building anything.
// It returns the parsed rate limit.
func (j *job) validateLimits() (rate.Limit, error) {
	l, err := extract.ParseRate(j.RateLimit)
	if err != nil {
		return 0, usagef("--rate-limit: %v", err)
	}
	if j.RateBurst < 0 {
		return 0, usagef("--rate-burst %d: want at least 1", j.RateBurst)
	}
	if err := j.policy().Validate(); err != nil {
		return 0, usagef("--column-budget / endpoints.*.maps: %v", err)
	}
	return l, nil
}

func (j *job) policy() infer.Policy {
	return infer.Policy{ColumnBudget: j.ColumnBudget, Maps: j.Maps}
}

// setInferPolicy applies --column-budget and the config file's map rules to
// the account tables' registry.
func (j *job) setInferPolicy(reg *infer.Registry) error {
	if err := reg.SetPolicy(j.policy()); err != nil {
		return usagef("--column-budget / endpoints.*.maps: %v", err)
	}
	return nil
}
