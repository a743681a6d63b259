package extract

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// ParseRate parses a request rate: "N/s", "N/m" (or "/min"), "N/h", or a
// plain "N" (per second); N may be fractional ("0.5/s"). "" and "0" mean
// unlimited (0).
func ParseRate(s string) (rate.Limit, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return 0, nil
	}
	num, unit, _ := strings.Cut(s, "/")
	per := time.Second
	switch strings.ToLower(strings.TrimSpace(unit)) {
	case "", "s", "sec", "second":
	case "m", "min", "minute":
		per = time.Minute
	case "h", "hour":
		per = time.Hour
	default:
		return 0, fmt.Errorf("rate %q: want N/s, N/m or N/h", s)
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || n < 0 || n != n || n > 1e9 {
		return 0, fmt.Errorf("rate %q: want a non-negative number of requests, e.g. 1/s or 30/m", s)
	}
	return rate.Limit(n / per.Seconds()), nil
}

// FormatRate renders a limit as requests per second ("unlimited" for 0).
func FormatRate(l rate.Limit) string {
	if l <= 0 {
		return "unlimited"
	}
	return strconv.FormatFloat(float64(l), 'g', 4, 64) + "/s"
}
