// Package signals turns SIGTERM and SIGINT into context cancellation, so
// every binary stops the same way: in-flight work finishes, then Run returns.
package signals

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Context returns a context cancelled on the first SIGTERM or SIGINT. A
// second signal exits at once, for an operator who really means it.
func Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		select {
		case <-ch:
			cancel()
		case <-ctx.Done():
			signal.Stop(ch)
			return
		}
		<-ch
		os.Exit(1)
	}()
	return ctx, cancel
}
