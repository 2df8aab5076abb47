// Package retry runs an operation again after transient failures, with capped
// exponential backoff and full jitter.
package retry

import (
	"context"
	"errors"
	"math/rand"
	"time"
)

// ErrPermanent marks an error that must not be retried.
var ErrPermanent = errors.New("permanent failure")

// Policy says how often and how long to retry.
type Policy struct {
	Attempts int
	Base     time.Duration
	Max      time.Duration
}

// Backoff returns the wait before attempt n (0-based), before jitter.
func (p Policy) Backoff(n int) time.Duration {
	d := p.Base << uint(n)
	if d <= 0 || d > p.Max {
		return p.Max
	}
	return d
}

// Do calls op until it succeeds, returns a permanent error, the attempts run out,
// or ctx is done. The last error is returned.
func Do(ctx context.Context, p Policy, op func(context.Context) error) error {
	var err error
	for attempt := 0; attempt < p.Attempts; attempt++ {
		err = op(ctx)
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrPermanent) {
			return err
		}
		wait := time.Duration(rand.Int63n(int64(p.Backoff(attempt)) + 1))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	return err
}
