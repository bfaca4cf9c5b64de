// Package logging builds the zap logger every hpp binary uses, from two
// flags shared by all of them.
package logging

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Options are the logging flags.
type Options struct {
	Level  string
	Format string
}

// AddFlags registers --log-level and --log-format.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Level, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&o.Format, "log-format", "json", "log format: json or text")
}

// Validate names each bad flag and why.
func (o *Options) Validate() []error {
	var errs []error
	if _, err := zapcore.ParseLevel(o.Level); err != nil || o.Level == "" {
		errs = append(errs, fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", o.Level))
	}
	switch strings.ToLower(o.Format) {
	case "json", "text", "console":
	default:
		errs = append(errs, fmt.Errorf("--log-format: %q is not one of json, text", o.Format))
	}
	return errs
}

// Build returns a logger for the options; call Validate first.
func (o *Options) Build() (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(o.Level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(level)
	cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	// Sampling hides repeated errors, which is the opposite of what an
	// operator debugging a storage problem wants.
	cfg.Sampling = nil
	if f := strings.ToLower(o.Format); f == "text" || f == "console" {
		cfg.Encoding = "console"
		cfg.EncoderConfig.EncodeLevel = zapcore.CapitalLevelEncoder
	}
	return cfg.Build()
}
