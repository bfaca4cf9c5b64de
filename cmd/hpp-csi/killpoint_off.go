//go:build !hpp_killpoints

package main

// killPoint is nil in every build but the crash tests' (killpoint_on.go).
func killPoint() func(string) { return nil }
