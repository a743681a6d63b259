package main

import (
	"github.com/optlake/optlake/pipeline/extract"
	"github.com/optlake/optlake/pipeline/infer"
)

// validateLimits checks --rate-limit, --rate-burst, --column-budget and the
// map rules without building anything.
func (j *job) validateLimits() error {
	if err := j.rateLimit(&extract.Options{}); err != nil {
		return err
	}
	if err := j.policy().Validate(); err != nil {
		return usagef("--column-budget / endpoints.*.maps: %v", err)
	}
	return nil
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

// rateLimit parses --rate-limit and --rate-burst into the client's options.
func (j *job) rateLimit(o *extract.Options) error {
	l, err := extract.ParseRate(j.RateLimit)
	if err != nil {
		return usagef("--rate-limit: %v", err)
	}
	if j.RateBurst < 0 {
		return usagef("--rate-burst %d: want at least 1", j.RateBurst)
	}
	o.RateLimit, o.RateBurst = l, j.RateBurst // 0: the client's default, 1
	return nil
}
